"""The Hydra op and multi-head linear attention as functions on ``(..., T, D)`` tensors.

Hydra attention (Bolya et al., 2022, arXiv 2209.07484): ``phi(x) = x / ||x||``, ``kv = sum_t
phi(k_t) * v_t``, ``out_t = phi(q_t) * kv``. Norms and the token sum run in fp32 under autocast;
large inputs go through a fused path (torch.compile on CPU, Triton kernels on CUDA).
"""
from __future__ import annotations

import os
import warnings
from typing import Callable, Literal, Optional

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

__all__ = ["hydra_attention", "hydra_attention_eager", "linear_attention", "aft_simple", "aft_simple_eager",
           "poly_nl", "poly_nl_eager", "norm_aware_hydra", "norm_aware_hydra_eager", "FeatureMapName", "feature_map_by_name", "HYDRA_EPS",
           "FUSED_MIN_NUMEL"]

FeatureMapName = Literal["cosine", "relu", "elu", "sigmoid", "identity"]  # phi of linear attention


# Added to ||x||^2 before the rsqrt. The norm is always formed in fp32 (never in fp16/bf16, where
# F.normalize's eps and the squares of small entries underflow), so a tiny eps is safe: a zero
# vector maps to zero instead of NaN, and vectors of norm >= 1e-5 are normalised to within 1%.
HYDRA_EPS = 1e-12


# --------------------------------------------------------------------------------------------
# Functional ops
# --------------------------------------------------------------------------------------------
def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> None:
    if q.dim() < 2:
        raise ValueError(f"hydra_attention: q must have shape (..., T, D), got {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            "hydra_attention: q, k and v must have the same shape (..., T, D); got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"hydra_attention: key_padding_mask must be bool (True = padded), got {mask.dtype}")
        if tuple(mask.shape) != tuple(q.shape[:-1]):
            raise ValueError(
                f"hydra_attention: key_padding_mask must have shape {tuple(q.shape[:-1])} (the leading dims "
                f"and T of q), got {tuple(mask.shape)}"
            )


def _acc(x: torch.Tensor) -> torch.Tensor:
    """Upcast half-precision tensors to fp32 for norms and sums; fp32/fp64 stay as they are."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _cosine(x: torch.Tensor) -> torch.Tensor:
    """L2-normalise over the last dim; the norm is computed in fp32 so fp16/bf16 never underflow."""
    xf = _acc(x)
    return xf * torch.rsqrt(xf.square().sum(-1, keepdim=True) + HYDRA_EPS)


def hydra_attention_eager(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Reference eager implementation of :func:`hydra_attention` (same contract)."""
    qn, kn = _cosine(q), _cosine(k)
    kv_terms = kn * _acc(v)
    if key_padding_mask is not None:
        kv_terms = kv_terms.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
    kv = kv_terms.sum(dim=-2, keepdim=True)  # (..., 1, D), fp32 accumulation
    out = qn * kv
    if key_padding_mask is not None:
        out = out.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
    return out.to(q.dtype)


_compiled: dict[str, Callable] = {}
_compile_failed = False


def _fused_fn(eager: Callable = hydra_attention_eager) -> Optional[Callable]:
    """torch.compile'd ``eager`` op (Hydra: one fused reduction pass over k, v and one pointwise pass
    over q; the token-linear baselines the same way).

    On CPU inductor emits C++/OpenMP loops, on CUDA Triton kernels; backward is compiled too.
    Returns None when compilation is unavailable (then the eager path is used).
    """
    global _compile_failed
    if _compile_failed:
        return None
    fn = _compiled.get(eager.__name__)
    if fn is None:
        try:
            fn = torch.compile(eager, dynamic=None, fullgraph=True)
        except Exception as err:  # pragma: no cover - depends on the toolchain
            warnings.warn(f"hydra_dense: torch.compile unavailable ({err}); using eager attention ops")
            _compile_failed = True
            return None
        _compiled[eager.__name__] = fn
    return fn


def _run_fused(eager: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               key_padding_mask: Optional[torch.Tensor]) -> torch.Tensor:
    """``eager(q, k, v, mask)`` through its compiled form, falling back to eager if compiling fails."""
    fn = _fused_fn(eager)
    if fn is not None:
        try:
            return fn(q, k, v, key_padding_mask)
        except Exception as err:  # pragma: no cover - compiler failure on an exotic setup
            global _compile_failed
            _compile_failed = True
            warnings.warn(f"hydra_dense: fused {eager.__name__} failed ({err}); falling back to eager")
    return eager(q, k, v, key_padding_mask)


# Below this many elements per tensor the fused path is not worth a compile.
FUSED_MIN_NUMEL = 1 << 20
Impl = Literal["auto", "eager", "fused", "triton"]


