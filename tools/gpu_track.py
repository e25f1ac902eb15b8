#!/usr/bin/env python
"""The large-token track at full scale on one GPU; see hydra_dense/comparison/gpu_track.py and
``python tools/gpu_track.py --help``."""
import sys

from hydra_dense.comparison.gpu_track import entry

if __name__ == "__main__":
    sys.exit(entry())
