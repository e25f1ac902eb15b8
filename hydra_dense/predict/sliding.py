"""Sliding-window segmentation of one image of any size, with memory set by the window: the one
sliding-window inference (validation in slide mode, and predict on files).

mmseg's slide mode sums every window's logits into one ``(K, H, W)`` buffer: at 4096² and 150
classes that is 10 GB before the model runs. Here windows run row by row and each band of rows
is turned into labels as soon as no later window covers it, so the float buffer holds at most
one window's height, ``(K, crop_h, W)``. A uint8 image stays uint8 and is normalised one window at
a time. The result equals averaging all windows' logits over the whole image.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch

__all__ = ["window_starts", "sliding_window_labels"]


def window_starts(size: int, crop: int, stride: int) -> list[int]:
    """Window origins along one axis (the last one flush with the border), as mmseg's slide mode."""
    count = max(math.ceil((size - crop) / stride), 0) + 1
    return [min(i * stride, max(size - crop, 0)) for i in range(count)]


@torch.no_grad()
def sliding_window_labels(logits_fn: Callable[[torch.Tensor], torch.Tensor], image: torch.Tensor,
                          crop: Sequence[int], stride: Sequence[int], num_classes: int,
                          mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None) -> torch.Tensor:
    """Labels ``(H, W)`` uint8 (int64 above 255 classes) of ``image`` ``(3, H, W)``: uint8 normalised
    one window at a time with ``mean`` / ``std`` (fractions of 255), or already normalised float
    (``mean`` / ``std`` None).

    ``logits_fn``: ``(1, 3, h, w)`` normalised float -> ``(1, K, h, w)`` logits for one window of at
    most ``crop`` = ``(h, w)``; windows start every ``stride`` and the class scores of overlapping
    windows are averaged.
    """
    _, H, W = image.shape
    crop_h, crop_w = crop
    ys, xs = window_starts(H, crop_h, stride[0]), window_starts(W, crop_w, stride[1])
    normalise = mean is not None and std is not None
    if normalise:
        scale = torch.tensor(std, dtype=torch.float32, device=image.device).view(3, 1, 1) * 255.0
        shift = torch.tensor(mean, dtype=torch.float32, device=image.device).view(3, 1, 1) * 255.0
    labels = torch.empty(H, W, dtype=torch.uint8 if num_classes <= 256 else torch.int64, device=image.device)
    top = 0  # first image row still held in the band
    band = torch.zeros(num_classes, 0, W, device=image.device)
    count = torch.zeros(1, 0, W, device=image.device)
    for row, y1 in enumerate(ys):
        y2 = min(y1 + crop_h, H)
        grow = y2 - top - band.shape[1]
        if grow > 0:
            band = torch.cat([band, band.new_zeros(num_classes, grow, W)], 1)
            count = torch.cat([count, count.new_zeros(1, grow, W)], 1)
        for x1 in xs:
            x2 = min(x1 + crop_w, W)
            window = image[:, y1:y2, x1:x2]
            window = (window.float() - shift) / scale if normalise else window
            logits = logits_fn(window[None])[0].float()
            band[:, y1 - top:y2 - top, x1:x2] += logits
            count[:, y1 - top:y2 - top, x1:x2] += 1
        done = (ys[row + 1] if row + 1 < len(ys) else H) - top  # rows no later window reaches
        if done > 0:
            labels[top:top + done] = (band[:, :done] / count[:, :done]).argmax(0).to(labels.dtype)
            band, count, top = band[:, done:], count[:, done:], top + done
    return labels
