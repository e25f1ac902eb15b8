"""What each path of a Hydra block carries: a trained model evaluated again with its global Hydra
term or its local branch set to zero, in every block at once and in one block at a time.

    python tools/hydra_paths.py --run runs/seg_aligned/hydra+mean+dwc7@aligned/seed0 [--per-block]
        [--data-root <another validation set in the same layout and classes>]

For each case: the validation score, each class's IoU (segmentation), and the relative change of the
features the head reads (``||muted - intact|| / ||intact||`` at ``out_indices``, over the validation
images). A path whose removal costs little carries little; one whose removal collapses the score
carries the block. ``--data-root`` evaluates on other scenes, for example a context track's scenes at
the size it was trained at, to tell a cue the model never learned from one it learned at the training
token count and lost at a larger one. A model without Hydra / linear blocks (MSA) gets the intact row.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

import torch

from ..attention.muting import PathName, linear_blocks, muted
from ..runtime.atomic_file import atomic_write_text
from ..runtime.refusal import plain_refusals
from .saved_run import NotASavedRun, saved_run

__all__ = ["path_table", "main", "entry"]

@torch.no_grad()
def _features(model, loader, limit: Optional[int]) -> list[torch.Tensor]:
    out = []
    for n, batch in enumerate(loader):
        if limit is not None and n >= limit:
            break
        if batch is None:
            continue
        out.append(torch.cat([m.flatten(1) for m in model.backbone(batch[0].to(model.device))], 1).cpu())
    return out


def _change(muted_feats: list[torch.Tensor], intact: list[torch.Tensor]) -> float:
    num = sum(float((a - b).square().sum()) for a, b in zip(muted_feats, intact))
    den = sum(float(b.square().sum()) for b in intact)
    return (num / max(den, 1e-30)) ** 0.5


def _per_class(model) -> list[float]:
    """The last validation's IoU per class (%), empty for a task that keeps none."""
    return [100 * v for v in (getattr(model, "last_per_class_iou", None) or [])]


def path_table(model, dm, trainer, metric: str, per_block: bool, feature_batches: Optional[int] = 8) -> list[dict]:
    """One row per case: ``case``, ``score`` (%), ``per_class`` (IoU %, segmentation), ``feature_change``.
    A model with no Hydra / linear block gets the intact row alone."""
    model.eval()
    dm.setup("validate")
    loader = dm.val_dataloader()
    blocks = linear_blocks(model.backbone)
    intact = _features(model, loader, feature_batches) if blocks else []

    def evaluate(case: str, chosen: Sequence[int], path: Optional[PathName]) -> dict:
        if path is None:
            score = trainer.validate(model, datamodule=dm, verbose=False)[0][metric]
            return dict(case=case, score=100 * score, per_class=_per_class(model), feature_change=0.0)
        with muted(model.backbone, chosen, path):
            score = trainer.validate(model, datamodule=dm, verbose=False)[0][metric]
            change = _change(_features(model, loader, feature_batches), intact)
        return dict(case=case, score=100 * score, per_class=_per_class(model), feature_change=change)

    if not blocks:
        return [evaluate("intact (no Hydra / linear block to take apart)", [], None)]

    has_local = any(model.backbone.blocks[i].attn.local is not None or model.backbone.blocks[i].attn.local_window
                    is not None for i in blocks)
    rows = [evaluate("intact", [], None), evaluate(f"global term zero in blocks {blocks}", blocks, "global")]
    if has_local:
        rows.append(evaluate(f"local branch zero in blocks {blocks}", blocks, "local"))
    if per_block:
        for i in blocks:
            rows.append(evaluate(f"global term zero in block {i}", [i], "global"))
            if has_local:
                rows.append(evaluate(f"local branch zero in block {i}", [i], "local"))
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="a comparison run folder (request.json, result.json, final_weights.pt)")
    p.add_argument("--per-block", action="store_true", help="also each block alone (2 validations per block)")
    p.add_argument("--data-root", default=None,
                   help="validate on this folder instead of the run's own data (the same layout and classes)")
    p.add_argument("--out", default=None,
                   help="Markdown table to write (default <run>/paths.md; with --data-root <run>/paths_<its name>.md)")
    args = p.parse_args(argv)
    if args.data_root is not None and not Path(args.data_root).expanduser().is_dir():
        p.error(f"--data-root: {args.data_root} is not a folder")
    extra = [f"--data.init_args.root={Path(args.data_root).expanduser().resolve()}"] if args.data_root else []
    try:
        req, result, model, dm, trainer = saved_run(Path(args.run), extra, "paths")
    except NotASavedRun as err:
        p.error(f"--run: {err}")
    run = Path(args.run)
    rows = path_table(model, dm, trainer, result["metric"], args.per_block)
    classes = len(rows[0]["per_class"])
    names = list(getattr(dm, "class_names", None) or [])
    names = names if len(names) == classes else [f"class_{i}" for i in range(classes)]
    split = f"{args.data_root}'s validation split" if args.data_root else "validation split"
    lines = [f"What each path carries: {req.recipe} seed {req.seed} ({result['metric']}, {split}; "
             f"feature change = ||muted - intact|| / ||intact|| at the head's inputs)", "",
             "| case | score | " + "".join(f"{n} IoU | " for n in names) + "feature change |",
             "|---|---|" + "---|" * classes + "---|"]
    lines += [f"| {r['case']} | {r['score']:.1f} | " + "".join(f"{v:.1f} | " for v in r["per_class"])
              + f"{r['feature_change']:.3f} |" for r in rows]
    text = "\n".join(lines) + "\n"
    default = f"paths_{Path(args.data_root).expanduser().resolve().name}.md" if args.data_root else "paths.md"
    out = Path(args.out) if args.out else run / default
    atomic_write_text(out, text)
    print(text + f"written: {out}")
    return 0


# ``tools/hydra_paths.py``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main)
