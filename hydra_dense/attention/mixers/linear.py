"""Multi-head linear attention with a decomposable kernel (the ablations' baseline)."""
from __future__ import annotations

from typing import Optional

import torch

from ..layout import TokenLayout
from ..ops import FeatureMapName, feature_map_by_name, linear_attention
from .global_linear import GlobalLinearAttention

__all__ = ["LinearAttention"]


class LinearAttention(GlobalLinearAttention):
    """Multi-head linear attention with ``linear_heads`` heads and a decomposable kernel (ablations)."""

    kind = "linear"
    plan_options = ("local", "token_mean", "global_gain", "linear_heads", "feature_map")

    def __init__(self, dim: int, num_heads: int = 8, linear_heads: Optional[int] = None,
                 feature_map: FeatureMapName = "cosine", **kwargs) -> None:
        super().__init__(dim, num_heads=num_heads, **kwargs)
        self.linear_heads = linear_heads or num_heads
        if dim % self.linear_heads:
            raise ValueError(f"LinearAttention: dim={dim} not divisible by linear_heads={self.linear_heads}")
        feature_map_by_name(feature_map)  # validates the name
        self.feature_map = feature_map

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        B, N, D = x.shape
        q, k, v = self.qkv(x).unflatten(-1, (3, D)).unbind(-2)
        mask = layout.key_padding_mask if layout is not None else None
        out = linear_attention(q, k, v, self.linear_heads, self.feature_map, mask)
        return self._add_local_and_project(out, x, q, k, v, layout)

    def _phi(self, t: torch.Tensor) -> torch.Tensor:
        return feature_map_by_name(self.feature_map)(t)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", linear_heads={self.linear_heads}, feature_map={self.feature_map}"
