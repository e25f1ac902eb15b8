#!/usr/bin/env python
"""Convert an MSA-pretrained ViT into a Hydra / hybrid ViT before fine-tuning.

See ``python tools/convert.py --help``, hydra_dense/comparison/convert_command.py and hydra_dense/conversion/.
"""
import sys


from hydra_dense.comparison.convert_command import entry

if __name__ == "__main__":
    sys.exit(entry())
