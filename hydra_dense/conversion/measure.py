"""Held-out conversion error of a backbone at several crop sizes (token counts).

A conversion is trained at one crop size, but Hydra's global term depends on the number of tokens
(its ``kv`` is a sum unless the plan has ``token_mean``), so a converted backbone can match its
teacher at the training resolution and drift away at the resolution a dense task runs at. This
measures, per crop size, the relative error of each converted block on the teacher's own input
tokens and of the final normed tokens with the student on its own stream, on the conversion
config's held-out images:

    python tools/conversion_error.py --config configs/convert/dinov2_s14_hydra_dwc3.yaml \\
        --converted runs/convert/dinov2_s14_hydra_dwc3/converted.pth --crop-sizes 112,224,448
    # the MSA weights run as the plan, before any conversion: leave out --converted
    python tools/conversion_error.py --config ... --crop-sizes 112,224 \\
        "--model.init_args.backbone.init_args.plan={default: hydra, token_mean: true}"

Extra arguments are LightningCLI overrides of the conversion config (the backbone and its plan
must be the ones the checkpoint was converted for). Nothing is trained or written unless
``--csv`` names a file.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from ..checkpoints import load_pretrained, read_state_dict
from ..cli import build_task
from ..data.embedded import prepare_embedded_data
from ..tables import write_csv
from .task import relative_errors

__all__ = ["errors_at_crop_sizes", "main"]


def errors_at_crop_sizes(config: str, crop_sizes: Sequence[int], converted: Optional[str] = None,
                         overrides: Sequence[str] = ()) -> list[dict]:
    """One row per crop size: ``crop``, ``tokens``, ``mean_block_error`` (over converted blocks),
    ``final_tokens_error`` and ``block_<i>`` for each converted block."""
    task, dm, _ = build_task(config, [*overrides, "--trainer.logger=false"])
    if converted:
        path = Path(converted).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"--converted: {path} does not exist")
        load_pretrained(task.backbone, read_state_dict(path), strict=True, verbose=False)
    task.eval()
    patch = task.backbone.patch_embed.patch_size
    patch = patch[0] if isinstance(patch, (tuple, list)) else patch
    rows = []
    for size in crop_sizes:
        dm.hparams.crop_size = int(size)
        dm.datasets = {}
        dm.setup("validate")
        sums = task.error_sums_over(dm.val_dataloader(), f"crops {size}px")
        if sums is None:
            raise ValueError(f"data: {config}'s held-out split has no images")
        errors = relative_errors(sums)
        row = dict(crop=int(size), tokens=(int(size) // patch) ** 2,
                   mean_block_error=float(errors[task.blocks].mean()), final_tokens_error=float(errors[-1]))
        row.update({f"block_{i}": float(errors[i]) for i in task.blocks})
        rows.append(row)
    return rows


def to_markdown(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(k.replace("_", " ") for k in keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in keys) + " |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the conversion config (teacher source, backbone, held-out images)")
    parser.add_argument("--converted", default=None, help="converted checkpoint to measure (default: the source weights as the plan)")
    parser.add_argument("--crop-sizes", default="112,224,448", help="comma-separated crop sides in pixels")
    parser.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    args, overrides = parser.parse_known_args(argv)
    try:
        sizes = [int(s) for s in args.crop_sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--crop-sizes: expected integers like 112,224, got {args.crop_sizes!r}")
    prepare_embedded_data(Path(args.config))
    rows = errors_at_crop_sizes(args.config, sizes, args.converted, overrides)
    print(to_markdown(rows), flush=True)
    if args.csv:
        write_csv(rows, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
