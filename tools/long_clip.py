#!/usr/bin/env python
"""Long clips: the largest clip a ViT-B training step fits with MSA and with Hydra, on this machine.

See ``python tools/long_clip.py --help``; the code is :mod:`hydra_dense.bench.long_clip`.
"""
import sys

from hydra_dense.bench.long_clip import main

if __name__ == "__main__":
    sys.exit(main())
