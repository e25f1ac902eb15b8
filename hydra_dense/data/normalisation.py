"""The image normalisation every shipped backbone was pretrained with (ImageNet's channel mean and
std, on images scaled to [0, 1]): the default of the data modules, the detectors and the tools."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torchvision.transforms.v2 import functional as TF

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "normalised_tensor"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def normalised_tensor(image: np.ndarray, mean: Sequence[float] = IMAGENET_MEAN,
                      std: Sequence[float] = IMAGENET_STD) -> torch.Tensor:
    """uint8 ``(H, W, 3)`` -> ``(3, H, W)`` float scaled to [0, 1] and normalised, as the data modules
    feed a model."""
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float() / 255
    return TF.normalize(x, list(mean), list(std))
