"""Detections -> COCO results json (the format ``COCO.loadRes`` and the evaluation server read)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.distributed as dist
from pycocotools import mask as mask_utils

from ..runtime.atomic_file import atomic_write_text

__all__ = ["detections_to_coco", "gather_results", "write_coco_results"]


def detections_to_coco(pred: dict[str, torch.Tensor], image_id: int, category_ids: Sequence[int],
                       mask_threshold: float = 0.5) -> list[dict]:
    """One image's detections (``boxes (N, 4)`` xyxy, ``scores``, ``labels`` 1..K, optional
    ``masks (N, 1, H, W)`` probabilities or ``(N, H, W)`` bool) -> COCO result dicts with
    ``bbox`` as ``[x, y, w, h]``, the original ``category_id`` and RLE ``segmentation``."""
    boxes = pred["boxes"].detach().float().cpu()
    xywh = torch.cat([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], 1).tolist()
    scores = pred["scores"].detach().float().cpu().tolist()
    labels = pred["labels"].detach().cpu().tolist()
    rles = None
    if "masks" in pred:
        masks = pred["masks"].detach().cpu()
        if masks.dim() == 4:
            masks = masks[:, 0]
        if masks.dtype != torch.bool:
            masks = masks > mask_threshold
        rles = mask_utils.encode(np.asfortranarray(masks.numpy().astype(np.uint8).transpose(1, 2, 0)))
        for r in rles:
            r["counts"] = r["counts"].decode("ascii")
    out = []
    for j, (box, score, label) in enumerate(zip(xywh, scores, labels)):
        item = dict(image_id=int(image_id), category_id=int(category_ids[label - 1]),
                    bbox=[round(float(v), 2) for v in box], score=round(float(score), 5))
        if rles is not None:
            item["segmentation"] = rles[j]
        out.append(item)
    return out


def write_coco_results(results: list[dict], path: str | Path) -> Path:
    """Write the list as JSON, whole or not at all."""
    return atomic_write_text(path, json.dumps(results))


def gather_results(results: list[dict]) -> list[dict]:
    """Every rank's results (all ranks must call this), ordered by image id then descending score,
    so one process and N processes write the same file."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        parts: list = [None] * dist.get_world_size()
        dist.all_gather_object(parts, results)
        results = [r for part in parts for r in part]
    return sorted(results, key=lambda r: (r["image_id"], -r["score"]))