def _want_fused(q: torch.Tensor, impl: str) -> bool:
    if impl == "eager" or torch.compiler.is_exporting():  # exported graphs hold the eager ops
        return False
    if impl in ("fused", "triton"):
        return True
    if impl != "auto":
        raise ValueError(f"hydra_attention: impl must be one of 'auto', 'eager', 'fused', 'triton', got {impl!r}")
    if os.environ.get("HYDRA_DENSE_FUSED", "1") == "0" or torch.compiler.is_compiling():
        return False
    if is_in_torch_dispatch_mode():  # e.g. FlopCounterMode: torch.compile cannot run under it
        return False
    if torch.jit.is_scripting() or q.numel() < FUSED_MIN_NUMEL:
        return False
    return q.device.type in ("cpu", "cuda")


def hydra_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_padding_mask: Optional[torch.Tensor] = None,
    impl: Impl = "auto",
) -> torch.Tensor:
    """Hydra attention: multi-head linear attention with H = D heads and a cosine kernel.

    Args:
        q, k, v: ``(..., T, D)``, typically ``(B, T, D)``; any leading dims are batch dims.
        key_padding_mask: optional bool ``(..., T)``; True marks a padded token. Padded tokens
            contribute nothing to the global ``kv``, and their own output rows are **zero**
            (so padding never feeds anything downstream through attention).
        impl: ``"auto"`` (large tensors: the Triton kernels on CUDA, torch.compile on CPU;
            small ones: eager; ``HYDRA_DENSE_FUSED=0`` forces eager), ``"eager"``, ``"fused"``
            (torch.compile) or ``"triton"`` (:mod:`hydra_dense.kernels.hydra_triton`).

    Returns:
        ``(..., T, D)`` in the dtype of ``q``. The L2 norms and the token sum are computed in
        fp32 even when the inputs are fp16/bf16 (e.g. under autocast): a sum over thousands of
        tokens overflows fp16 and loses precision in bf16.
    """
    _check_qkv(q, k, v, key_padding_mask)
    if impl == "triton" or (impl == "auto" and q.is_cuda and _want_fused(q, impl)):
        from ..kernels.hydra_triton import hydra_attention_triton, triton_usable

        if triton_usable(q) and q.shape[-1] <= 8192:
            return hydra_attention_triton(q, k, v, key_padding_mask)
        if impl == "triton":
            raise RuntimeError("hydra_attention: impl='triton' needs triton and a CUDA tensor "
                               "(or TRITON_INTERPRET=1 on CPU)")
    if impl != "triton" and _want_fused(q, impl):
        return _run_fused(hydra_attention_eager, q, k, v, key_padding_mask)
    return hydra_attention_eager(q, k, v, key_padding_mask)


