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
    if any(a == "--from-run" or a.startswith("--from-run=") for a in args):
        from .from_run import main as from_run_main

        return from_run_main(args)
    if args and args[0] in ("-h", "--help") and len(args) == 1:
        print(__doc__)
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


if __name__ == "__main__":
    sys.exit(main())
