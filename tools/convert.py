#!/usr/bin/env python
"""Convert an MSA-pretrained ViT into a Hydra / hybrid ViT before fine-tuning.

See ``python tools/convert.py --help`` and hydra_dense/convert/.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hydra_dense.convert.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