def feature_map_by_name(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The feature map ``phi`` called ``name`` (fp32 out)."""
    maps: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "cosine": _cosine,
        "relu": lambda x: F.relu(_acc(x)),
        "elu": lambda x: F.elu(_acc(x)) + 1.0,
        "sigmoid": lambda x: torch.sigmoid(_acc(x)),
        "identity": _acc,
    }
    if name not in maps:
        raise ValueError(f"unknown linear-attention feature map {name!r}; choose from {sorted(maps)}")
    return maps[name]


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    num_heads: int,
    feature_map: FeatureMapName = "cosine",
    key_padding_mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Multi-head linear attention (the paper's Eq. 7 and Table 1 ablations).

    ``phi`` is applied over the full feature dim D (for ``cosine``: L2 over D, as in Hydra),
    then the D features are split into ``num_heads`` heads of D/H features and each head
    computes ``phi(Q_h) (phi(K_h)^T V_h)`` — no softmax denominator, as in the paper.
    ``num_heads == D`` is Hydra attention; ``num_heads == 1`` is single-head linear attention.

    Args:
        q, k, v: ``(B, T, D)``. key_padding_mask: bool ``(B, T)``, True = padded.
    Returns:
        ``(B, T, D)`` in the dtype of ``q``.
    """
    _check_qkv(q, k, v, key_padding_mask)
    B, T, D = q.shape
    if D % num_heads:
        raise ValueError(f"linear_attention: D={D} is not divisible by num_heads={num_heads}")
    phi = feature_map_by_name(feature_map)
    qf, kf, vf = phi(q), phi(k), _acc(v)
    if key_padding_mask is not None:
        kf = kf.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
    split = lambda x: x.reshape(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, d)
    kv = split(kf).transpose(-1, -2) @ split(vf)  # (B, H, d, d)
    out = (split(qf) @ kv).transpose(1, 2).reshape(B, T, D)
    if key_padding_mask is not None:
        out = out.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
    return out.to(q.dtype)



# --------------------------------------------------------------------------------------------
# The paper's other token-linear attentions (baselines), on the same q, k, v
# --------------------------------------------------------------------------------------------
def aft_simple_eager(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Reference eager implementation of :func:`aft_simple` (same contract)."""
    kf = _acc(k)
    if key_padding_mask is not None:
        # finite, so that an all-padding row gives uniform weights instead of NaN
        kf = kf.masked_fill(key_padding_mask.unsqueeze(-1), torch.finfo(kf.dtype).min)
    weights = torch.softmax(kf, dim=-2)  # per channel, over tokens
    context = (weights * _acc(v)).sum(dim=-2, keepdim=True)  # (..., 1, D)
    out = torch.sigmoid(_acc(q)) * context
    if key_padding_mask is not None:
        out = out.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
    return out.to(q.dtype)


def poly_nl_eager(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Reference eager implementation of :func:`poly_nl` (same contract)."""
    kv_terms = _acc(k) * _acc(v)
    count = torch.full(q.shape[:-2] + (1, 1), q.shape[-2], dtype=kv_terms.dtype, device=q.device)
    if key_padding_mask is not None:
        kv_terms = kv_terms.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
        count = (~key_padding_mask).sum(-1, keepdim=True).unsqueeze(-1).to(kv_terms.dtype).clamp_min(1.0)
    out = _acc(q) * (kv_terms.sum(dim=-2, keepdim=True) / count)
    if key_padding_mask is not None:
        out = out.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
    return out.to(q.dtype)


def _baseline(eager: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              key_padding_mask: Optional[torch.Tensor], impl: str) -> torch.Tensor:
    _check_qkv(q, k, v, key_padding_mask)
    if impl == "triton":
        raise ValueError(f"{eager.__name__.removesuffix('_eager')}: impl must be 'auto', 'eager' or 'fused'")
    if _want_fused(q, impl):
        return _run_fused(eager, q, k, v, key_padding_mask)
    return eager(q, k, v, key_padding_mask)


def aft_simple(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
    impl: Impl = "auto",
) -> torch.Tensor:
    """AFT-Simple (Zhai et al., 2021, "An Attention Free Transformer"), per channel ``d``::

        out_t = sigmoid(q_t) * sum_s softmax_s(k)_s * v_s          (softmax over tokens s)

    Args and result as :func:`hydra_attention` (``(..., T, D)``; padded keys get zero weight and
    padded rows are zero; the softmax, the token sum and the gate run in fp32 under autocast).
    ``impl``: ``"auto"`` / ``"fused"`` (torch.compile) / ``"eager"``.
    """
    return _baseline(aft_simple_eager, q, k, v, key_padding_mask, impl)


def poly_nl(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
    impl: Impl = "auto",
) -> torch.Tensor:
    """Poly-NL's third-order polynomial (Babiloni et al., 2021) on a ViT's q, k, v::

        out_t = q_t * mean_s(k_s * v_s)                             (mean over the valid tokens s)

    Poly-NL replaces the non-local block's pairwise similarities by element-wise products:
    ``Y = [(X W1) * AvgPool((X W2) * X)] W3``, third order in ``X``. Here ``X W1`` is timm's q
    projection, ``X W2`` its k projection, the bare ``X`` becomes the v projection (``W_v = I``
    would be the paper's form exactly; a learned ``W_v`` lets an MSA checkpoint initialise it) and
    ``W3`` is ``proj``; the residual is the block's. Compared with Hydra: no cosine normalisation
    of q and k, and a mean instead of a sum over tokens. Args and result as :func:`hydra_attention`.
    """
    return _baseline(poly_nl_eager, q, k, v, key_padding_mask, impl)


# --------------------------------------------------------------------------------------------
# Norm-aware Hydra: one feature per head, weights that sum to one and keep the query's magnitude
# --------------------------------------------------------------------------------------------
def norm_aware_hydra_eager(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Reference eager implementation of :func:`norm_aware_hydra` (same contract)."""
    qf, kf, vf = _acc(q), _acc(k), _acc(v)
    count = torch.full(q.shape[:-2] + (1, 1), q.shape[-2], dtype=kf.dtype, device=q.device)
    if key_padding_mask is not None:
        keep = (~key_padding_mask).unsqueeze(-1)
        kf, vf = kf * keep, vf * keep
        count = keep.sum(-2, keepdim=True).to(kf.dtype).clamp_min(1.0)
    k_mean = kf.sum(-2, keepdim=True) / count
    v_mean = vf.sum(-2, keepdim=True) / count
    covariance = (kf * vf).sum(-2, keepdim=True) / count - k_mean * v_mean  # (..., 1, D)
    out = v_mean + qf * covariance
    if key_padding_mask is not None:
        out = out.masked_fill(key_padding_mask.unsqueeze(-1), 0.0)
    return out.to(q.dtype)


def norm_aware_hydra(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None,
    impl: Impl = "auto",
) -> torch.Tensor:
    """Hydra's one-feature heads with weights that sum to one and keep the query's norm, per channel ``d``::

        out_t = mean_s(v_s) + q_t * cov_s(k, v)                     (mean / covariance over the valid tokens s)

    i.e. token ``s`` gets the weight ``(1 + q_t (k_s - mean k)) / T``: the first-order expansion of
    a per-channel softmax ``exp(q_t k_s)``. The weights sum to one (the additive normalisation of
    MALA, "Rectifying Magnitude Neglect in Linear Attention") and their spread grows with ``|q_t|``,
    which Hydra's cosine kernel divides out. O(T D) like Hydra: three token means and one product.
    Args and result as :func:`hydra_attention` (the means in fp32 under autocast).
    """
    return _baseline(norm_aware_hydra_eager, q, k, v, key_padding_mask, impl)
