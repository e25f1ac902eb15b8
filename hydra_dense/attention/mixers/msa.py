"""Softmax multi-head self-attention (the quadratic reference every other mixer is measured against)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ..layout import TokenLayout
from .planned import PlannedAttention

__all__ = ["MSAttention"]


class MSAttention(PlannedAttention):
    """Softmax multi-head self-attention through ``F.scaled_dot_product_attention``."""

    kind = "msa"

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        B, N, D = x.shape
        q, k, v = self._heads(x)
        mask = None
        if layout is not None and layout.key_padding_mask is not None:
            mask = ~layout.key_padding_mask[:, None, None, :]  # True = may attend
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             dropout_p=self.attn_drop.p if self.training else 0.0)
        return self._project(out.transpose(1, 2).reshape(B, N, D))
