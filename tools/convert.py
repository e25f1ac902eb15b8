#!/usr/bin/env python
"""Convert an MSA-pretrained ViT into a Hydra / hybrid ViT before fine-tuning.

See ``python tools/convert.py --help``, hydra_dense/jobs/convert.py and hydra_dense/convert/.
"""
import sys


from hydra_dense.jobs.convert import entry

if __name__ == "__main__":
    sys.exit(entry())
