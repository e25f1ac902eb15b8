"""Windowed softmax attention over the patch grid (ViTDet), optional decomposed relative position."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from timm.models.vision_transformer_sam import get_decomposed_rel_pos_bias
from torch import nn

from ..layout import TokenLayout
from ..windows import keep_one_key, partition, unpartition, window_grid, window_key_mask
from .planned import PlannedAttention

__all__ = ["WindowMSAttention"]


class WindowMSAttention(PlannedAttention):
    """ViTDet-style windowed softmax attention over the patch grid, optional relative position.

    Grid tokens are split into non-overlapping ``window_size`` x ``window_size`` windows (the
    grid is padded to a window multiple; padded tokens are masked out, unlike detectron2 which
    lets zero padding into the softmax). Prefix tokens (cls / registers), if any, attend only
    to themselves in window blocks. Image padding (``key_padding_mask``) is masked per window.
    """

    kind = "window"
    plan_options = ("window_size", "rel_pos")

    def __init__(self, dim: int, num_heads: int = 8, window_size: int = 14, rel_pos: bool = False,
                 **kwargs) -> None:
        super().__init__(dim, num_heads=num_heads, **kwargs)
        if window_size <= 0:
            raise ValueError(f"WindowMSAttention: window_size must be > 0, got {window_size}")
        self.window_size = window_size
        self.use_rel_pos = rel_pos
        if rel_pos:
            self.rel_pos_h = nn.Parameter(torch.zeros(2 * window_size - 1, self.head_dim))
            self.rel_pos_w = nn.Parameter(torch.zeros(2 * window_size - 1, self.head_dim))

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        if layout is None or len(layout.grid) != 2:
            raise ValueError("WindowMSAttention needs a TokenLayout with a 2-D grid (h, w)")
        B, N, D = x.shape
        P = layout.num_prefix_tokens
        h, w = layout.grid
        if N != P + h * w:
            raise ValueError(f"WindowMSAttention: {N} tokens do not match prefix {P} + grid {h}x{w}")
        ws = self.window_size
        q, k, v = self._heads(x)  # (B, H, N, d)
        out_prefix = v[:, :, :P]  # softmax over a single key (itself) returns its own value
        cut = window_grid(B, (h, w), ws)
        qw, kw, vw = (partition(t[:, :, P:], cut) for t in (q, k, v))  # (B * windows, H, ws * ws, d)
        pad = layout.key_padding_mask
        keys = window_key_mask(cut, None if pad is None else pad[:, P:], x.device)
        bias = None
        if keys is not None:
            bias = torch.zeros(keys.shape, dtype=qw.dtype, device=x.device).masked_fill(~keep_one_key(keys),
                                                                                        float("-inf"))
        if self.use_rel_pos:
            # detectron2 adds the decomposed bias, computed from the unscaled q, to q·k*scale
            rel = get_decomposed_rel_pos_bias(qw.reshape(-1, ws * ws, self.head_dim), self.rel_pos_h,
                                              self.rel_pos_w, (ws, ws), (ws, ws))
            rel = rel.reshape(B * cut.per_sample, self.num_heads, ws * ws, ws * ws).to(qw.dtype)
            bias = rel if bias is None else bias + rel
        o = F.scaled_dot_product_attention(qw, kw, vw, attn_mask=bias,
                                           dropout_p=self.attn_drop.p if self.training else 0.0)
        out = torch.cat([out_prefix, unpartition(o, cut)], dim=2).transpose(1, 2).reshape(B, N, D)
        return self._project(out)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", window_size={self.window_size}, rel_pos={self.use_rel_pos}"
