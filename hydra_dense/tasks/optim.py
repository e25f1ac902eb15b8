"""AdamW with layer-wise lr decay for ViT blocks (BEiT / ViTDet), warm-up then poly or cosine."""
from __future__ import annotations

import math
from typing import Literal, Sequence

import torch
from torch import nn
from timm.optim import param_groups_layer_decay

__all__ = ["build_param_groups", "warmup_schedule"]


def build_param_groups(backbone: nn.Module, others: Sequence[nn.Module], lr: float, weight_decay: float,
                       layer_decay: float, head_lr_mult: float = 1.0) -> list[dict]:
    """Backbone groups from timm (block i gets ``lr * layer_decay ** (depth + 1 - i)``; norms,
    biases and position embeddings get no weight decay), then the rest (necks, heads) at
    ``lr * head_lr_mult``."""
    groups = param_groups_layer_decay(backbone, weight_decay=weight_decay, layer_decay=layer_decay,
                                      no_weight_decay_list=getattr(backbone, "no_weight_decay", lambda: set())())
    for g in groups:
        g["lr"] = lr * g.get("lr_scale", 1.0)
    decay, no_decay = [], []
    for module in others:
        for p in module.parameters():
            if p.requires_grad:
                (no_decay if p.ndim <= 1 else decay).append(p)
    if decay:
        groups.append(dict(params=decay, weight_decay=weight_decay, lr=lr * head_lr_mult, lr_scale=head_lr_mult))
    if no_decay:
        groups.append(dict(params=no_decay, weight_decay=0.0, lr=lr * head_lr_mult, lr_scale=head_lr_mult))
    return groups


def warmup_schedule(total_steps: int, warmup_steps: int, kind: Literal["poly", "cosine", "step", "constant"] = "poly",
                    power: float = 1.0, min_ratio: float = 0.0, milestones: Sequence[float] = (0.67, 0.89),
                    gamma: float = 0.1):
    """Multiplier of the base lr at a step: linear warm-up, then poly / cosine / step decay.

    ``milestones`` for ``step`` are fractions of ``total_steps`` (ViTDet: 0.89 and 0.96)."""
    total_steps = max(int(total_steps), 1)

    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        t = min(max(step - warmup_steps, 0) / max(total_steps - warmup_steps, 1), 1.0)
        if kind == "poly":
            return min_ratio + (1 - min_ratio) * (1 - t) ** power
        if kind == "cosine":
            return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * t))
        if kind == "step":
            return gamma ** sum(t >= m for m in milestones)
        return 1.0

    return factor


def adamw_with_schedule(groups: list[dict], lr: float, total_steps: int, warmup_steps: int, schedule: str,
                        weight_decay: float = 0.01, betas: tuple[float, float] = (0.9, 0.999),
                        milestones: Sequence[float] = (0.67, 0.89)) -> dict:
    """Lightning ``configure_optimizers`` return value: AdamW over parameter ``groups`` (their own lr /
    weight_decay win over ``lr`` / ``weight_decay``) and the warmup ``schedule``, stepped per step.
    Every task's optimiser (the dense tasks, conversion, OpenMMLab models) is made here."""
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay, betas=betas)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_schedule(total_steps, warmup_steps, schedule,  # type: ignore[arg-type]
                                                                   milestones=milestones))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step", "frequency": 1}}


def make_optimizer(backbone: nn.Module, others: Sequence[nn.Module], lr: float, weight_decay: float,
                   layer_decay: float, head_lr_mult: float, total_steps: int, warmup_steps: int, schedule: str,
                   betas: tuple[float, float] = (0.9, 0.999), milestones: Sequence[float] = (0.67, 0.89)) -> dict:
    """The dense tasks' optimiser: layer-wise lr decay over the backbone, the heads at ``head_lr_mult``."""
    return adamw_with_schedule(build_param_groups(backbone, others, lr, weight_decay, layer_decay, head_lr_mult),
                               lr, total_steps, warmup_steps, schedule, betas=betas, milestones=milestones)
