#!/usr/bin/env python
"""Look at what the models do: segmentation overlays, detections, and Hydra vs MSA attention maps.

See ``python tools/visualize.py --help``; the code is :mod:`hydra_dense.visualize`.
"""
import sys

from hydra_dense.visualize import main

if __name__ == "__main__":
    sys.exit(main())
