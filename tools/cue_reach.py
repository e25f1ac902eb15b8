"""How far a presence-track cue travels through a trained backbone, block by block; see
hydra_dense.comparison.cue_reach.

    python tools/cue_reach.py --run runs/context_presence_whole/msa/seed0
"""
import sys

from hydra_dense.comparison.cue_reach import entry

if __name__ == "__main__":
    sys.exit(entry())
