"""Per-block attention maps for one query token, for softmax and Hydra blocks alike.

Softmax (MSA) block: the attention weights of the query row, averaged over heads (sum to 1).

Hydra block: the output of query ``i`` is ``out_i = sum_t c_t`` with ``c_t = phi(q_i) * phi(k_t) * v_t``
(a D-vector per input token). The map is each token's share of that output along its own
direction::

    a_t = <c_t, out_i> / ||out_i||^2        (sums to 1 over t; can be negative)

i.e. how much of the query's attention output token ``t`` accounts for — the same "sums to one
over the inputs" reading as a softmax row, which makes the two comparable side by side.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .modules import HydraAttention, MSAttention, PlannedAttention

__all__ = ["attention_maps", "hydra_token_contributions", "msa_query_weights"]


def hydra_token_contributions(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, index: int) -> torch.Tensor:
    """``q, k, v``: ``(T, D)`` -> ``(T,)`` contributions of every token to query ``index`` (sum 1)."""
    qn = F.normalize(q.double(), dim=-1, eps=1e-12)
    kn = F.normalize(k.double(), dim=-1, eps=1e-12)
    contrib = qn[index] * kn * v.double()  # (T, D)
    out = contrib.sum(0)
    return (contrib @ out) / out.dot(out).clamp_min(1e-30)


def msa_query_weights(attn: PlannedAttention, x: torch.Tensor, index: int) -> torch.Tensor:
    """Softmax weights ``(T,)`` of query ``index`` (mean over heads); ``x`` is the block's
    normed input ``(T, D)``."""
    q, k, _ = attn._heads(x.unsqueeze(0))  # (1, H, T, d)
    w = (q[0, :, index].unsqueeze(1) @ k[0].transpose(-1, -2)).squeeze(1) * attn.scale  # (H, T)
    return w.softmax(-1).mean(0)


@torch.no_grad()
def attention_maps(backbone: torch.nn.Module, image: torch.Tensor, query_yx: tuple[int, int],
                   blocks: Optional[list[int]] = None) -> list[dict]:
    """Maps of the query patch at grid position ``query_yx`` for each (chosen) block.

    Args:
        backbone: a :class:`~hydra_dense.backbones.ViT`. image: ``(3, H, W)`` normalised.
    Returns:
        one dict per block: ``block``, ``kind`` (``msa`` / ``hydra``), ``map`` ``(h, w)`` float.
    """
    captured: dict[int, torch.Tensor] = {}
    hooks = []
    for i, blk in enumerate(backbone.blocks):
        if blocks is None or i in blocks:
            hooks.append(blk.attn.register_forward_hook(
                lambda mod, args, out, i=i: captured.__setitem__(i, args[0].detach())))
    try:
        with torch.no_grad():
            _, layout = backbone.forward_tokens(image.unsqueeze(0))
    finally:
        for h in hooks:
            h.remove()
    h, w = layout.grid
    P = layout.num_prefix_tokens
    y, x = query_yx
    if not (0 <= y < h and 0 <= x < w):
        raise ValueError(f"query {query_yx} is outside the {h}x{w} patch grid")
    index = P + y * w + x
    maps = []
    for i in sorted(captured):
        attn, xin = backbone.blocks[i].attn, captured[i][0]
        if isinstance(attn, HydraAttention):
            D = xin.shape[-1]
            q, k, v = attn.qkv(xin).unflatten(-1, (3, D)).unbind(-2)
            a, kind = hydra_token_contributions(q, k, v, index), "hydra"
        elif isinstance(attn, MSAttention):
            a, kind = msa_query_weights(attn, xin, index), "msa"
        else:
            continue
        maps.append(dict(block=i, kind=kind, map=a[P:].reshape(h, w).float()))
    return maps
