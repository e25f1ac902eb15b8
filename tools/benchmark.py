#!/usr/bin/env python
"""Speed, memory and FLOPs of MSA / Hydra / hybrid / ViTDet / no-mixing backbones, side by side.

See ``python tools/benchmark.py --help``; the code is :mod:`hydra_dense.bench.command`.
"""
import sys

from hydra_dense.bench.command import main

if __name__ == "__main__":
    sys.exit(main())
