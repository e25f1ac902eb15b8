"""Distillation while fine-tuning: a frozen MSA teacher's backbone features as an extra loss on
every training batch ("copy the same, distill the difference"). The student's backbone output of
the step is captured by a forward hook (no second student pass); the teacher runs once on the
same backbone input. Inference is unchanged; a training step pays one teacher forward.

    model:
      init_args:
        distill: {teacher: ~/.cache/hydra_dense/weights/dinov2_vits14_imgfocus.pth, weight: 1.0}

``teacher``: a timm-format ViT checkpoint, or a finished task run's weights / checkpoint (its
``backbone.`` tensors are taken); ``plan``: the teacher's attention (default ``msa``); ``weight``:
the loss weight of the mean relative squared error over the backbone's outputs (the maps at
``out_indices`` for an image ViT, the pooled clip features for a video ViT).
"""
from __future__ import annotations

import copy
from typing import Any, Optional, Union

import torch
from torch import nn

from ..attention import AttentionPlan
from ..checkpoints.pretrained import load_pretrained, read_state_dict

__all__ = ["FeatureDistillation"]

_KEYS = ("teacher", "weight", "plan")


class FeatureDistillation:
    """Mixin for the tasks: :meth:`setup_distillation` in ``__init__`` (after the backbone exists),
    :meth:`distillation_loss` added to the training loss."""

    _distill_weight: float = 0.0
    _captured: Optional[tuple[tuple, Any]] = None

    def setup_distillation(self, distill: Optional[dict]) -> None:
        if not distill:
            return
        unknown = sorted(set(distill) - set(_KEYS))
        if unknown or "teacher" not in distill:
            raise ValueError(f"model.distill: expected keys {list(_KEYS)} (teacher required), got {sorted(distill)}")
        weight = float(distill.get("weight", 1.0))
        if weight <= 0:
            raise ValueError(f"model.distill.weight must be > 0, got {weight}")
        teacher = copy.deepcopy(self.backbone)
        teacher.set_plan(AttentionPlan.coerce(distill.get("plan", "msa")))
        load_pretrained(teacher, read_state_dict(str(distill["teacher"])), strict=True, verbose=False)
        teacher.requires_grad_(False).eval()
        object.__setattr__(self, "_distill_teacher", teacher)  # not a submodule: never trained or saved
        self._distill_weight = weight
        self.backbone.register_forward_hook(self._capture_backbone, with_kwargs=True)

    def _capture_backbone(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if self.training and torch.is_grad_enabled():
            self._captured = (args, kwargs, output)

    def distillation_loss(self) -> Optional[torch.Tensor]:
        """Weighted relative squared error of this step's student backbone output against the
        teacher's on the same input; None without ``distill`` (or when nothing was captured)."""
        if not self._distill_weight or self._captured is None:
            return None
        args, kwargs, student = self._captured
        self._captured = None
        teacher = self._distill_teacher
        if next(teacher.parameters()).device != next(self.backbone.parameters()).device:
            teacher.to(next(self.backbone.parameters()).device)
        with torch.no_grad():
            wanted = teacher(*args, **kwargs)
        pairs = list(zip(_as_list(student), _as_list(wanted)))
        loss = torch.stack([(s.float() - t.float()).square().mean() / t.float().square().mean().clamp_min(1e-12)
                            for s, t in pairs]).mean()
        self.log("train_distill", loss, batch_size=pairs[0][0].shape[0])
        return self._distill_weight * loss


def _as_list(out: Union[torch.Tensor, list, tuple, dict]) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return list(out.values())
    return list(out)
