"""Per-channel global baselines with no feature map, sharing one body: AFT-Simple and Poly-NL."""
from __future__ import annotations

from typing import Optional

import torch

from ..ops import aft_simple, poly_nl
from .global_linear import GlobalLinearAttention

__all__ = ["AFTSimpleAttention", "PolyNLAttention"]


class _ChannelGlobalAttention(GlobalLinearAttention):
    """A token-linear baseline whose global term is one function of ``q, k, v`` (``op``), per channel,
    with no feature map; takes a local branch on v or x."""

    plan_options = ("local",)
    has_feature_map = False
    op: staticmethod

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return type(self).op(q, k, v, key_padding_mask=mask)


class AFTSimpleAttention(_ChannelGlobalAttention):
    """AFT-Simple (:func:`~hydra_dense.attention.ops.aft_simple`) on timm Attention's q, k, v, proj:
    ``sigmoid(q) * sum_t softmax_t(k) * v``, per channel."""

    kind = "aft"
    op = staticmethod(aft_simple)


class PolyNLAttention(_ChannelGlobalAttention):
    """Poly-NL's third-order polynomial (:func:`~hydra_dense.attention.ops.poly_nl`) on timm
    Attention's parameters: ``q * mean_t(k * v)``."""

    kind = "polynl"
    op = staticmethod(poly_nl)
