"""The Hydra op's fused kernels checked against an fp64 reference, and their memory bandwidth.

Used by ``tools/gpu_check.py``. On CUDA the fused path is the hand-written Triton kernels; on a
CPU (``--dry-run``) the same kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set
before triton is imported), so the check itself is exercised without a GPU.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch

from ..attention import hydra_attention, hydra_attention_eager
from ..attention.ops import FUSED_MIN_NUMEL
from .input_sizes import parse_dtype
from .timing import interleaved_medians

__all__ = ["check_kernel_numerics", "measure_bandwidth", "peak_bandwidth_gbs", "relative_error"]

# Error floors relative to max|reference| (a few output roundings of each dtype); a kernel also
# passes when it is within 2x of the eager op's own error in that dtype.
ERROR_FLOOR = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}

HydraFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]], torch.Tensor]


def _triton(q, k, v, mask):
    return hydra_attention(q, k, v, mask, impl="triton")


def relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """``max|x - ref| / max|ref|`` in fp64."""
    ref = ref.double()
    return float((x.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def _padding_mask(batch: int, tokens: int, device) -> torch.Tensor:
    """Row b pads its last ``b * T / (2B)`` tokens (row 0 none): uneven padding across the batch."""
    keep = [tokens - (b * tokens) // (2 * batch) for b in range(batch)]
    return torch.arange(tokens, device=device)[None, :] >= torch.tensor(keep, device=device)[:, None]


def _forward_backward(fn: HydraFn, q, k, v, mask, grad) -> tuple[torch.Tensor, ...]:
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, mask)
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), grad))


def check_kernel_numerics(shapes: Sequence[tuple[int, int, int]], dtypes: Sequence[str], device: torch.device,
                          fused: HydraFn = _triton, check_dispatch: bool = True) -> list[dict]:
    """One row per (shape, dtype, mask, tensor): the fused kernel's and the eager op's relative
    error against eager Hydra in fp64, for the output and the gradients of q, k and v.

    ``passed`` is False when the fused error exceeds ``max(2 x eager error, ERROR_FLOOR)``, when a
    padded token's output or k / v gradient is not exactly zero, or (``check_dispatch``, CUDA,
    tensors of at least ``FUSED_MIN_NUMEL``) when ``impl="auto"`` did not produce the fused
    kernel's bits, i.e. the default path did not actually run the kernel.
    """
    rows = []
    for B, T, D in shapes:
        g = torch.Generator(device=device).manual_seed(B * 1000003 + T * 101 + D)
        base = [torch.randn(B, T, D, device=device, generator=g) for _ in range(4)]
        for name in dtypes:
            dtype = parse_dtype(name)
            q, k, v, grad = (t.to(dtype) for t in base)
            for mask in (None, _padding_mask(B, T, device)):
                fused_res = _forward_backward(fused, q, k, v, mask, grad)
                eager_res = _forward_backward(hydra_attention_eager, q, k, v, mask, grad)
                ref_res = _forward_backward(hydra_attention_eager, q.double(), k.double(), v.double(), mask,
                                            grad.double())
                notes = []
                if mask is not None:
                    out, _, dk, dv = fused_res
                    if out[mask].abs().max() != 0 or dk[mask].abs().max() != 0 or dv[mask].abs().max() != 0:
                        notes.append("padded tokens not exactly zero")
                if check_dispatch and device.type == "cuda" and q.numel() >= FUSED_MIN_NUMEL:
                    with torch.no_grad():
                        if not torch.equal(hydra_attention(q, k, v, mask), fused_res[0]):
                            notes.append("impl='auto' did not run the fused kernel")
                for tensor, f, e, r in zip(("out", "dq", "dk", "dv"), fused_res, eager_res, ref_res):
                    err_f, err_e = relative_error(f, r), relative_error(e, r)
                    tol = max(2 * err_e, ERROR_FLOOR[dtype])
                    ok = err_f <= tol and math.isfinite(err_f) and not notes
                    rows.append(dict(shape=f"{B}x{T}x{D}", dtype=name, mask=mask is not None, tensor=tensor,
                                     fused_err=err_f, eager_err=err_e, tolerance=tol, passed=ok,
                                     note="; ".join(notes)))
                del fused_res, eager_res, ref_res
    return rows


# Vendor datasheet peaks (GB/s), for devices whose properties do not give the memory clock.
DATASHEET_GBS = {"H200": 4800, "H100 NVL": 3900, "H100 PCIe": 2000, "H100": 3350, "A100-SXM4-80GB": 2039,
                 "A100 80GB PCIe": 1935, "A100": 1555, "L40S": 864, "L4": 300, "A10": 600, "RTX 4090": 1008}


def peak_bandwidth_gbs(device: torch.device) -> tuple[float, str]:
    """The device's peak memory bandwidth in GB/s and where the number comes from."""
    if device.type != "cuda":
        return float("nan"), "no peak for a CPU"
    props = torch.cuda.get_device_properties(device)
    for name, gbs in DATASHEET_GBS.items():
        if name in props.name:
            return float(gbs), f"datasheet ({name})"
    clock_khz, bus_bits = getattr(props, "memory_clock_rate", 0), getattr(props, "memory_bus_width", 0)
    if clock_khz and bus_bits:  # double data rate: 2 transfers per clock
        return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9, "device properties (2 x memory clock x bus width)"
    return float("nan"), f"unknown for {props.name}"


def measure_bandwidth(shape: tuple[int, int, int], dtype: str, device: torch.device, repeats: int = 10,
                      inner: int = 10, fused: HydraFn = _triton) -> list[dict]:
    """Achieved bandwidth of the fused kernels: the least traffic each pass needs over its median
    time (forward: read q, k, v, write out = 4 tensors; backward adds read grad, q, k, v and write
    dq, dk, dv = 7), next to a plain copy (read + write) as the practical ceiling. ``inner`` calls
    per timed call keep launch and sync overhead out of the number."""
    B, T, D = shape
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v, grad = (torch.randn(B, T, D, device=device, generator=g).to(parse_dtype(dtype)) for _ in range(4))
    mask = _padding_mask(B, T, device)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

    def repeat(fn):
        def call():
            for _ in range(inner):
                fn()
        return call

    fns = {"copy": repeat(q.clone),
           "forward": repeat(lambda: fused(q, k, v, None)),
           "forward (masked)": repeat(lambda: fused(q, k, v, mask)),
           "forward + backward": repeat(lambda: torch.autograd.grad(fused(qg, kg, vg, None), (qg, kg, vg), grad))}
    tensors = {"copy": 2, "forward": 4, "forward (masked)": 4, "forward + backward": 11}
    times = interleaved_medians(fns, warmup=2, repeats=repeats, device=device)
    peak, _ = peak_bandwidth_gbs(device)
    nbytes = q.numel() * q.element_size()
    rows = []
    for name, t in times.items():
        gbs = tensors[name] * nbytes * inner / t / 1e9
        rows.append({"shape": f"{B}x{T}x{D}", "dtype": dtype, "pass": name, "ms": t / inner * 1e3,
                     "gbytes_per_s": gbs, "pct_of_peak": 100 * gbs / peak if peak == peak else float("nan")})
    return rows
