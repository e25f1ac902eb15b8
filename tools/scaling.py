#!/usr/bin/env python
"""Data-parallel scaling report; see hydra_dense/bench/scaling.py and ``python tools/scaling.py --help``."""
import sys

from hydra_dense.bench.scaling import main

if __name__ == "__main__":
    sys.exit(main())
