"""Synchronising torchmetrics' MeanAveragePrecision over ranks that evaluated different numbers of images."""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.distributed as dist
from torchmetrics.detection import MeanAveragePrecision

__all__ = ["gather_map_states"]


def _cpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(_cpu(v) for v in x)
    return x


def gather_map_states(metric: MeanAveragePrecision, indices: Sequence[int]) -> None:
    """Replace ``metric``'s per-image list states by those of all ranks, ordered by dataset index.

    torchmetrics all-gathers list states one element at a time, which needs the same number of
    images on every rank; the evaluation sampler does not repeat samples (so nothing is counted
    twice), and ranks then differ by one image. Gathering the lists as objects handles any split,
    and ordering by dataset index makes N processes see exactly what one process sees (COCOeval
    breaks score ties by image order). Build the metric with ``sync_on_compute=False``.
    All ranks must call this; without a process group it does nothing.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    names = list(metric.metric_state)
    local = (list(indices), {n: _cpu(getattr(metric, n)) for n in names})
    parts: list = [None] * dist.get_world_size()
    dist.all_gather_object(parts, local)
    all_ids = [i for ids, _ in parts for i in ids]
    order = sorted(range(len(all_ids)), key=all_ids.__getitem__)
    for n in names:
        merged = [x for _, states in parts for x in states[n]]
        if len(merged) != len(all_ids):
            raise RuntimeError(f"mAP state {n!r} has {len(merged)} entries for {len(all_ids)} images")
        setattr(metric, n, [merged[k] for k in order])
