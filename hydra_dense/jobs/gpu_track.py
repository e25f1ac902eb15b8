"""The large-token track at full scale on one GPU, in one command: MSA, the recommended Hydra recipe
and its local-only control, 3 seeds each, 1,000 fine-tuning steps, written as the comparison's
usual table (``<out>/table.md``, ``report.html``, ...) with speed at the track's 448² (1,024 tokens)
and at 1024².

    python tools/gpu_track.py                   # one CUDA GPU; about 8 minutes on an H200 (bf16)
    python tools/gpu_track.py --dry-run         # the same command at toy steps on the CPU (CI runs it)

Extra ``--key=value`` arguments go to the comparison (LightningCLI overrides included).
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

import torch

from ..runtime.refusal import plain_refusals
from .compare import CONVERTIBLE_PLANS, LARGE_DEMO_CONFIG
from .compare import main as compare_main

__all__ = ["main", "entry", "GPU_TRACK_PLANS"]

# MSA, the recommended all-Hydra recipe and its control: the same local branch without the global term
GPU_TRACK_PLANS = CONVERTIBLE_PLANS


def comparison_arguments(dry_run: bool, out: str, extra: list[str]) -> list[str]:
    """The comparison's command line: full scale on a GPU, or toy steps on the CPU."""
    args = ["--config", LARGE_DEMO_CONFIG, "--plans", GPU_TRACK_PLANS, "--out", out]
    if dry_run:
        return args + ["--seeds", "0", "--max-steps", "2", "--convert-steps", "2", "--speed-size", "0",
                       "--speed-repeats", "1", "--trainer.val_check_interval=2", "--trainer.limit_val_batches=2",
                       "--data.init_args.limit_train=16", *extra]
    return args + ["--seeds", "0,1,2", "--max-steps", "1000", "--trainer.val_check_interval=500",
                   "--trainer.precision=bf16-mixed", "--data.init_args.num_workers=8", *extra]


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="toy steps on the CPU, one seed (what CI runs)")
    p.add_argument("--out", default="runs/gpu_track")
    args, extra = p.parse_known_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        raise ValueError("the GPU track needs a CUDA GPU; --dry-run runs the same command at toy steps on the CPU")
    return compare_main(comparison_arguments(args.dry_run, args.out, extra))


# ``tools/gpu_track.py``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main)


if __name__ == "__main__":
    sys.exit(entry())
