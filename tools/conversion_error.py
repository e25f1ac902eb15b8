#!/usr/bin/env python
"""Held-out conversion error of a converted backbone at several crop sizes (token counts).

See ``python tools/conversion_error.py --help`` and hydra_dense/conversion/.
"""
import sys


from hydra_dense.conversion.measure import main

if __name__ == "__main__":
    sys.exit(main())
