#!/usr/bin/env python
"""Export a trained task to ONNX (and a torch.export program), checked in onnxruntime.

See ``python tools/export.py --help`` and hydra_dense/deploy/.
"""
import sys


from hydra_dense.deploy.__main__ import entry

if __name__ == "__main__":
    sys.exit(entry())
