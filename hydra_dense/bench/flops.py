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

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count


def conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                        _output_padding, _groups, output_mask, out_shape=None, **kwargs) -> int:
    """A convolution's backward: the input gradient and the weight gradient each multiply every
    (output position, weight element) pair once, as the forward does. torch 2.14's own formula counts
    the weight gradient of a grouped convolution as if it were dense (``groups`` times too many: 384x
    for a ViT-S depthwise 7x7)."""
    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed=transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def flop_counter() -> FlopCounterMode:
    """A silent FlopCounterMode whose convolution backward is counted per group."""
    return FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: conv_backward_flops})


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of ``fn`` (matmuls and convolutions, forward and backward if it runs it)."""
    with sdpa_kernel([SDPBackend.MATH]), flop_counter() as counter:
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
