"""Switching one path of a trained model's attention off, to see what it carries.

A Hydra block with a local branch mixes tokens two ways: the global term ``phi(q) * kv`` and the
local branch (convolution and / or window softmax). A ViTDet backbone mixes them two ways across
blocks: windows in most, global attention in a few. :func:`muted` sets one of them to zero.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Literal, Sequence

import torch
from torch import nn

from .modules import GlobalLinearAttention, LocalOnlyAttention, MSAttention, PlannedAttention

__all__ = ["PathName", "muted", "linear_blocks", "global_term_blocks"]

PathName = Literal["global", "local"]


def linear_blocks(backbone: nn.Module) -> list[int]:
    """Blocks whose attention is a global linear one (Hydra, linear, ...) or the local branch alone."""
    return [i for i, blk in enumerate(backbone.blocks) if isinstance(blk.attn, GlobalLinearAttention)]


def global_term_blocks(backbone: nn.Module) -> list[int]:
    """Blocks holding a global term that other blocks' or branches' local mixing could stand in for:
    the global linear term of a block that has a local branch or sits among window blocks, and the
    global softmax blocks among window blocks (ViTDet). Empty for a model with global mixing only
    (plain MSA or plain Hydra), where zeroing it leaves no token mixing at all, and for local-only
    models."""
    kinds = [getattr(blk.attn, "kind", "") for blk in backbone.blocks]
    windowed = "window" in kinds
    out = []
    for i, blk in enumerate(backbone.blocks):
        attn = blk.attn
        if isinstance(attn, LocalOnlyAttention):
            continue
        if isinstance(attn, GlobalLinearAttention) and (windowed or attn.local is not None
                                                        or attn.local_window is not None):
            out.append(i)
        elif isinstance(attn, MSAttention) and windowed:
            out.append(i)
    return out


def _zero_global(attn: PlannedAttention) -> None:
    if isinstance(attn, GlobalLinearAttention):
        attn._global = lambda q, k, v, mask: torch.zeros_like(v)  # noqa: E731 - shadows the method
    else:  # a softmax block: its whole output is the global term, so proj(0)
        attn.forward = lambda x, layout=None: attn._project(torch.zeros_like(x))  # noqa: E731


@contextmanager
def muted(backbone: nn.Module, blocks: Sequence[int], path: PathName) -> Iterator[None]:
    """Within the context, ``path`` is zero in ``blocks``: ``global`` = the Hydra / linear term
    (``phi(q) * kv``) or a softmax block's attention, ``local`` = the local branch (convolution and /
    or window softmax)."""
    saved = []
    try:
        for i in blocks:
            attn = backbone.blocks[i].attn
            if path == "global":
                _zero_global(attn)
                saved.append((attn, None))
            else:
                saved.append((attn, (attn.local, attn.local_window)))
                attn.local, attn.local_window = None, None
        yield
    finally:
        for attn, branches in saved:
            if branches is None:
                for name in ("_global", "forward"):
                    attn.__dict__.pop(name, None)
            else:
                attn.local, attn.local_window = branches
