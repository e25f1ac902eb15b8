"""Colour maps and overlays for masks, shared by the tasks' validation PNGs and tools/visualize.py."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


def palette(num_classes: int) -> np.ndarray:
    """``(num_classes, 3)`` uint8 colours: class 0 dark grey, then tab20-like hues."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    cols = [(60, 60, 60)] + [tuple(int(255 * c) for c in cmap(i % 20)[:3]) for i in range(num_classes - 1)]
    return np.asarray(cols[:num_classes], dtype=np.uint8)


def denormalize(image: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """``(3, H, W)`` normalised float -> ``(H, W, 3)`` uint8."""
    img = image.detach().float().cpu() * torch.tensor(std)[:, None, None] + torch.tensor(mean)[:, None, None]
    return (img.clamp(0, 1) * 255).byte().permute(1, 2, 0).numpy()


def colorize(mask: torch.Tensor | np.ndarray, num_classes: int, ignore_index: int = 255) -> np.ndarray:
    """``(H, W)`` labels -> ``(H, W, 3)`` colours (ignored pixels white)."""
    m = mask.detach().cpu().numpy() if isinstance(mask, torch.Tensor) else np.asarray(mask)
    pal = palette(num_classes)
    out = pal[np.clip(m, 0, num_classes - 1)]
    out[m == ignore_index] = 255
    return out


def overlay_panel(image: torch.Tensor, target: torch.Tensor, pred: torch.Tensor, num_classes: int,
                  mean: Sequence[float], std: Sequence[float], ignore_index: int = 255, alpha: float = 0.55) -> np.ndarray:
    """One PNG-ready strip: image | ground truth over image | prediction over image."""
    img = denormalize(image, mean, std).astype(np.float32)
    gt = colorize(target, num_classes, ignore_index).astype(np.float32)
    pr = colorize(pred, num_classes, ignore_index).astype(np.float32)
    blend = lambda c: ((1 - alpha) * img + alpha * c).astype(np.uint8)  # noqa: E731
    sep = np.full((img.shape[0], 4, 3), 255, np.uint8)
    return np.concatenate([img.astype(np.uint8), sep, blend(gt), sep, blend(pr)], axis=1)
