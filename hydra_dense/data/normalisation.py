"""The image normalisation every shipped backbone was pretrained with (ImageNet's channel mean and
std, on images scaled to [0, 1]): the default of the data modules, the detectors and the tools."""
from __future__ import annotations

__all__ = ["IMAGENET_MEAN", "IMAGENET_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
