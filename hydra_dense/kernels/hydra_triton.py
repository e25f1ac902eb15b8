"""Hydra attention as Triton kernels (forward and backward), the fused path on CUDA.

Memory traffic is the cost of Hydra (its FLOPs are a few per element), so the kernels make the
fewest passes over ``(B, T, D)`` tensors the maths allows:

forward  1. per token chunk: L2 norm of each k row (fp32), partial ``kv = sum_t phi(k_t) * v_t``
            (reads k, v once; masked tokens skipped); partials summed over chunks (tiny, fp32)
         2. per token chunk: L2 norm of each q row, ``out = phi(q) * kv`` (reads q, writes out)
backward 1. reads grad_out and q: writes dq (through the norm's Jacobian) and partial
            ``dkv = sum_t grad_t * phi(q_t)``
         2. reads k and v: writes dk (through the norm) and ``dv = dkv * phi(k)``

A program holds ``BLOCK_T`` whole rows (all D features, padded to a power of two), so each row's
norm is computed where the row is used. ``TRITON_INTERPRET=1`` (set before triton is imported)
runs the same kernels on CPU tensors, which is how their numerics are tested without a GPU.
"""
from __future__ import annotations

import os
from typing import Optional

import torch

try:  # triton ships with CUDA builds of torch; absent elsewhere
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except Exception:  # pragma: no cover - depends on the install
    HAVE_TRITON = False

__all__ = ["HAVE_TRITON", "hydra_attention_triton", "triton_usable"]

EPS = 1e-12


