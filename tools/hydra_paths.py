"""What each path of a trained Hydra model carries (global term vs local branch); see
hydra_dense.comparison.path_diagnostic.

    python tools/hydra_paths.py --run runs/compare/hydra+mean+dwc7@converted/seed0 --per-block
"""
import sys

from hydra_dense.comparison.path_diagnostic import entry

if __name__ == "__main__":
    sys.exit(entry())
