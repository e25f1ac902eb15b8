#!/usr/bin/env python
"""The CUDA path in one run: Triton kernels, their bandwidth, ViT-B speed and a DDP training smoke
run of each task; see hydra_dense/bench/gpu_check_command.py and ``python tools/gpu_check.py --help``.
"""
import sys

from hydra_dense.bench.gpu_check_command import main

if __name__ == "__main__":
    sys.exit(main())
