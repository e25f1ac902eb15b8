"""No token mixing at all: the speed floor for any attention."""
from __future__ import annotations

from typing import Optional

import torch

from ..layout import TokenLayout
from .planned import PlannedAttention

__all__ = ["NoMixAttention"]


class NoMixAttention(PlannedAttention):
    """No token mixing: ``proj(v)``. The speed floor for any attention (qkv and proj kept)."""

    kind = "none"

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        D = x.shape[-1]
        v = self.qkv(x).unflatten(-1, (3, D))[..., 2, :]
        return self._project(v)
