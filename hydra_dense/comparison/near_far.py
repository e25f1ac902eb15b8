"""The score split by distance to a scene's cue: did context travel?

A context track (:mod:`hydra_dense.data.demo_context`) ships, beside each validation mask, a map of
each pixel's distance to the cue in tokens (``<root>/cue_distance/<split>/<stem>.png``). A model
whose context reaches only a neighbourhood scores well near the cue and at the context-blind level
far from it; one whose context crosses the image scores alike on both.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from ..tasks.segmentation import iou_from_confusion

__all__ = ["NEAR_TOKENS", "distance_map_path", "near_far_scores", "near_far_table"]

# "near": within 8 tokens of the cue (Chebyshev), about a 7x7 convolution's reach after 1-2 blocks
NEAR_TOKENS = 8


def distance_map_path(mask_path: Path) -> Path:
    """``<root>/annotations/<split>/<stem>.png`` -> ``<root>/cue_distance/<split>/<stem>.png``."""
    return mask_path.parent.parent.parent / "cue_distance" / mask_path.parent.name / f"{mask_path.stem}.png"


def _distance(mask_path: Path, shape: tuple[int, int]) -> torch.Tensor:
    """The cue distance of one mask, ``(H, W)`` int64, resized (nearest) to the evaluated mask's ``shape``."""
    dist = torch.from_numpy(np.asarray(Image.open(distance_map_path(mask_path)), dtype=np.int64))
    if tuple(dist.shape) != tuple(shape):
        dist = F.interpolate(dist[None, None].float(), size=shape, mode="nearest")[0, 0].long()
    return dist


@torch.no_grad()
def near_far_scores(model, dm, near_tokens: int = NEAR_TOKENS) -> Optional[dict]:
    """mIoU (%) and per-class IoU (%) over pixels within ``near_tokens`` of the cue and beyond, on
    the validation split: ``{"near": .., "far": .., "near_per_class": [..], "far_per_class": [..]}``.
    None when the validation masks have no cue-distance maps (not a context track)."""
    dm.setup("validate")
    # a datamodule of another kind (an OpenMMLab dataset) has no image/mask pairs: not a context track
    pairs = getattr(getattr(dm, "datasets", {}).get("val"), "pairs", None)
    if not pairs or not all(distance_map_path(Path(m)).is_file() for _, m in pairs):
        return None
    dataset = dm.datasets["val"]
    classes, ignore = model.hparams.num_classes, model.hparams.ignore_index
    confusion = {"near": torch.zeros(classes, classes, dtype=torch.int64),
                 "far": torch.zeros(classes, classes, dtype=torch.int64)}
    was_training = model.training
    model.eval()
    try:
        for batch in dm.val_dataloader():
            if batch is None:
                continue
            images, masks, pad, index = batch
            preds = model.predict_batch_labels(images.to(model.device), pad.to(model.device)).cpu()
            for pred, mask, valid_part, i in zip(preds, masks, ~pad, index.tolist()):
                # the evaluated image's own size: the collate pads right and bottom
                h, w = int(valid_part.any(1).sum()), int(valid_part.any(0).sum())
                dist = _distance(Path(dataset.pairs[i][1]), (h, w))
                pred, mask = pred[:h, :w], mask[:h, :w]
                valid = mask != ignore
                for region, where in (("near", dist <= near_tokens), ("far", dist > near_tokens)):
                    keep = valid & where
                    confusion[region] += torch.bincount(mask[keep] * classes + pred[keep],
                                                        minlength=classes * classes).view(classes, classes)
    finally:
        model.train(was_training)
    out: dict = {}
    for region, conf in confusion.items():
        iou = iou_from_confusion(conf)
        out[region] = 100 * float(torch.nanmean(iou)) if conf.sum() else float("nan")
        out[f"{region}_per_class"] = [100 * float(v) for v in iou]
    return out


def near_far_table(names: list[str], split: dict, near_tokens: int = NEAR_TOKENS) -> str:
    """Markdown: each class's IoU near the cue and far from it (``split`` from :func:`near_far_scores`)."""
    def cell(v: float) -> str:
        return "–" if v != v else f"{v:.1f}"

    lines = ["", "", f"| class | IoU near the cue (≤ {near_tokens} tokens, %) | IoU far from it (%) |", "|---|---|---|"]
    lines += [f"| {n} | {cell(a)} | {cell(b)} |" for n, a, b in zip(names, split["near_per_class"], split["far_per_class"])]
    return "\n".join(lines)
