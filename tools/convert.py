#!/usr/bin/env python
"""Convert an MSA-pretrained ViT into a Hydra / hybrid ViT before fine-tuning.

See ``python tools/convert.py --help`` and hydra_dense/convert/.
"""
import sys


from hydra_dense.convert.__main__ import entry

if __name__ == "__main__":
    sys.exit(entry())
