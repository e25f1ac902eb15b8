"""Whole-detector benchmark models: ``det_mask_rcnn:vit_base`` etc. for ``tools/benchmark.py``.

A training step of a detector needs targets; :class:`DetectorStep` makes a fixed set of random
boxes (and box-shaped masks) per image, so every plan is timed on identical work. FLOPs of
detectors cannot be counted on the meta device (NMS and sampling are data dependent), so they are
counted on real tensors, with the formula of the fused CPU attention kernel registered for
FlopCounterMode (it has none in torch 2.14).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.utils.flop_counter import register_flop_formula, sdpa_flop_count

from ..tasks.detection import DetectionTask
from .flops import flop_counter

__all__ = ["DETECTION_PIPELINES", "DetectorStep", "build_detection_pipeline", "count_flops_real"]

# pipeline name -> DetectionTask kwargs (ViTDet's Mask R-CNN layout: p2-p6, 256 channels)
DETECTION_PIPELINES = {
    "det_mask_rcnn": dict(detector="mask_rcnn"),
    "det_faster_rcnn": dict(detector="faster_rcnn"),
    "det_retinanet": dict(detector="retinanet", pyramid_scales=(2.0, 1.0, 0.5)),
}


class DetectorStep(nn.Module):
    """A detector with fixed synthetic targets. ``forward(x)``: ``(B, 3, H, W)`` -> in training the
    summed losses (a scalar), in eval the detections. ``backbone`` is the ViT."""

    def __init__(self, detector: nn.Module, num_boxes: int = 20, num_classes: int = 80, seed: int = 0) -> None:
        super().__init__()
        self.detector = detector
        self.num_boxes, self.num_classes, self.seed = num_boxes, num_classes, seed
        self._targets: dict = {}

    @property
    def backbone(self) -> nn.Module:
        return self.detector.backbone.vit

    def _targets_for(self, B: int, H: int, W: int, device) -> list[dict]:
        key = (B, H, W, str(device))
        if key not in self._targets:
            g = torch.Generator().manual_seed(self.seed)
            out = []
            for _ in range(B):
                wh = torch.randint(32, max(33, min(H, W) // 4), (self.num_boxes, 2), generator=g).float()
                xy = torch.rand(self.num_boxes, 2, generator=g) * (torch.tensor([W, H]) - wh)
                boxes = torch.cat([xy, xy + wh], 1)
                masks = torch.zeros(self.num_boxes, H, W, dtype=torch.uint8)
                for j, (x0, y0, x1, y1) in enumerate(boxes.round().long().tolist()):
                    masks[j, y0:y1, x0:x1] = 1
                labels = torch.randint(1, self.num_classes + 1, (self.num_boxes,), generator=g)
                out.append(dict(boxes=boxes.to(device), labels=labels.to(device), masks=masks.to(device)))
            self._targets[key] = out
        return self._targets[key]

    def forward(self, x: torch.Tensor):
        images = list(x)
        if not self.training:
            return self.detector(images)
        losses = self.detector(images, self._targets_for(x.shape[0], x.shape[-2], x.shape[-1], x.device))
        return sum(losses.values())


def build_detection_pipeline(name: str, vit: nn.Module) -> DetectorStep:
    """``name`` from :data:`DETECTION_PIPELINES`; ``vit`` a ViT with ``out_indices=[-1]``."""
    task = DetectionTask(vit, num_classes=80, min_size=1024, max_size=1024, resize_train=False, resize_eval=False,
                         **DETECTION_PIPELINES[name])
    return DetectorStep(task.detector)


_registered = False


def _register_cpu_flash_formula() -> None:
    """FlopCounterMode formulas for the fused CPU SDPA kernel, counted as its math path would be
    (forward QK^T and PV; backward dV, dP, dQ, dK = twice the forward; no recompute), so ratios
    agree with the meta-device counts of :mod:`.flops`."""
    global _registered
    if _registered:
        return
    aten = torch.ops.aten

    @register_flop_formula(aten._scaled_dot_product_flash_attention_for_cpu)
    def _fwd(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
        return sdpa_flop_count(query_shape, key_shape, value_shape)

    @register_flop_formula(aten._scaled_dot_product_flash_attention_for_cpu_backward)
    def _bwd(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
        return 2 * sdpa_flop_count(query_shape, key_shape, value_shape)

    _registered = True


def count_flops_real(fn: Callable[[], object]) -> int:
    """FLOPs of one call of ``fn`` on real tensors (matmuls, convolutions, attention; forward and
    backward if it runs it)."""
    _register_cpu_flash_formula()
    with flop_counter() as counter:
        fn()
    return int(counter.get_total_flops())
