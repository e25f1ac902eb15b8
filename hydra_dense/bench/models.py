"""The benchmark's models by name: plain backbones (``vit_base``, ``video_vit_small``, ...) and whole task
models (``seg_uper:vit_base``, ``det_mask_rcnn:vit_base``), each built with a named attention plan; and
their inputs and token counts. Depths come from ``backbones/sizes.py``."""
from __future__ import annotations

import math

import torch
from torch import nn

from ..attention import plan_from_name
from ..backbones import VideoViT, ViT
from ..backbones.sizes import configured_depth
from ..tasks.segmentation import SegmentationTask
from .detection import DETECTION_PIPELINES, build_detection_pipeline
from .input_sizes import InputSize

__all__ = ["MODELS", "PIPELINES", "build_backbone", "bench_input", "vit_of", "token_count", "is_detection_model"]

# name -> (class, constructor kwargs). ``micro`` is for CI smoke runs.
MODELS: dict[str, tuple[type, dict]] = {
    "vit_micro": (ViT, dict(size=None, embed_dim=64, depth=4, num_heads=2)),
    "vit_tiny": (ViT, dict(size="tiny")),
    "vit_small": (ViT, dict(size="small")),
    "vit_base": (ViT, dict(size="base")),
    "vit_large": (ViT, dict(size="large")),
    "video_vit_micro": (VideoViT, dict(size=None, embed_dim=64, depth=4, num_heads=2)),
    "video_vit_small": (VideoViT, dict(size="small")),
    "video_vit_base": (VideoViT, dict(size="base")),
}


# Whole task models (pipeline level): "<task>_<head>:<backbone>", e.g. "seg_uper:vit_base".
PIPELINES = {"seg_uper": dict(decode_head="uper", head_channels=512, out_indices=[3, 5, 7, 11]),
             "seg_linear": dict(decode_head="linear", head_channels=256, out_indices=[3, 5, 7, 11]),
             "seg_setr_naive": dict(decode_head="setr_naive", head_channels=256, out_indices=[11])}


def segmentation_pipeline(model: str, plan: str, patch_size: int, grad_checkpointing: bool) -> nn.Module:
    """``seg_<head>:<backbone>``: a SegmentationTask (150 classes) on the backbone with ``plan``."""
    task, _, backbone_name = model.partition(":")
    spec = dict(PIPELINES[task])
    cls, kwargs = MODELS[backbone_name or "vit_base"]
    depth = configured_depth(kwargs)
    out_indices = [min(i, depth - 1) for i in spec.pop("out_indices")]
    if depth != 12:
        out_indices = sorted({depth // 4 - 1, depth // 2 - 1, 3 * depth // 4 - 1, depth - 1})[-len(out_indices):]
    backbone = cls(**kwargs, patch_size=patch_size, grad_checkpointing=grad_checkpointing, class_token=False,
                   plan=plan_from_name(plan, depth), out_indices=out_indices)
    return SegmentationTask(backbone, num_classes=150, **spec)


def detection_pipeline(model: str, plan: str, patch_size: int, grad_checkpointing: bool) -> nn.Module:
    """``det_<detector>:<backbone>``: a torchvision detector on the ViTDet-layout backbone with ``plan``."""
    task, _, backbone_name = model.partition(":")
    cls, kwargs = MODELS[backbone_name or "vit_base"]
    depth = configured_depth(kwargs)
    vit = cls(**kwargs, patch_size=patch_size, grad_checkpointing=grad_checkpointing, class_token=False,
              plan=plan_from_name(plan, depth), out_indices=[-1], out_norm=False)  # ViTDet layout
    return build_detection_pipeline(task, vit)


def is_detection_model(model: str) -> bool:
    """Whether ``model`` names a detection pipeline (timed and counted through its detector)."""
    return model.partition(":")[0] in DETECTION_PIPELINES


def build_backbone(model: str, plan: str, patch_size: int = 16, tubelet_size: int = 2,
                   grad_checkpointing: bool = False) -> nn.Module:
    """A benchmark backbone (no cls token, so tokens = grid cells) with the named plan, or a whole
    task model for pipeline names (``seg_uper:vit_base``, ``seg_linear:vit_base``,
    ``det_mask_rcnn:vit_base``, ``det_faster_rcnn:…``, ``det_retinanet:…``)."""
    if model.partition(":")[0] in PIPELINES:
        return segmentation_pipeline(model, plan, patch_size, grad_checkpointing)
    if is_detection_model(model):
        return detection_pipeline(model, plan, patch_size, grad_checkpointing)
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose from {sorted(MODELS)} or a pipeline "
                         f"{sorted(PIPELINES) + sorted(DETECTION_PIPELINES)}:<backbone>")
    cls, kwargs = MODELS[model]
    kwargs = dict(kwargs, patch_size=patch_size, grad_checkpointing=grad_checkpointing)
    depth = configured_depth(kwargs)
    plan_obj = plan_from_name(plan, depth)
    if cls is VideoViT:
        return VideoViT(**kwargs, tubelet_size=tubelet_size, plan=plan_obj)
    return ViT(**kwargs, class_token=False, plan=plan_obj, out_indices=[-1])


def bench_input(model: nn.Module, size: InputSize, batch: int, device, dtype=torch.float32) -> torch.Tensor:
    """Random input ``(batch, 3, H, W)``, or ``(batch, 3, F, H, W)`` for a video model."""
    if isinstance(vit_of(model), VideoViT):
        if size.frames is None:
            raise ValueError(f"video models need FxHxW sizes, got {size}")
        return torch.randn(batch, 3, size.frames, size.height, size.width, device=device, dtype=dtype)
    if size.frames is not None:
        raise ValueError(f"image models need HxW sizes, got {size}")
    return torch.randn(batch, 3, size.height, size.width, device=device, dtype=dtype)


def vit_of(model: nn.Module) -> nn.Module:
    """The ViT of a task model, or the model itself when it is one."""
    return getattr(model, "backbone", model)


def token_count(model: nn.Module, size: InputSize) -> int:
    """Grid tokens of one input of ``size`` (no prefix tokens: the benchmark models have none)."""
    model = vit_of(model)
    if isinstance(model, VideoViT):
        return model.num_tokens(size.frames, size.height, size.width)
    return math.prod(model.grid_size(size.height, size.width))
