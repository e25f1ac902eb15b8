"""Local token mixing beside a global linear attention: a depthwise convolution over the token grid.

Hydra attention mixes tokens only through one global ``kv`` vector per image, so it has no notion
of neighbourhood. Linear-attention backbones that match softmax on dense tasks add a cheap local
branch next to the global one (FLatten Transformer's depthwise conv on v, MLLA / CSWin's LePE).
This module is that branch for hydra_dense's attention modules::

    out = hydra(q, k, v) + dwc(v)                   then proj(out)   (``source="v"``, the default)
    out = hydra(q, k, v) + dwc(x)                                      (``source="x"``: the block's input)
    out = hydra(q, k, v) + D * phi(q) * dwc(phi(k) * v)                 (``source="kv"``: local Hydra)

The last is Hydra's own kernel restricted to a neighbourhood with learned per-offset weights: a
neighbour's value counts more where its key agrees with the query, channel by channel, so the
local term depends on content like the global one does (D, the feature dim, undoes the ~1/D
scale of the per-channel cosine terms).

The convolution is **zero-initialised**, so a checkpoint without it starts exactly where plain
Hydra starts. Prefix tokens (cls / registers) neither feed it nor get anything from it; padded
tokens are zeroed before it (they contribute nothing, like zero padding at the image border) and
their outputs are zero. Names used in attention plans (``plan: {default: hydra, local: dwc3}``):

=============  ==========================================================================
``dwc<K>``     K x K depthwise conv on v over the grid (K x K x K on a video's (t, h, w) grid)
``dwc<K>_2d``  per-frame K x K on a video grid (1 x K x K); the same as ``dwc<K>`` on images
``dwc<K>_x``   K x K depthwise conv on the block input instead of v
``dwc<K>_kv``  K x K depthwise conv on phi(k) * v, gated by D * phi(q) (local Hydra)
``win<W>``     softmax in W x W windows, prefix tokens as keys, zero-initialised gate
               (:mod:`hydra_dense.attention.local_window`); ``win<W>_shift``: moved by W // 2 in odd blocks
``win<W>+dwc<K>``  both branches
=============  ==========================================================================
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Optional

import torch
from torch import nn

if TYPE_CHECKING:  # pragma: no cover
    from .layout import TokenLayout

__all__ = ["LocalMixSpec", "LocalMixing", "parse_local", "LOCAL_NAMES"]

# the local-mixing names that plan names are built with (``hydra+dwc7``), and the examples errors show
LOCAL_NAMES = ("dwc3", "dwc5", "dwc7", "dwc3_x", "dwc3_kv", "dwc3_2d", "win2", "win4", "win4+dwc7")
_PATTERN = re.compile(r"dwc(\d+)(_x|_kv)?(_2d)?")
_WINDOW = re.compile(r"win(\d+)(_shift)?")


@dataclass(frozen=True)
class LocalMixSpec:
    """A parsed local-mixing name: the convolution branch (odd ``conv_size``, 0 = none; ``source``
    tensor; ``spatial_only`` for videos) and the window-softmax branch (``window`` side, 0 = none;
    ``shifted``: windows moved by ``window // 2`` in odd blocks)."""

    name: str
    conv_size: int = 0
    source: Literal["v", "x", "kv"] = "v"
    spatial_only: bool = False
    window: int = 0
    shifted: bool = False


@functools.lru_cache(maxsize=None)
def parse_local(name: Optional[str]) -> Optional[LocalMixSpec]:
    """``"dwc3"`` / ``"dwc5_x"`` / ``"dwc3_kv"`` / ``"dwc3_2d"`` / ``"win4"`` / ``"win4+dwc7"`` ->
    :class:`LocalMixSpec`; None or ``"none"`` -> None."""
    if name is None or name == "none":
        return None
    conv, window, shifted = None, 0, False
    for part in str(name).split("+"):
        m, mw = _PATTERN.fullmatch(part), _WINDOW.fullmatch(part)
        if (m is None and mw is None) or (m is not None and conv is not None) or (mw is not None and window):
            raise ValueError(f"unknown local mixing {name!r}; use dwc<K>, dwc<K>_x, dwc<K>_kv or dwc<K>_2d with an "
                             f"odd K, win<W>, or one of each joined by '+', e.g. {', '.join(LOCAL_NAMES)}")
        if mw is not None:
            window, shifted = int(mw.group(1)), bool(mw.group(2))
            if window < 1:
                raise ValueError(f"local mixing {name!r}: the window must be at least 1 token, got {window}")
            continue
        conv = m
        conv_size = int(m.group(1))
        if conv_size < 1 or conv_size % 2 == 0:
            raise ValueError(f"local mixing {name!r}: the convolution size must be odd (3, 5, 7, ...), got {conv_size}")
    if conv is None:
        return LocalMixSpec(str(name), window=window, shifted=shifted)
    return LocalMixSpec(str(name), int(conv.group(1)), (conv.group(2) or "_v")[1:], bool(conv.group(3)), window,
                        shifted)


_CONVS = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
_CHANNELS_LAST = {2: torch.channels_last, 3: torch.channels_last_3d}


class LocalMixing(nn.Module):
    """Zero-initialised depthwise convolution over the token grid of ``(B, P + prod(grid), D)`` tokens.

    Args:
        dim: channels D (one filter per channel).
        spec: the variant (:func:`parse_local`).
        grid_dims: dimensions of the token grid it will see: 2 for images ``(h, w)``, 3 for a
            video's ``(t, h, w)``, 1 for a temporal axis alone.

    ``forward(tokens, layout)`` returns ``(B, N, D)``: zeros at prefix and padded tokens.
    """

    def __init__(self, dim: int, spec: LocalMixSpec, grid_dims: int = 2) -> None:
        super().__init__()
        if spec.conv_size < 1:
            raise ValueError(f"LocalMixing: local mixing {spec.name!r} has no convolution")
        if grid_dims not in _CONVS:
            raise ValueError(f"LocalMixing: grid_dims must be 1, 2 or 3, got {grid_dims}")
        k = spec.conv_size
        size = (1, k, k) if spec.spatial_only and grid_dims == 3 else (k,) * grid_dims
        self.spec, self.grid_dims = spec, grid_dims
        self.conv = _CONVS[grid_dims](dim, dim, size, padding=tuple(s // 2 for s in size), groups=dim)
        nn.init.zeros_(self.conv.weight)
        nn.init.zeros_(self.conv.bias)

    def forward(self, tokens: torch.Tensor, layout: "Optional[TokenLayout]") -> torch.Tensor:
        """``tokens`` ``(B, N, D)`` (v or the block input) -> local term ``(B, N, D)``."""
        if layout is None or len(layout.grid) != self.grid_dims:
            got = "no layout" if layout is None else f"a {len(layout.grid)}-D grid {tuple(layout.grid)}"
            raise ValueError(f"local mixing {self.spec.name!r} needs a TokenLayout with a {self.grid_dims}-D grid, "
                             f"got {got}")
        B, N, D = tokens.shape
        P = layout.num_prefix_tokens
        if N != P + math.prod(layout.grid):
            raise ValueError(f"local mixing: {N} tokens do not match prefix {P} + grid {tuple(layout.grid)}")
        grid = tokens[:, P:]
        pad = layout.key_padding_mask[:, P:, None] if layout.key_padding_mask is not None else None
        if pad is not None:
            grid = grid.masked_fill(pad, 0.0)
        # (B, *grid, D) viewed as (B, D, *grid) has channels-last strides; v is a strided slice of the
        # qkv output, and the depthwise conv runs faster on a dense channels-last copy than on that view
        grid = grid.reshape(B, *layout.grid, D).movedim(-1, 1)
        fmt = _CHANNELS_LAST.get(self.grid_dims)
        if fmt is not None and not grid.is_contiguous(memory_format=fmt):
            grid = grid.contiguous(memory_format=fmt)
        mixed = self.conv(grid).movedim(1, -1).reshape(B, -1, D)
        if pad is not None:
            mixed = mixed.masked_fill(pad, 0.0)
        if P:
            mixed = torch.cat([mixed.new_zeros(B, P, D), mixed], dim=1)
        return mixed

    def extra_repr(self) -> str:
        return f"{self.spec.name}, source={self.spec.source}"
