"""Op-level benchmark: the Hydra op against the memory-bandwidth floor ``q + k + v``."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attention import hydra_attention
from .timing import interleaved_medians

__all__ = ["bench_hydra_op", "OP_COLUMNS"]

OP_COLUMNS = ["impl", "batch", "tokens", "dim", "dtype", "device", "ms_per_iter", "x_floor", "gbytes_per_s"]


def bench_hydra_op(batch: int = 8, tokens: int = 4096, dim: int = 768, dtype: torch.dtype = torch.float32,
                   device: torch.device = torch.device("cpu"), repeats: int = 15, warmup: int = 3,
                   backward: bool = False, msa_heads: int = 0) -> list[dict]:
    """Median time of: the floor (``q + k + v``: reads 3 tensors, the least any attention can
    do), Hydra eager, Hydra fused (torch.compile: C++ on CPU, generated Triton on CUDA), on CUDA
    the hand-written Triton kernels, and, if ``msa_heads``, softmax SDPA with that many heads.
    ``backward`` times forward + backward. ``gbytes_per_s`` counts Hydra's minimum traffic
    (read q, k, v and write out; x3 with backward) over the time: on a GPU, compare it with the
    device's peak bandwidth."""
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(batch, tokens, dim, device=device, dtype=dtype, generator=g) for _ in range(3))
    if backward:
        for t in (q, k, v):
            t.requires_grad_()
    grad = torch.ones_like(q)

    def run(f):
        def call():
            out = f()
            if backward:
                torch.autograd.grad(out, (q, k, v), grad)
        return call

    fns = {
        "floor(q+k+v)": run(lambda: q + k + v),
        "hydra_eager": run(lambda: hydra_attention(q, k, v, impl="eager")),
        "hydra_fused": run(lambda: hydra_attention(q, k, v, impl="fused")),
    }
    if device.type == "cuda":
        fns["hydra_triton"] = run(lambda: hydra_attention(q, k, v, impl="triton"))
    if msa_heads:
        split = lambda t: t.view(batch, tokens, msa_heads, dim // msa_heads).transpose(1, 2)  # noqa: E731
        fns[f"sdpa_msa_h{msa_heads}"] = run(lambda: F.scaled_dot_product_attention(
            split(q), split(k), split(v)).transpose(1, 2).reshape(batch, tokens, dim))
    fns["hydra_fused"]()  # compile outside the timed rounds
    times = interleaved_medians(fns, warmup=warmup, repeats=repeats, device=device)
    nbytes = 4 * q.numel() * q.element_size() * (3 if backward else 1)  # read q, k, v, write out (x3 with grads)
    floor = times["floor(q+k+v)"]
    return [dict(impl=name, batch=batch, tokens=tokens, dim=dim, dtype=str(dtype).replace("torch.", ""),
                 device=str(device), ms_per_iter=t * 1e3, x_floor=t / floor, gbytes_per_s=nbytes / t / 1e9)
            for name, t in times.items()]
