"""FLOP counting with ``torch.utils.flop_counter.FlopCounterMode``.

FlopCounterMode counts 0 FLOPs for the fused CPU kernel of ``F.scaled_dot_product_attention``
(torch 2.14), so counting runs with SDPA forced onto its math path, which decomposes into the
matmuls it really performs (QK^T and AV: 2·T²·D each per block, multiply-add = 2 FLOPs).
Hydra's own work is elementwise (about 8·T·D per block), which FlopCounterMode does not count
either; it is under 0.1% of a ViT block's FLOPs and is added by formula where reported, as is the
elementwise work of the AFT-Simple and Poly-NL baselines.
"""
from __future__ import annotations

from typing import Callable

from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of ``fn`` (matmuls and convolutions, forward and backward if it runs it)."""
    with sdpa_kernel([SDPBackend.MATH]), FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def attention_flops_by_formula(tokens: int, dim: int, depth: int) -> int:
    """Hand count of softmax attention's matmuls in a forward pass: 4·T²·D per global block."""
    return 4 * tokens * tokens * dim * depth


# elementwise FLOPs per token and channel of each token-linear op, forward
ELEMENTWISE_PER_TOKEN_CHANNEL = {
    "hydra": 8,    # two L2 norms (square, sum, scale: 3 each), k*v and its sum, q*kv
    "hydra_norm": 8,  # q*scale, sums of k, v and k*v (k*v: 2), q*covariance, + mean of v
    "aft": 11,     # softmax over tokens (max, subtract, exp, sum, divide), w*v and its sum, sigmoid (3), gate
    "polynl": 3,   # k*v, its sum, q*context
}


def hydra_flops_by_formula(tokens: int, dim: int, depth: int, kind: str = "hydra") -> int:
    """Hand count of a token-linear op's elementwise work in a forward pass over ``depth`` blocks of
    ``kind`` (Hydra: two L2 norms, kv, output, ~8·T·D; see :data:`ELEMENTWISE_PER_TOKEN_CHANNEL`)."""
    return ELEMENTWISE_PER_TOKEN_CHANNEL[kind] * tokens * dim * depth
