"""``hydra-dense-convert`` / ``python tools/convert.py``: convert MSA weights into a Hydra plan, in
one of two modes.

    hydra-dense-convert                                          # DINOv2 ViT-S/14 -> all-Hydra + dwc3
    hydra-dense-convert --config configs/convert/dinov2_s14_hydra_dwc3.yaml \\
        --model.init_args.backbone.init_args.plan='{default: hydra}' --trainer.max_steps=300
    hydra-dense-convert --config ... --ckpt_path last            # resume an interrupted conversion
    hydra-dense-convert --from-run RUN_DIR                       # a finished MSA run -> Hydra, fine-tuned, report

Without ``--from-run`` every other argument is a LightningCLI override, as for ``tools/train.py
fit`` (:mod:`hydra_dense.conversion`); the embedded natural images a config points at are prepared
first. ``--from-run``: :mod:`hydra_dense.comparison.from_run`.
"""
from __future__ import annotations

import sys
from typing import Optional

from ..conversion.command import main as convert_main
from ..runtime.refusal import plain_refusals
from .from_run import main as from_run_main

__all__ = ["main", "entry"]


def main(argv: Optional[list[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    asks_help = any(a in ("-h", "--help") for a in args)
    if any(a == "--from-run" or a.startswith("--from-run=") for a in args):
        # "--from-run --help": argparse would take --help for the missing RUN_DIR
        return from_run_main(["--help"] if asks_help else args)
    if asks_help and args[:1] != ["fit"]:  # the two modes; the ~50 trainer options with `fit --help`
        print(__doc__.rstrip() + "\n\nEvery trainer, model and data option: hydra-dense-convert fit --help\n")
        return 0
    return convert_main(args)


# ``hydra-dense-convert`` / ``tools/convert.py``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main)


if __name__ == "__main__":
    sys.exit(entry())
