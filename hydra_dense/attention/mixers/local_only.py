"""The local branch alone: Hydra's block with its global term removed (the local-only control)."""
from __future__ import annotations

from typing import Optional

import torch

from ..local_mixing import parse_local
from .global_linear import GlobalLinearAttention

__all__ = ["LocalOnlyAttention"]


class LocalOnlyAttention(GlobalLinearAttention):
    """The local branch alone: ``proj(local(v))``, Hydra's block with its global term removed. The
    control that says what a Hydra recipe's global term adds (plan names ``local+dwc7``, ...)."""

    kind = "local"
    plan_options = ("local",)

    def __init__(self, dim: int, num_heads: int = 8, local: Optional[str] = None, **kwargs) -> None:
        if parse_local(local) is None:
            raise ValueError("attention 'local' is a local branch alone: give it one (plan: {default: local, "
                             "local: dwc7}, or the plan name local+dwc7)")
        super().__init__(dim, num_heads=num_heads, local=local, **kwargs)

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return torch.zeros_like(v)
