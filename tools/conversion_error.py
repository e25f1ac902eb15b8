#!/usr/bin/env python
"""Held-out conversion error of a converted backbone at several crop sizes (token counts).

See ``python tools/conversion_error.py --help`` and hydra_dense/convert/.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hydra_dense.convert.measure import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