def triton_usable(t: torch.Tensor) -> bool:
    """True when the Triton path can run on ``t`` (CUDA tensor, or CPU under TRITON_INTERPRET=1)."""
    if not HAVE_TRITON:
        return False
    return t.is_cuda or (t.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")


if HAVE_TRITON:

    @triton.jit
    def _tile_index(T, D, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
        """This program's batch row, token indices, feature indices and their bounds masks."""
        b = tl.program_id(0)
        t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
        d = tl.arange(0, BLOCK_D)
        tm, dm = t < T, d < D
        return b, t, d, tm, dm, tm[:, None] & dm[None, :]

    @triton.jit
    def _load_rows(ptr, b, t, d, s_b, s_t, mask2):
        """A ``(BLOCK_T, BLOCK_D)`` tile of whole rows, in fp32 (zeros out of bounds)."""
        return tl.load(ptr + b * s_b + t[:, None] * s_t + d[None, :], mask=mask2, other=0.0).to(tl.float32)

    @triton.jit
    def _inv_norm(x, m_ptr, b, t, tm, sm_b, eps, HAS_MASK: tl.constexpr):
        """1 / ||row||, and 0 for padded rows (which then contribute and receive nothing)."""
        r = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) + eps)
        if HAS_MASK:
            pad = tl.load(m_ptr + b * sm_b + t, mask=tm, other=1)
            r = tl.where(pad != 0, 0.0, r)
        return r

    @triton.jit
    def _store_rows(ptr, x, b, t, d, s_b, s_t, mask2):
        tl.store(ptr + b * s_b + t[:, None] * s_t + d[None, :], x.to(ptr.dtype.element_ty), mask=mask2)

    @triton.jit
    def _kv_partial_kernel(k_ptr, v_ptr, m_ptr, part_ptr, T, D, sk_b, sk_t, sv_b, sv_t, sm_b, n_chunks,
                           eps, HAS_MASK: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
        b, t, d, tm, dm, mask2 = _tile_index(T, D, BLOCK_T, BLOCK_D)
        k = _load_rows(k_ptr, b, t, d, sk_b, sk_t, mask2)
        v = _load_rows(v_ptr, b, t, d, sv_b, sv_t, mask2)
        rk = _inv_norm(k, m_ptr, b, t, tm, sm_b, eps, HAS_MASK)
        tl.store(part_ptr + (b * n_chunks + tl.program_id(1)) * D + d, tl.sum(k * rk[:, None] * v, axis=0), mask=dm)

    @triton.jit
    def _out_kernel(q_ptr, kv_ptr, m_ptr, o_ptr, T, D, sq_b, sq_t, so_b, so_t, sm_b, eps,
                    HAS_MASK: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
        b, t, d, tm, dm, mask2 = _tile_index(T, D, BLOCK_T, BLOCK_D)
        q = _load_rows(q_ptr, b, t, d, sq_b, sq_t, mask2)
        kv = tl.load(kv_ptr + b * D + d, mask=dm, other=0.0)
        rq = _inv_norm(q, m_ptr, b, t, tm, sm_b, eps, HAS_MASK)
        _store_rows(o_ptr, q * rq[:, None] * kv[None, :], b, t, d, so_b, so_t, mask2)

    @triton.jit
    def _bwd_q_kernel(g_ptr, q_ptr, kv_ptr, m_ptr, dq_ptr, part_ptr, T, D, sg_b, sg_t, sq_b, sq_t, sdq_b, sdq_t,
                      sm_b, n_chunks, eps, HAS_MASK: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
        b, t, d, tm, dm, mask2 = _tile_index(T, D, BLOCK_T, BLOCK_D)
        g = _load_rows(g_ptr, b, t, d, sg_b, sg_t, mask2)
        q = _load_rows(q_ptr, b, t, d, sq_b, sq_t, mask2)
        kv = tl.load(kv_ptr + b * D + d, mask=dm, other=0.0)
        rq = _inv_norm(q, m_ptr, b, t, tm, sm_b, eps, HAS_MASK)
        qn = q * rq[:, None]
        dqn = g * kv[None, :]
        # d/dq of q * rq: rq * (dqn - qn * <qn, dqn>) (rq = 0 on padded rows zeroes them)
        _store_rows(dq_ptr, rq[:, None] * (dqn - qn * tl.sum(qn * dqn, axis=1)[:, None]), b, t, d, sdq_b, sdq_t, mask2)
        tl.store(part_ptr + (b * n_chunks + tl.program_id(1)) * D + d, tl.sum(g * qn, axis=0), mask=dm)

    @triton.jit
    def _bwd_kv_kernel(k_ptr, v_ptr, dkv_ptr, m_ptr, dk_ptr, dv_ptr, T, D, sk_b, sk_t, sv_b, sv_t, sdk_b, sdk_t,
                       sdv_b, sdv_t, sm_b, eps, HAS_MASK: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
        b, t, d, tm, dm, mask2 = _tile_index(T, D, BLOCK_T, BLOCK_D)
        k = _load_rows(k_ptr, b, t, d, sk_b, sk_t, mask2)
        v = _load_rows(v_ptr, b, t, d, sv_b, sv_t, mask2)
        dkv = tl.load(dkv_ptr + b * D + d, mask=dm, other=0.0)
        rk = _inv_norm(k, m_ptr, b, t, tm, sm_b, eps, HAS_MASK)
        kn = k * rk[:, None]
        dkn = dkv[None, :] * v
        _store_rows(dk_ptr, rk[:, None] * (dkn - kn * tl.sum(kn * dkn, axis=1)[:, None]), b, t, d, sdk_b, sdk_t, mask2)
        _store_rows(dv_ptr, dkv[None, :] * kn, b, t, d, sdv_b, sdv_t, mask2)


def _block_t(D: int) -> int:
    block_d = triton.next_power_of_2(D)
    # keep a tile at ~8k fp32 values per operand (registers / shared memory)
    return max(1, min(64, 8192 // block_d))


def _rows(x: torch.Tensor) -> torch.Tensor:
    """(..., T, D) -> (B, T, D) with unit stride on D (a view when possible)."""
    x = x.reshape(-1, *x.shape[-2:])
    return x if x.stride(-1) == 1 else x.contiguous()


class _HydraTriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask):
        shape = q.shape
        q3, k3, v3 = _rows(q), _rows(k), _rows(v)
        B, T, D = q3.shape
        m = mask.reshape(B, T).to(torch.int8).contiguous() if mask is not None else q3.new_zeros(1, dtype=torch.int8)
        BLOCK_D = triton.next_power_of_2(D)
        BLOCK_T = _block_t(D)
        n_chunks = triton.cdiv(T, BLOCK_T)
        part = torch.empty(B, n_chunks, D, device=q.device, dtype=torch.float32)
        grid = (B, n_chunks)
        _kv_partial_kernel[grid](k3, v3, m, part, T, D, k3.stride(0), k3.stride(1), v3.stride(0), v3.stride(1),
                                 m.stride(0) if mask is not None else 0, n_chunks, EPS, HAS_MASK=mask is not None,
                                 BLOCK_T=BLOCK_T, BLOCK_D=BLOCK_D)
        kv = part.sum(1).contiguous()  # (B, D) fp32
        out = torch.empty(B, T, D, device=q.device, dtype=q.dtype)
        _out_kernel[grid](q3, kv, m, out, T, D, q3.stride(0), q3.stride(1), out.stride(0), out.stride(1),
                          m.stride(0) if mask is not None else 0, EPS, HAS_MASK=mask is not None,
                          BLOCK_T=BLOCK_T, BLOCK_D=BLOCK_D)
        ctx.save_for_backward(q3, k3, v3, kv, m)
        ctx.has_mask, ctx.shape = mask is not None, shape
        return out.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        q3, k3, v3, kv, m = ctx.saved_tensors
        B, T, D = q3.shape
        g = _rows(grad)
        BLOCK_D = triton.next_power_of_2(D)
        BLOCK_T = _block_t(D)
        n_chunks = triton.cdiv(T, BLOCK_T)
        grid = (B, n_chunks)
        sm = m.stride(0) if ctx.has_mask else 0
        dq = torch.empty(B, T, D, device=q3.device, dtype=q3.dtype)
        part = torch.empty(B, n_chunks, D, device=q3.device, dtype=torch.float32)
        _bwd_q_kernel[grid](g, q3, kv, m, dq, part, T, D, g.stride(0), g.stride(1), q3.stride(0), q3.stride(1),
                            dq.stride(0), dq.stride(1), sm, n_chunks, EPS, HAS_MASK=ctx.has_mask,
                            BLOCK_T=BLOCK_T, BLOCK_D=BLOCK_D)
        dkv = part.sum(1).contiguous()
        dk = torch.empty(B, T, D, device=q3.device, dtype=k3.dtype)
        dv = torch.empty(B, T, D, device=q3.device, dtype=v3.dtype)
        _bwd_kv_kernel[grid](k3, v3, dkv, m, dk, dv, T, D, k3.stride(0), k3.stride(1), v3.stride(0), v3.stride(1),
                             dk.stride(0), dk.stride(1), dv.stride(0), dv.stride(1), sm, EPS,
                             HAS_MASK=ctx.has_mask, BLOCK_T=BLOCK_T, BLOCK_D=BLOCK_D)
        s = ctx.shape
        return dq.reshape(s), dk.reshape(s), dv.reshape(s), None


def hydra_attention_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           key_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Same contract as :func:`hydra_dense.attention.hydra_attention` (inputs already checked)."""
    if not HAVE_TRITON:
        raise RuntimeError("triton is not installed")
    return _HydraTriton.apply(q, k, v, key_padding_mask)
