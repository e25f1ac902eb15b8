"""``python -m hydra_dense.conversion``: run a conversion config with the hydra_dense CLI (the
conversion alone; ``hydra-dense-convert`` adds the ``--from-run`` mode, :mod:`hydra_dense.comparison.convert_command`).

    python -m hydra_dense.conversion                                # DINOv2 ViT-S/14 -> all-Hydra + dwc3
    python -m hydra_dense.conversion --config configs/convert/dinov2_s14_hydra_dwc3.yaml \\
        --model.init_args.backbone.init_args.plan='{default: hydra}' --trainer.max_steps=300
    python -m hydra_dense.conversion --config ... --ckpt_path last  # resume an interrupted conversion

Every other argument is a LightningCLI override, as for ``tools/train.py fit``. The embedded
natural images a config points at are prepared first.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from ..cli import main as cli_main
from ..data.embedded import prepare_embedded_data
from ..runtime.refusal import plain_refusals
from ..runtime.shipped import shipped_file

__all__ = ["main", "entry", "DEFAULT_CONFIG"]

DEFAULT_CONFIG = "configs/convert/dinov2_s14_hydra_dwc3.yaml"


def main(argv: Optional[list[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["fit"]:
        args = args[1:]
    if not any(a == "--config" or a.startswith("--config=") for a in args):
        args = ["--config", str(shipped_file(DEFAULT_CONFIG, "the default conversion config")), *args]
    configs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--config"]
    configs += [a.split("=", 1)[1] for a in args if a.startswith("--config=")]
    for config in configs:
        if Path(config).is_file():
            prepare_embedded_data(Path(config))
    cli_main(["fit", *args])
    return 0


# ``python -m hydra_dense.conversion``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main)

