#!/usr/bin/env python
"""The main job: MSA vs Hydra vs hybrid backbones trained and evaluated side by side.

See ``python tools/compare.py --help``; the job is hydra_dense/compare/job.py, its options hydra_dense/compare/cli.py.
"""
import sys


from hydra_dense.compare import entry

if __name__ == "__main__":
    sys.exit(entry())
