"""hydra_dense's ViT (any attention plan: MSA, Hydra, hybrid, ViTDet windows) as an OpenMMLab
backbone, and the ViTDet simple pyramid as an mmdet neck."""
from __future__ import annotations

import inspect
from typing import Optional, Sequence

import torch
from mmengine.model import BaseModule


from ..backbones.pyramid import SimpleFeaturePyramid
from ..backbones.vit import ViT

__all__ = ["HydraViT", "ViTDetSimpleFPN", "register"]

VIT_OPTIONS = sorted(set(inspect.signature(ViT.__init__).parameters) - {"self", "args", "kwargs"})


class HydraViT(BaseModule):
    """``(B, 3, H, W)`` -> tuple of ``(B, D, H/p, W/p)`` maps at ``out_indices`` (what mmseg's
    ``MultiLevelNeck`` + ``UPerHead`` and :class:`ViTDetSimpleFPN` take).

    Takes the options of :class:`hydra_dense.backbones.ViT` (``size``, ``patch_size``, ``img_size``,
    ``plan``, ``out_indices``, ``out_norm``, ``drop_path_rate``, ``pretrained``...); an option it does
    not know raises ``ValueError`` naming it. ``init_cfg=dict(type="Pretrained", checkpoint=path)`` is
    the same as ``pretrained=path`` (timm / MAE / DINOv2 / hydra_dense checkpoints, positions resampled).
    """

    def __init__(self, init_cfg: Optional[dict] = None, **options) -> None:
        super().__init__(init_cfg=None)
        unknown = sorted(set(options) - set(VIT_OPTIONS))
        if unknown:
            raise ValueError(f"HydraViT: option(s) {unknown} not supported; hydra_dense's ViT takes {VIT_OPTIONS}")
        if init_cfg is not None:
            if init_cfg.get("type") != "Pretrained" or "checkpoint" not in init_cfg:
                raise ValueError(f"HydraViT: init_cfg {init_cfg} not supported; use "
                                 "dict(type='Pretrained', checkpoint=<path>) or pretrained=<path>")
            options["pretrained"] = init_cfg["checkpoint"]
        self.vit = ViT(**options)

    def init_weights(self) -> None:  # weights come from the constructor (timm init or `pretrained`)
        pass

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.vit(x))


class ViTDetSimpleFPN(BaseModule):
    """ViTDet's simple feature pyramid as an mmdet neck: the last backbone map (stride
    ``in_stride``) -> ``len(scales)`` maps (+ a max-pooled extra level with ``top_block``),
    ``out_channels`` each, LayerNorm in the convs (hydra_dense's ``SimpleFeaturePyramid``)."""

    def __init__(self, in_channels: int, out_channels: int = 256, in_stride: int = 16,
                 scales: Sequence[float] = (4.0, 2.0, 1.0, 0.5), top_block: bool = True,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.pyramid = SimpleFeaturePyramid(in_channels, in_stride, out_channels, tuple(scales), top_block)

    def forward(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return tuple(self.pyramid(inputs[-1]).values())


def register() -> None:
    """Add the backbone to mmseg's and mmdet's ``MODELS`` and the neck to mmdet's (idempotent)."""
    from mmdet.registry import MODELS as DET_MODELS
    from mmseg.registry import MODELS as SEG_MODELS

    for registry, modules in ((SEG_MODELS, (HydraViT,)), (DET_MODELS, (HydraViT, ViTDetSimpleFPN))):
        for module in modules:
            registry.register_module(module=module, force=True)


