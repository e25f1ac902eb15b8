"""Drawing for people: colour maps, mask overlays and detection boxes, shared by the tasks' validation PNGs,
predict's outputs and tools/visualize.py."""
from __future__ import annotations

from typing import Sequence

import matplotlib
import numpy as np
import torch
from torchvision.utils import draw_bounding_boxes, draw_segmentation_masks


def palette(num_classes: int) -> np.ndarray:
    """``(num_classes, 3)`` uint8 colours: class 0 dark grey, then tab20-like hues."""
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


def draw_detections(image: torch.Tensor | np.ndarray, pred: dict, class_names: Sequence[str] | None = None,
                    score_thresh: float = 0.3, mask_threshold: float = 0.5, width: int = 2) -> np.ndarray:
    """Boxes (labelled ``name score``) and masks of one image's detections drawn over it.

    ``image``: ``(3, H, W)`` float in [0, 1] or uint8, or ``(H, W, 3)`` uint8. ``pred``: torchvision
    detector output (``boxes``, ``labels``, ``scores``, optional ``masks (N, 1, H, W)``).
    Returns ``(H, W, 3)`` uint8."""
    img = torch.as_tensor(image)
    if img.dim() == 3 and img.shape[-1] == 3 and img.shape[0] != 3:
        img = img.permute(2, 0, 1)
    if img.is_floating_point():
        img = (img.clamp(0, 1) * 255).round()
    img = img.to(torch.uint8).cpu()
    keep = pred["scores"].detach().cpu() >= score_thresh
    labels = pred["labels"].detach().cpu()[keep]
    pal = palette(int(labels.max()) + 1) if len(labels) else None  # label k >= 1 gets colour k (0 is grey)
    colours = [tuple(int(c) for c in pal[int(k)]) for k in labels] if len(labels) else []
    if "masks" in pred and keep.any():
        masks = pred["masks"].detach().cpu()[keep]
        masks = (masks[:, 0] if masks.dim() == 4 else masks) > mask_threshold
        img = draw_segmentation_masks(img, masks, alpha=0.45, colors=colours)
    if keep.any():
        names = [class_names[int(k) - 1] if class_names and 0 < int(k) <= len(class_names) else str(int(k))
                 for k in labels]
        text = [f"{n} {s:.2f}" for n, s in zip(names, pred["scores"].detach().cpu()[keep].tolist())]
        img = draw_bounding_boxes(img, pred["boxes"].detach().cpu()[keep].float(), labels=text, colors=colours,
                                  width=width)
    return img.permute(1, 2, 0).numpy()
