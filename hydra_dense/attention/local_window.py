"""Windowed softmax beside a global linear attention: a local branch that depends on content.

The depthwise-conv branch (:mod:`hydra_dense.attention.local_mixing`) gives each token a fixed weighted sum
of its neighbours. Softmax attention in a pretrained ViT is token-specific: which neighbour a
query reads depends on the query. This branch restores that inside small windows, with the
block's own ``q, k, v`` and heads (the same weights as the MSA block it replaces), beside the
global linear term (the hybrid LoLCATs converts language models into: softmax over a local
window, linear attention for the rest; here in ViTDet-style non-overlapping windows)::

    out = hydra(q, k, v) + gate * window_softmax(q, k, v)        then proj(out)

- A grid query attends to the tokens of its own ``W x W`` window **and to the prefix tokens**
  (cls / registers): pretrained ViTs send much of their attention there, and it costs P keys per
  window. A prefix query attends to every token (P queries x N keys: linear in N).
- ``gate`` (one per channel) is **zero-initialised**: a checkpoint without the branch starts
  exactly where plain Hydra starts.
- Padded keys are masked out; padded queries get zero.
- Grids: ``(h, w)`` in ``W x W`` windows; a video's ``(t, h, w)`` in ``W x W`` windows per frame;
  a 1-D grid (a temporal axis) in runs of ``W`` tokens. The grid is padded to a window multiple
  (masked), windows aligned to the top-left, so a padded image's valid tokens see the windows
  they see alone.
- ``shift`` moves the windows by that many tokens up and left (Swin's shifted windows; plan name
  ``win<W>_shift`` shifts by W // 2 in every odd block), so that window borders do not fall in the
  same place in every block.

Per token it costs ``W^2 + P`` keys instead of N: 17 instead of 4,097 for ViT-B/16 at 1024² with
``W = 4``.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .windows import keep_one_key, partition, unpartition, window_grid, window_key_mask

if TYPE_CHECKING:  # pragma: no cover
    from .layout import TokenLayout

__all__ = ["WindowSoftmaxBranch"]


class WindowSoftmaxBranch(nn.Module):
    """Gated softmax attention in non-overlapping windows of the token grid, prefix tokens as keys.

    Args:
        dim: channels D.
        num_heads: heads H of the softmax (the block's own: D / H features each).
        window: window side W in tokens.
        grid_dims: dimensions of the token grid it will see (2 images, 3 video, 1 a temporal axis).
        shift: windows start this many tokens before the grid's first row and column (< window).

    ``forward(q, k, v, layout)`` takes ``(B, N, D)`` queries, keys and values (the block's, q/k
    norms applied) and returns ``gate * out`` ``(B, N, D)``.
    """

    def __init__(self, dim: int, num_heads: int, window: int, grid_dims: int = 2, shift: int = 0) -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"WindowSoftmaxBranch: the window must be >= 1 token, got {window}")
        if dim % num_heads:
            raise ValueError(f"WindowSoftmaxBranch: dim={dim} not divisible by num_heads={num_heads}")
        if grid_dims not in (1, 2, 3):
            raise ValueError(f"WindowSoftmaxBranch: grid_dims must be 1, 2 or 3, got {grid_dims}")
        if not 0 <= shift < window:
            raise ValueError(f"WindowSoftmaxBranch: shift must be in [0, window), got {shift} for window {window}")
        self.num_heads, self.window, self.grid_dims, self.shift = num_heads, window, grid_dims, shift
        self.gate = nn.Parameter(torch.zeros(dim))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                layout: "Optional[TokenLayout]") -> torch.Tensor:
        if layout is None or len(layout.grid) != self.grid_dims:
            got = "no layout" if layout is None else f"a {len(layout.grid)}-D grid {tuple(layout.grid)}"
            raise ValueError(f"window softmax (win{self.window}) needs a TokenLayout with a {self.grid_dims}-D "
                             f"grid, got {got}")
        B, N, D = q.shape
        P, H = layout.num_prefix_tokens, self.num_heads
        d = D // H
        if N != P + math.prod(layout.grid):
            raise ValueError(f"window softmax: {N} tokens do not match prefix {P} + grid {tuple(layout.grid)}")
        pad = layout.key_padding_mask
        qh, kh, vh = (t.reshape(B, N, H, d).transpose(1, 2) for t in (q, k, v))  # (B, H, N, d)
        cut = window_grid(B, tuple(layout.grid), self.window, self.shift)
        qw, kw, vw = (partition(t[:, :, P:], cut) for t in (qh, kh, vh))  # (B * windows, H, window tokens, d)
        mask = window_key_mask(cut, None if pad is None else pad[:, P:], q.device)
        if P:
            n_win = cut.per_sample

            def per_window(t: torch.Tensor) -> torch.Tensor:  # prefix (B, H, P, d) -> (B * n_win, H, P, d)
                return t[:, None].expand(B, n_win, H, P, d).reshape(B * n_win, H, P, d)

            kw, vw = torch.cat([per_window(kh[:, :, :P]), kw], 2), torch.cat([per_window(vh[:, :, :P]), vw], 2)
            if mask is not None:
                mask = torch.cat([mask.new_ones(B * n_win, 1, 1, P), mask], -1)
        if mask is not None:
            mask = keep_one_key(mask)  # a window of padding alone, no prefix: no NaN rows
        o = unpartition(F.scaled_dot_product_attention(qw, kw, vw, attn_mask=mask), cut)
        if P:
            key_ok = None if pad is None else ~pad[:, None, None, :]
            o = torch.cat([F.scaled_dot_product_attention(qh[:, :, :P], kh, vh, attn_mask=key_ok), o], 2)
        out = o.transpose(1, 2).reshape(B, N, D)
        if pad is not None:
            out = out.masked_fill(pad[..., None], 0.0)
        return out * self.gate.to(out.dtype)

    def extra_repr(self) -> str:
        return f"win{self.window}, heads={self.num_heads}, shift={self.shift}"
