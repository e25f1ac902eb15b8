"""How a token sequence maps onto its image or clip: the one description every token mixer reads."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["TokenLayout"]


@dataclass
class TokenLayout:
    """How a token sequence ``(B, N, D)`` maps onto the input.

    Attributes:
        grid: spatial (or space-time) size of the patch grid, e.g. ``(h, w)`` or ``(t, h, w)``.
        num_prefix_tokens: cls / register tokens in front of the grid tokens.
        key_padding_mask: optional bool ``(B, N)``, True for tokens made only of padding.
    """

    grid: tuple[int, ...]
    num_prefix_tokens: int = 0
    key_padding_mask: Optional[torch.Tensor] = None
