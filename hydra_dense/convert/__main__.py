"""``hydra-dense-convert`` / ``python tools/convert.py``: run a conversion config with the hydra_dense CLI.

    hydra-dense-convert                                          # DINOv2 ViT-S/14 -> all-Hydra + dwc3
    hydra-dense-convert --config configs/convert/dinov2_s14_hydra_dwc3.yaml \\
        --model.init_args.backbone.init_args.plan='{default: hydra}' --trainer.max_steps=300
    hydra-dense-convert --config ... --ckpt_path last            # resume an interrupted conversion
    hydra-dense-convert --from-run RUN_DIR                       # a finished MSA run -> Hydra, fine-tuned, report

Every other argument is a LightningCLI override, as for ``tools/train.py fit``. The embedded
natural images a config points at are prepared first.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "convert" / "dinov2_s14_hydra_dwc3.yaml"


def main(argv: Optional[list[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    asks_help = any(a in ("-h", "--help") for a in args)
    if any(a == "--from-run" or a.startswith("--from-run=") for a in args):
        from .from_run import main as from_run_main

        # "--from-run --help": argparse would take --help for the missing RUN_DIR
        return from_run_main(["--help"] if asks_help else args)
    if asks_help and args[:1] != ["fit"]:  # the two modes; the ~50 trainer options with `fit --help`
        print(__doc__.rstrip() + "\n\nEvery trainer, model and data option: hydra-dense-convert fit --help\n")
        return 0
    if args[:1] == ["fit"]:
        args = args[1:]
    if not any(a == "--config" or a.startswith("--config=") for a in args):
        args = ["--config", str(DEFAULT_CONFIG), *args]
    configs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--config"]
    configs += [a.split("=", 1)[1] for a in args if a.startswith("--config=")]
    from ..data.natural_images import prepare_named_in

    for config in configs:
        if Path(config).is_file():
            prepare_named_in(Path(config).read_text())
    from ..cli import main as cli_main

    cli_main(["fit", *args])
    return 0


def entry(argv: Optional[list[str]] = None) -> int:
    """``hydra-dense-convert`` / ``tools/convert.py``: :func:`main`, refusing plainly
    (:mod:`hydra_dense.runtime.refusal`)."""
    from ..runtime.refusal import plain_refusals

    return plain_refusals(main)(argv)


if __name__ == "__main__":
    sys.exit(entry())
