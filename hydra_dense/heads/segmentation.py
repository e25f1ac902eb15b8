"""Decode heads for semantic segmentation on ViT feature maps.

- :class:`UPerHead`: UPerNet (Xiao et al., 2018) — pyramid pooling on the coarsest level, an FPN
  (torchvision's :class:`~torchvision.ops.FeaturePyramidNetwork`) over all levels, then all
  levels fused at stride 4. With mmsegmentation installed, its ``UPerHead`` is the reference.
  Its pooling bin of scale 1 averages the whole image: a global path beside the backbone's
  (``pool_scales`` without 1 leaves it out; :func:`global_pool_muted` zeroes it in a trained head).
- :class:`LinearHead`: BN + 1x1 conv on the concatenated, upsampled maps (a linear probe on
  one map; the light head).
- :class:`SetrNaiveHead`: SETR-naive — 1x1 conv, BN, ReLU, 1x1 conv on the last map.
- :class:`FCNAuxHead`: the auxiliary head (3x3 conv, BN, ReLU, dropout, 1x1 conv) on one level.

All take a list of maps ``(B, C_i, h_i, w_i)`` and return logits ``(B, num_classes, h_0, w_0)``
at the resolution of the first (finest) map; the task upsamples to the image.
"""
from __future__ import annotations

from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import Conv2dNormActivation, FeaturePyramidNetwork

__all__ = ["UPerHead", "LinearHead", "SetrNaiveHead", "FCNAuxHead", "build_decode_head", "global_pool_muted"]


def _cbr(cin: int, cout: int, k: int = 3) -> Conv2dNormActivation:
    return Conv2dNormActivation(cin, cout, kernel_size=k, norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU)


class UPerHead(nn.Module):
    """UPerNet head. ``in_channels``: channels of each input level (finest first); ``pool_scales``:
    the pyramid pooling bins on the coarsest level (empty: no pooling)."""

    def __init__(self, in_channels: Sequence[int], num_classes: int, channels: int = 512,
                 pool_scales: Sequence[int] = (1, 2, 3, 6), dropout: float = 0.1) -> None:
        super().__init__()
        top = in_channels[-1]
        self.pool_scales = tuple(int(s) for s in pool_scales)
        if any(s < 1 for s in self.pool_scales):
            raise ValueError(f"model.pool_scales: bins must be >= 1, got {list(self.pool_scales)}")
        self.ppm = nn.ModuleList(nn.Sequential(nn.AdaptiveAvgPool2d(s), _cbr(top, channels, 1)) for s in pool_scales)
        self.ppm_bottleneck = _cbr(top + len(pool_scales) * channels, channels)
        self.fpn = FeaturePyramidNetwork(list(in_channels[:-1]) + [channels], channels)
        self.fuse = _cbr(len(in_channels) * channels, channels)
        self.classifier = nn.Sequential(nn.Dropout2d(dropout), nn.Conv2d(channels, num_classes, 1))

    def forward(self, maps: Sequence[torch.Tensor]) -> torch.Tensor:
        top = maps[-1]
        pooled = [F.interpolate(p(top), size=top.shape[-2:], mode="bilinear", align_corners=False) for p in self.ppm]
        top = self.ppm_bottleneck(torch.cat([top, *pooled], dim=1))
        levels = self.fpn(OrderedDict((str(i), m) for i, m in enumerate(list(maps[:-1]) + [top])))
        size = maps[0].shape[-2:]
        fused = torch.cat([F.interpolate(v, size=size, mode="bilinear", align_corners=False) if v.shape[-2:] != size
                           else v for v in levels.values()], dim=1)
        return self.classifier(self.fuse(fused))


class LinearHead(nn.Module):
    """BN + 1x1 conv over all levels upsampled to the finest one and concatenated."""

    def __init__(self, in_channels: Sequence[int], num_classes: int) -> None:
        super().__init__()
        total = sum(in_channels)
        self.bn = nn.BatchNorm2d(total)
        self.classifier = nn.Conv2d(total, num_classes, 1)

    def forward(self, maps: Sequence[torch.Tensor]) -> torch.Tensor:
        size = maps[0].shape[-2:]
        x = torch.cat([F.interpolate(m, size=size, mode="bilinear", align_corners=False) if m.shape[-2:] != size
                       else m for m in maps], dim=1)
        return self.classifier(self.bn(x))


class SetrNaiveHead(nn.Module):
    """SETR-naive: 1x1 conv, BN, ReLU, 1x1 conv on the last level only."""

    def __init__(self, in_channels: Sequence[int], num_classes: int, channels: int = 256) -> None:
        super().__init__()
        self.block = _cbr(in_channels[-1], channels, 1)
        self.classifier = nn.Conv2d(channels, num_classes, 1)

    def forward(self, maps: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.classifier(self.block(maps[-1]))


class FCNAuxHead(nn.Module):
    """Auxiliary FCN head on one level (``level`` indexes the input list)."""

    def __init__(self, in_channels: Sequence[int], num_classes: int, channels: int = 256, level: int = -2,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.level = level
        self.block = _cbr(in_channels[level], channels)
        self.classifier = nn.Sequential(nn.Dropout2d(dropout), nn.Conv2d(channels, num_classes, 1))

    def forward(self, maps: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.classifier(self.block(maps[self.level]))


def build_decode_head(kind: str, in_channels: Sequence[int], num_classes: int, channels: int,
                      pool_scales: Optional[Sequence[int]] = None) -> nn.Module:
    """``uper`` / ``linear`` / ``setr_naive`` -> head module (``pool_scales``: UPerNet's bins, None:
    its default (1, 2, 3, 6))."""
    if pool_scales is not None and kind != "uper":
        raise ValueError(f"model.pool_scales is UPerNet's; decode_head={kind!r} has no pyramid pooling")
    if kind == "uper":
        return UPerHead(in_channels, num_classes, channels, **({} if pool_scales is None else
                                                               dict(pool_scales=pool_scales)))
    if kind == "linear":
        return LinearHead(in_channels, num_classes)
    if kind == "setr_naive":
        return SetrNaiveHead(in_channels, num_classes, channels)
    raise ValueError(f"model.decode_head: unknown head {kind!r}; choose from uper, linear, setr_naive")


@contextmanager
def global_pool_muted(head: nn.Module) -> Iterator[bool]:
    """Within the context, UPerNet's global bin (scale 1: the whole image averaged) passes zeros to
    the bottleneck instead of its features: what the head's own global path carries. Yields whether
    the head has such a bin (a head without one is left as it is)."""
    scales = getattr(head, "pool_scales", ())
    branches = [head.ppm[i] for i, s in enumerate(scales) if s == 1] if isinstance(head, UPerHead) else []
    hooks = [b.register_forward_hook(lambda module, args, out: torch.zeros_like(out)) for b in branches]
    try:
        yield bool(branches)
    finally:
        for hook in hooks:
            hook.remove()
