#!/usr/bin/env python
"""The main job: MSA vs Hydra vs hybrid backbones trained and evaluated side by side.

See ``python tools/compare.py --help``; the job is hydra_dense/comparison/job.py, its command line
hydra_dense/comparison/command.py.
"""
import sys


from hydra_dense.comparison.command import entry

if __name__ == "__main__":
    sys.exit(entry())
