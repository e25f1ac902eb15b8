"""Cut a token grid into non-overlapping windows and put it back: one partition for every window op.

Both windowed softmax attention (:class:`~hydra_dense.attention.mixers.window_msa.WindowMSAttention`, ViTDet's
window blocks) and the window local branch (:mod:`hydra_dense.attention.local_window`) use it. A
grid ``(lead..., h, w)`` is padded at the bottom / right to a window multiple (after an optional
shift that pads the top / left), leading axes (a clip's frames) are folded into the batch, and the
padded positions are masked out of the keys. A 1-D grid (a temporal axis) is cut into runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

__all__ = ["WindowGrid", "window_grid", "partition", "unpartition", "window_key_mask", "keep_one_key"]


@dataclass(frozen=True)
class WindowGrid:
    """How a batch of grids is cut: ``lead`` folded planes of ``h x w`` tokens in ``wh x ww`` windows.

    ``shift_h`` / ``shift_w`` tokens of padding go before the first row / column, ``pad_h`` /
    ``pad_w`` after the last, so that every side is a whole number of windows.
    """

    batch: int
    lead: int
    h: int
    w: int
    wh: int
    ww: int
    shift_h: int = 0
    shift_w: int = 0

    @property
    def pad_h(self) -> int:
        return (-(self.h + self.shift_h)) % self.wh

    @property
    def pad_w(self) -> int:
        return (-(self.w + self.shift_w)) % self.ww

    @property
    def rows(self) -> int:
        """Windows down the plane."""
        return (self.shift_h + self.h + self.pad_h) // self.wh

    @property
    def cols(self) -> int:
        """Windows across the plane."""
        return (self.shift_w + self.w + self.pad_w) // self.ww

    @property
    def per_sample(self) -> int:
        """Windows per batch element (all planes)."""
        return self.lead * self.rows * self.cols

    @property
    def needs_mask(self) -> bool:
        """True where padding or a shift put positions that are no token into some window."""
        return bool(self.pad_h or self.pad_w or self.shift_h or self.shift_w)

    @property
    def _pad(self) -> tuple[int, int, int, int]:
        return (self.shift_w, self.pad_w, self.shift_h, self.pad_h)


def window_grid(batch: int, grid: tuple[int, ...], window: int, shift: int = 0) -> WindowGrid:
    """The cut of ``grid`` (1-D ``(n,)``, 2-D ``(h, w)`` or 3-D ``(t, h, w)``) into ``window``-sided windows.

    A 1-D grid becomes runs of ``window`` tokens; ``shift`` moves the windows by that many tokens
    up and left (along the run for 1-D).
    """
    if len(grid) == 1:
        return WindowGrid(batch, 1, 1, grid[0], 1, window, 0, shift)
    return WindowGrid(batch, math.prod(grid[:-2]), grid[-2], grid[-1], window, window, shift, shift)


def partition(tokens: torch.Tensor, cut: WindowGrid) -> torch.Tensor:
    """``(B, H, lead * h * w, d)`` grid tokens -> ``(B * windows, H, wh * ww, d)``, padding as zeros."""
    B, H, _, d = tokens.shape
    t = F.pad(tokens.reshape(B, H, cut.lead, cut.h, cut.w, d), (0, 0, *cut._pad))
    t = t.reshape(B, H, cut.lead, cut.rows, cut.wh, cut.cols, cut.ww, d).permute(0, 2, 3, 5, 1, 4, 6, 7)
    return t.reshape(B * cut.per_sample, H, cut.wh * cut.ww, d)


def unpartition(windows: torch.Tensor, cut: WindowGrid) -> torch.Tensor:
    """Inverse of :func:`partition`: ``(B * windows, H, wh * ww, d)`` -> ``(B, H, lead * h * w, d)``."""
    H, d = windows.shape[1], windows.shape[-1]
    B = cut.batch
    o = windows.reshape(B, cut.lead, cut.rows, cut.cols, H, cut.wh, cut.ww, d).permute(0, 4, 1, 2, 5, 3, 6, 7)
    o = o.reshape(B, H, cut.lead, cut.rows * cut.wh, cut.cols * cut.ww, d)
    o = o[:, :, :, cut.shift_h:cut.shift_h + cut.h, cut.shift_w:cut.shift_w + cut.w]
    return o.reshape(B, H, cut.lead * cut.h * cut.w, d)


def window_key_mask(cut: WindowGrid, grid_padding: Optional[torch.Tensor],
                    device: torch.device) -> Optional[torch.Tensor]:
    """Which keys of each window are real tokens: bool ``(B * windows, 1, 1, wh * ww)``, True = attend.

    ``grid_padding``: bool ``(B, lead * h * w)``, True for tokens made only of image padding (the grid
    part of a :class:`~hydra_dense.attention.layout.TokenLayout`'s mask). None where every key is real.
    """
    if grid_padding is None and not cut.needs_mask:
        return None
    valid = torch.ones(cut.batch, cut.lead, cut.h, cut.w, dtype=torch.bool, device=device)
    if grid_padding is not None:
        valid = ~grid_padding.reshape(cut.batch, cut.lead, cut.h, cut.w)
    valid = F.pad(valid, cut._pad, value=False).reshape(cut.batch, cut.lead, cut.rows, cut.wh, cut.cols, cut.ww)
    return valid.permute(0, 1, 2, 4, 3, 5).reshape(cut.batch * cut.per_sample, 1, 1, cut.wh * cut.ww)


def keep_one_key(mask: torch.Tensor) -> torch.Tensor:
    """A window whose keys are all masked would give NaN rows: let such a window attend to all its keys.

    Its queries are padding too, and their outputs are dropped or zeroed by the caller.
    """
    return mask | ~mask.any(dim=-1, keepdim=True)
