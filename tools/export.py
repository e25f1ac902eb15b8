#!/usr/bin/env python
"""Export a trained task to ONNX (and a torch.export program), checked in onnxruntime.

See ``python tools/export.py --help`` and hydra_dense/deploy/.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hydra_dense.deploy.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
