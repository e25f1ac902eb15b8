"""ViTDet simple feature pyramid: multi-scale maps from a plain ViT's single-scale output."""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Optional, Sequence

import torch
from timm.layers import LayerNorm2d
from torch import nn

__all__ = ["SimpleFeaturePyramid", "ViTWithPyramid", "MultiLevelRescale"]


def _scale_stage(dim: int, scale: float, halve_channels: bool = True, norm_layer: type = LayerNorm2d,
                 owner: str = "SimpleFeaturePyramid") -> tuple[nn.Module, int]:
    """Resample a stride-p map by ``scale`` (4, 2, 1, 0.5); returns the layers and out channels.

    Upsampling is transposed convolutions (two, with a norm and GELU between, for 4x), which halve
    the channels at each step as in ViTDet, or keep them (``halve_channels=False``) as in BEiT's
    neck; downsampling is 2x2 max pooling."""
    step = (lambda c: c // 2) if halve_channels else (lambda c: c)
    if scale == 4.0:
        mid = step(dim)
        return nn.Sequential(nn.ConvTranspose2d(dim, mid, 2, 2), norm_layer(mid), nn.GELU(),
                             nn.ConvTranspose2d(mid, step(mid), 2, 2)), step(mid)
    if scale == 2.0:
        return nn.ConvTranspose2d(dim, step(dim), 2, 2), step(dim)
    if scale == 1.0:
        return nn.Identity(), dim
    if scale == 0.5:
        return nn.MaxPool2d(2, 2), dim
    raise ValueError(f"{owner}: scale {scale} not supported; use 4, 2, 1 or 0.5")


class SimpleFeaturePyramid(nn.Module):
    """ViTDet's simple pyramid (Li et al., 2022): deconvs / pooling from one stride-``p`` map.

    Args:
        in_channels: channels of the ViT map. in_stride: its stride (the patch size).
        out_channels: channels of every pyramid level.
        scales: resampling factors of the input map (4, 2, 1, 0.5 -> strides p/4 … 2p).
        top_block: add a stride-2x extra level by max-pooling the coarsest one (ViTDet's p6).

    ``forward(x)``: ``(B, C, h, w)`` -> ``OrderedDict`` name -> ``(B, out_channels, h_i, w_i)``,
    names ``p{log2(stride)}`` (``p2`` … ``p6`` for patch 16); :attr:`strides` gives each stride.
    """

    def __init__(self, in_channels: int, in_stride: int = 16, out_channels: int = 256,
                 scales: Sequence[float] = (4.0, 2.0, 1.0, 0.5), top_block: bool = False) -> None:
        super().__init__()
        self.out_channels = out_channels
        self.stages = nn.ModuleList()
        self.strides: OrderedDict[str, float] = OrderedDict()
        for scale in scales:
            resample, ch = _scale_stage(in_channels, float(scale))
            self.stages.append(nn.Sequential(
                resample,
                nn.Conv2d(ch, out_channels, 1, bias=False), LayerNorm2d(out_channels),
                nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), LayerNorm2d(out_channels),
            ))
            stride = in_stride / float(scale)
            self.strides[self._name(stride)] = stride
        self.top_block = top_block
        if top_block:
            stride = 2 * list(self.strides.values())[-1]
            self.strides[self._name(stride)] = stride

    @staticmethod
    def _name(stride: float) -> str:
        return f"p{int(round(math.log2(stride)))}"

    def forward(self, x: torch.Tensor, valid: Optional[torch.Tensor] = None) -> "OrderedDict[str, torch.Tensor]":
        """``valid`` ``(B, 1, h, w)`` (1 = real token, 0 = padding) zeroes padding after every layer,
        so a map's border sees zeros beyond the image whether that is padding or the map's edge."""
        outs = [stage(x) if valid is None else _masked(stage, x * valid, valid) for stage in self.stages]
        if self.top_block:
            outs.append(nn.functional.max_pool2d(outs[-1], kernel_size=1, stride=2))
        return OrderedDict(zip(self.strides.keys(), outs))


def _masked(module: nn.Module, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Run a (nested) Sequential layer by layer, multiplying by ``valid`` resampled to each output
    (nearest when upsampled, max when pooled: a cell is real if any real token is under it)."""
    if isinstance(module, nn.Sequential):
        for layer in module:
            x = _masked(layer, x, valid)
        return x
    y = module(x)
    if y.shape[-2:] != valid.shape[-2:]:
        if y.shape[-1] > valid.shape[-1]:
            valid = nn.functional.interpolate(valid, size=y.shape[-2:], mode="nearest")
        else:
            valid = nn.functional.adaptive_max_pool2d(valid, y.shape[-2:])
    return y * valid


class ViTWithPyramid(nn.Module):
    """A :class:`~hydra_dense.backbones.ViT` followed by a :class:`SimpleFeaturePyramid`.

    Meets torchvision's detection backbone contract: ``out_channels`` and a forward returning an
    ``OrderedDict`` of maps. ``forward(x, pad_mask=None)``: ``(B, 3, H, W)`` -> pyramid dict;
    the ViT's last ``out_indices`` map feeds the pyramid.
    """

    def __init__(self, vit: nn.Module, out_channels: int = 256, scales: Sequence[float] = (4.0, 2.0, 1.0, 0.5),
                 top_block: bool = False) -> None:
        super().__init__()
        self.vit = vit
        self.pyramid = SimpleFeaturePyramid(vit.out_channels, vit.patch_size, out_channels, scales, top_block)
        self.out_channels = out_channels

    def forward(self, x: torch.Tensor, pad_mask: Optional[torch.Tensor] = None) -> "OrderedDict[str, torch.Tensor]":
        """With ``pad_mask`` ``(B, H, W)`` (True = padding), padded tokens are kept out of attention
        and zeroed in every pyramid layer: an image's features do not depend on its batch."""
        feat = self.vit(x, pad_mask)[-1]
        if pad_mask is None:
            return self.pyramid(feat)
        valid = (~self.vit.token_padding_mask(pad_mask)).to(feat.dtype).view(feat.shape[0], 1, *feat.shape[-2:])
        return self.pyramid(feat, valid)


class MultiLevelRescale(nn.Module):
    """BEiT / mmseg-UPerNet-ViT neck: one ViT map per chosen block, rescaled to strides p/4 … 2p.

    ``forward(maps)``: list of ``(B, C, h, w)`` (one per scale) -> list of ``(B, C, h*s, w*s)``
    for ``scales`` (default 4, 2, 1, 0.5: strides 4, 8, 16, 32 for patch 16). Channels are kept.
    """

    def __init__(self, channels: int, scales: Sequence[float] = (4.0, 2.0, 1.0, 0.5)) -> None:
        super().__init__()
        ops = [_scale_stage(channels, float(s), halve_channels=False, norm_layer=nn.BatchNorm2d,
                            owner="MultiLevelRescale")[0] for s in scales]
        self.ops = nn.ModuleList(ops)
        self.scales = list(scales)

    def forward(self, maps: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        if len(maps) != len(self.ops):
            raise ValueError(f"MultiLevelRescale: got {len(maps)} maps for {len(self.ops)} scales; set the backbone's "
                             f"out_indices to {len(self.ops)} blocks")
        return [op(m) for op, m in zip(self.ops, maps)]
