"""Norm-aware Hydra: one-feature heads whose token weights sum to one."""
from __future__ import annotations

from typing import Optional

import torch

from ..ops import norm_aware_hydra
from .global_linear import GlobalLinearAttention

__all__ = ["NormAwareHydraAttention"]


class NormAwareHydraAttention(GlobalLinearAttention):
    """Hydra's H = D one-feature heads with weights that sum to one and keep the query's norm
    (:func:`~hydra_dense.attention.ops.norm_aware_hydra`): ``mean_s(v) + scale * q * cov_s(k, v)``.

    With the cosine kernel and ``token_mean``, Hydra's global term is ``phi(q) * mean(phi(k) * v)``,
    of order ``|v| / D``: next to a local branch on ``v`` it carries almost nothing. Here the token
    weights sum to one, so the term is of order ``|v|`` from the start, and ``scale`` (the softmax
    teacher's ``head_dim^-0.5``) with the raw q, k makes it the first-order expansion of each
    channel's softmax, which an MSA checkpoint's q, k initialise. No new parameters: any ViT state
    dict loads. Takes a local branch on v or x.
    """

    kind = "hydra_norm"
    plan_options = ("local",)
    has_feature_map = False

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return norm_aware_hydra(q * self.scale, k, v, key_padding_mask=mask)
