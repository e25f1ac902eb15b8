"""Hydra attention (Bolya et al., 2022): H = D heads, the cosine kernel, O(T·D)."""
from __future__ import annotations

from typing import Optional

import torch

from ..ops import hydra_attention
from .global_linear import GlobalLinearAttention

__all__ = ["HydraAttention"]


class HydraAttention(GlobalLinearAttention):
    """Hydra attention (H = D heads, cosine kernel) on timm Attention's parameters.

    ``num_heads`` is kept only so the module can be swapped back to MSA; q/k norms, when the
    checkpoint has them, are applied per original head before the Hydra op.
    """

    kind = "hydra"

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return hydra_attention(q, k, v, key_padding_mask=mask)
