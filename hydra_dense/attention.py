"""Hydra attention, softmax multi-head attention and the per-block attention plan.

Hydra attention (Bolya et al., 2022, arXiv 2209.07484) is multi-head linear attention with as
many heads as features and a cosine kernel. With ``q, k, v`` of shape ``(B, T, D)``::

    phi(x) = x / ||x||_2                      (L2 over D: the cosine kernel)
    kv     = sum_t phi(k)_t * v_t              (B, 1, D): one global bottleneck
    out    = phi(q) * kv                       (B, T, D)

Cost O(T·D) in time and memory, against O(T²·D) for softmax attention.

Every attention module here subclasses timm's :class:`~timm.layers.Attention`, so all of them
own the same parameters (``qkv``, ``proj`` and, if enabled, ``q_norm`` / ``k_norm``) and one
state dict initialises any of them: an MSA-pretrained ViT initialises a Hydra or hybrid one.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Callable, Literal, Optional, Sequence, Union, get_args

import torch
import torch.nn.functional as F
from torch import nn
from timm.layers import Attention as TimmAttention
from timm.models.vision_transformer_sam import get_decomposed_rel_pos_bias

from .local_mixing import LocalMixing, parse_local

__all__ = [
    "hydra_attention",
    "hydra_attention_eager",
    "linear_attention",
    "TokenLayout",
    "PlannedAttention",
    "MSAttention",
    "HydraAttention",
    "WindowMSAttention",
    "NoMixAttention",
    "LinearAttention",
    "GlobalLinearAttention",
    "AttentionKind",
    "AttentionPlan",
    "build_attention",
    "ATTENTION_KINDS",
]

AttentionKind = Literal["msa", "hydra", "window", "none", "linear"]
ATTENTION_KINDS: tuple[str, ...] = get_args(AttentionKind)
KernelName = Literal["cosine", "relu", "elu", "sigmoid", "identity"]
LOCAL_KINDS = ("hydra", "linear")  # the kinds a plan's ``local`` branch applies to

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


def _fused_fn() -> Optional[Callable]:
    """torch.compile'd Hydra (one fused reduction pass over k, v and one pointwise pass over q).

    On CPU inductor emits C++/OpenMP loops, on CUDA Triton kernels; backward is compiled too.
    Returns None when compilation is unavailable (then the eager path is used).
    """
    global _compile_failed
    if _compile_failed:
        return None
    fn = _compiled.get("hydra")
    if fn is None:
        try:
            fn = torch.compile(hydra_attention_eager, dynamic=None, fullgraph=True)
        except Exception as err:  # pragma: no cover - depends on the toolchain
            warnings.warn(f"hydra_dense: torch.compile unavailable ({err}); using eager Hydra attention")
            _compile_failed = True
            return None
        _compiled["hydra"] = fn
    return fn


# Below this many elements per tensor the fused path is not worth a compile.
FUSED_MIN_NUMEL = 1 << 20
Impl = Literal["auto", "eager", "fused", "triton"]


def _want_fused(q: torch.Tensor, impl: str) -> bool:
    if impl == "eager":
        return False
    if impl in ("fused", "triton"):
        return True
    if impl != "auto":
        raise ValueError(f"hydra_attention: impl must be one of 'auto', 'eager', 'fused', 'triton', got {impl!r}")
    if os.environ.get("HYDRA_DENSE_FUSED", "1") == "0" or torch.compiler.is_compiling():
        return False
    from torch.utils._python_dispatch import is_in_torch_dispatch_mode

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
        from .kernels.hydra_triton import hydra_attention_triton, triton_usable

        if triton_usable(q) and q.shape[-1] <= 8192:
            return hydra_attention_triton(q, k, v, key_padding_mask)
        if impl == "triton":
            raise RuntimeError("hydra_attention: impl='triton' needs triton and a CUDA tensor "
                               "(or TRITON_INTERPRET=1 on CPU)")
    if impl != "triton" and _want_fused(q, impl):
        fn = _fused_fn()
        if fn is not None:
            try:
                return fn(q, k, v, key_padding_mask)
            except Exception as err:  # pragma: no cover - compiler failure on an exotic setup
                global _compile_failed
                _compile_failed = True
                warnings.warn(f"hydra_dense: fused Hydra attention failed ({err}); falling back to eager")
    return hydra_attention_eager(q, k, v, key_padding_mask)


def _kernel(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    kernels: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "cosine": _cosine,
        "relu": lambda x: F.relu(_acc(x)),
        "elu": lambda x: F.elu(_acc(x)) + 1.0,
        "sigmoid": lambda x: torch.sigmoid(_acc(x)),
        "identity": _acc,
    }
    if name not in kernels:
        raise ValueError(f"unknown linear-attention kernel {name!r}; choose from {sorted(kernels)}")
    return kernels[name]


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    num_heads: int,
    kernel: KernelName = "cosine",
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
    phi = _kernel(kernel)
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
# Modules
# --------------------------------------------------------------------------------------------
@dataclass
class TokenLayout:
    """How a token sequence ``(B, N, D)`` maps onto the input.

    Attributes:
        grid: spatial (or space-time) size of the patch grid, e.g. ``(h, w)`` or ``(t, h, w)``.
        num_prefix_tokens: cls / register tokens in front of the grid tokens.
        key_padding_mask: optional bool ``(B, N)``, True for tokens made only of padding.
    """

    grid: tuple[int, ...]
    num_prefix_tokens: int = 0
    key_padding_mask: Optional[torch.Tensor] = None


class PlannedAttention(TimmAttention):
    """Base of every attention variant: timm's Attention parameters, a common ``forward``.

    ``forward(x, layout)`` takes ``x`` of shape ``(B, N, D)`` and an optional
    :class:`TokenLayout`, and returns ``(B, N, D)``.
    """

    kind: str = "base"

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = True, qk_norm: bool = False,
                 proj_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0,
                 norm_layer: Optional[type[nn.Module]] = None, **_: object) -> None:
        if qk_norm and norm_layer is None:
            norm_layer = nn.LayerNorm
        super().__init__(dim, num_heads=num_heads, qkv_bias=qkv_bias, qk_norm=qk_norm, proj_bias=proj_bias,
                         attn_drop=attn_drop, proj_drop=proj_drop, norm_layer=norm_layer)
        self._ctor = dict(dim=dim, num_heads=num_heads, qkv_bias=qkv_bias, qk_norm=qk_norm, proj_bias=proj_bias,
                          attn_drop=attn_drop, proj_drop=proj_drop, norm_layer=norm_layer)

    def _check(self, x: torch.Tensor, layout: Optional[TokenLayout]) -> None:
        if x.dim() != 3 or x.shape[-1] != self.qkv.in_features:
            raise ValueError(
                f"{type(self).__name__}: expected x of shape (B, N, {self.qkv.in_features}), got {tuple(x.shape)}"
            )
        if layout is not None and layout.key_padding_mask is not None:
            m = layout.key_padding_mask
            if m.dtype != torch.bool or tuple(m.shape) != tuple(x.shape[:2]):
                raise ValueError(
                    f"{type(self).__name__}: key_padding_mask must be bool of shape {tuple(x.shape[:2])}, "
                    f"got {m.dtype} {tuple(m.shape)}"
                )

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(B, N, D)`` -> q, k, v each ``(B, H, N, D/H)`` with q/k norms applied."""
        B, N, _ = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        return self.q_norm(q), self.k_norm(k), v

    def _out(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj_drop(self.proj(self.norm(x)))

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:  # noqa: D102
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"kind={self.kind}, dim={self.qkv.in_features}, heads={self.num_heads}"


class MSAttention(PlannedAttention):
    """Softmax multi-head self-attention through ``F.scaled_dot_product_attention``."""

    kind = "msa"

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        B, N, D = x.shape
        q, k, v = self._heads(x)
        mask = None
        if layout is not None and layout.key_padding_mask is not None:
            mask = ~layout.key_padding_mask[:, None, None, :]  # True = may attend
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                             dropout_p=self.attn_drop.p if self.training else 0.0)
        return self._out(out.transpose(1, 2).reshape(B, N, D))


class GlobalLinearAttention(PlannedAttention):
    """Base of the global linear attentions (Hydra, multi-head linear): an optional local branch.

    ``local`` names a :mod:`~hydra_dense.local_mixing` variant (``"dwc3"`` ...): a zero-initialised
    depthwise convolution over the token grid (``local_dims`` = 2 for images, 3 for video, 1 for a
    temporal axis), added to the global output before ``proj``. Its parameters are ``local.conv.*``.
    """

    def __init__(self, dim: int, num_heads: int = 8, local: Optional[str] = None, local_dims: int = 2,
                 **kwargs) -> None:
        super().__init__(dim, num_heads=num_heads, **kwargs)
        spec = parse_local(local)
        self.local = LocalMixing(dim, spec, local_dims) if spec is not None else None

    @property
    def local_name(self) -> Optional[str]:
        return self.local.spec.name if self.local is not None else None

    def _qkv_flat(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(B, N, D)`` -> q, k, v each ``(B, N, D)`` (q/k norms applied per original head)."""
        B, N, D = x.shape
        if isinstance(self.q_norm, nn.Identity):
            return self.qkv(x).unflatten(-1, (3, D)).unbind(-2)  # no copies
        return tuple(t.transpose(1, 2).reshape(B, N, D) for t in self._heads(x))  # type: ignore[return-value]

    def _mix_out(self, glob: torch.Tensor, x: torch.Tensor, v: torch.Tensor,
                 layout: Optional[TokenLayout]) -> torch.Tensor:
        if self.local is not None:
            glob = glob + self.local(x if self.local.spec.source == "x" else v, layout)
        return self._out(glob)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", local={self.local_name}" if self.local is not None else "")


class HydraAttention(GlobalLinearAttention):
    """Hydra attention (H = D heads, cosine kernel) on timm Attention's parameters.

    ``num_heads`` is kept only so the module can be swapped back to MSA; q/k norms, when the
    checkpoint has them, are applied per original head before the Hydra op.
    """

    kind = "hydra"

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        q, k, v = self._qkv_flat(x)
        mask = layout.key_padding_mask if layout is not None else None
        return self._mix_out(hydra_attention(q, k, v, key_padding_mask=mask), x, v, layout)


class LinearAttention(GlobalLinearAttention):
    """Multi-head linear attention with ``linear_heads`` heads and a decomposable kernel (ablations)."""

    kind = "linear"

    def __init__(self, dim: int, num_heads: int = 8, linear_heads: Optional[int] = None,
                 kernel: KernelName = "cosine", **kwargs) -> None:
        super().__init__(dim, num_heads=num_heads, **kwargs)
        self.linear_heads = linear_heads or num_heads
        if dim % self.linear_heads:
            raise ValueError(f"LinearAttention: dim={dim} not divisible by linear_heads={self.linear_heads}")
        _kernel(kernel)  # validates the name
        self.kernel = kernel

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        B, N, D = x.shape
        q, k, v = self.qkv(x).unflatten(-1, (3, D)).unbind(-2)
        mask = layout.key_padding_mask if layout is not None else None
        return self._mix_out(linear_attention(q, k, v, self.linear_heads, self.kernel, mask), x, v, layout)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", linear_heads={self.linear_heads}, kernel={self.kernel}"


class NoMixAttention(PlannedAttention):
    """No token mixing: ``proj(v)``. The speed floor for any attention (qkv and proj kept)."""

    kind = "none"

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        D = x.shape[-1]
        v = self.qkv(x).unflatten(-1, (3, D))[..., 2, :]
        return self._out(v)


class WindowMSAttention(PlannedAttention):
    """ViTDet-style windowed softmax attention over the patch grid, optional relative position.

    Grid tokens are split into non-overlapping ``window_size`` x ``window_size`` windows (the
    grid is padded to a window multiple; padded tokens are masked out, unlike detectron2 which
    lets zero padding into the softmax). Prefix tokens (cls / registers), if any, attend only
    to themselves in window blocks. Image padding (``key_padding_mask``) is masked per window.
    """

    kind = "window"

    def __init__(self, dim: int, num_heads: int = 8, window_size: int = 14, rel_pos: bool = False,
                 **kwargs) -> None:
        super().__init__(dim, num_heads=num_heads, **kwargs)
        if window_size <= 0:
            raise ValueError(f"WindowMSAttention: window_size must be > 0, got {window_size}")
        self.window_size = window_size
        self.use_rel_pos = rel_pos
        if rel_pos:
            self.rel_pos_h = nn.Parameter(torch.zeros(2 * window_size - 1, self.head_dim))
            self.rel_pos_w = nn.Parameter(torch.zeros(2 * window_size - 1, self.head_dim))

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        if layout is None or len(layout.grid) != 2:
            raise ValueError("WindowMSAttention needs a TokenLayout with a 2-D grid (h, w)")
        B, N, D = x.shape
        P = layout.num_prefix_tokens
        h, w = layout.grid
        if N != P + h * w:
            raise ValueError(f"WindowMSAttention: {N} tokens do not match prefix {P} + grid {h}x{w}")
        ws = self.window_size
        q, k, v = self._heads(x)  # (B, H, N, d)
        Hh, d = self.num_heads, self.head_dim
        out_prefix = v[:, :, :P]  # softmax over a single key (itself) returns its own value

        ph, pw = (-h) % ws, (-w) % ws
        nh, nw = (h + ph) // ws, (w + pw) // ws
        valid = torch.ones(B, h, w, dtype=torch.bool, device=x.device)
        if layout.key_padding_mask is not None:
            valid = ~layout.key_padding_mask[:, P:].reshape(B, h, w)

        def windows(t: torch.Tensor) -> torch.Tensor:  # (B, H, h*w, d) -> (B*nW, H, ws*ws, d)
            t = t.reshape(B, Hh, h, w, d)
            t = F.pad(t, (0, 0, 0, pw, 0, ph))
            t = t.reshape(B, Hh, nh, ws, nw, ws, d).permute(0, 2, 4, 1, 3, 5, 6)
            return t.reshape(B * nh * nw, Hh, ws * ws, d)

        qw, kw, vw = windows(q[:, :, P:]), windows(k[:, :, P:]), windows(v[:, :, P:])
        vm = F.pad(valid, (0, pw, 0, ph), value=False)
        vm = vm.reshape(B, nh, ws, nw, ws).permute(0, 1, 3, 2, 4).reshape(B * nh * nw, 1, 1, ws * ws)
        # a window made only of padding would give NaN rows: let its keys all be "valid"
        vm = vm | ~vm.any(dim=-1, keepdim=True)
        bias = torch.zeros(vm.shape, dtype=qw.dtype, device=x.device).masked_fill(~vm, float("-inf"))
        if self.use_rel_pos:
            # detectron2 adds the decomposed bias, computed from the unscaled q, to q·k*scale
            rel = get_decomposed_rel_pos_bias(qw.reshape(-1, ws * ws, d), self.rel_pos_h, self.rel_pos_w,
                                              (ws, ws), (ws, ws))
            bias = bias + rel.reshape(B * nh * nw, Hh, ws * ws, ws * ws).to(bias.dtype)
        o = F.scaled_dot_product_attention(qw, kw, vw, attn_mask=bias,
                                           dropout_p=self.attn_drop.p if self.training else 0.0)
        o = o.reshape(B, nh, nw, Hh, ws, ws, d).permute(0, 3, 1, 4, 2, 5, 6).reshape(B, Hh, nh * ws, nw * ws, d)
        o = o[:, :, :h, :w].reshape(B, Hh, h * w, d)
        out = torch.cat([out_prefix, o], dim=2).transpose(1, 2).reshape(B, N, D)
        return self._out(out)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", window_size={self.window_size}, rel_pos={self.use_rel_pos}"


_MODULES: dict[str, type[PlannedAttention]] = {
    "msa": MSAttention,
    "hydra": HydraAttention,
    "window": WindowMSAttention,
    "none": NoMixAttention,
    "linear": LinearAttention,
}


def build_attention(kind: str, dim: int, num_heads: int, **kwargs) -> PlannedAttention:
    """Build the attention module for ``kind`` (one of :data:`ATTENTION_KINDS`)."""
    if kind not in _MODULES:
        raise ValueError(f"unknown attention {kind!r}; choose from {list(ATTENTION_KINDS)}")
    own = {"window": ("window_size", "rel_pos"), "linear": ("linear_heads", "kernel", "local", "local_dims"),
           "hydra": ("local", "local_dims")}
    specific = {"window_size", "rel_pos", "linear_heads", "kernel", "local", "local_dims"}
    common = {k: v for k, v in kwargs.items() if k not in specific}
    extra = {k: kwargs[k] for k in own.get(kind, ()) if k in kwargs}
    return _MODULES[kind](dim, num_heads=num_heads, **extra, **common)


# --------------------------------------------------------------------------------------------
# The plan: which attention each block runs
# --------------------------------------------------------------------------------------------
@dataclass
class AttentionPlan:
    """Which attention each transformer block runs. Settable from YAML as a mapping.

    Resolution order (later wins): ``default`` for every block; ``window_size > 0`` turns
    every block into windowed MSA except ``global_blocks``, which run ``global_attention``
    (ViTDet); ``hydra_last`` makes the last L blocks Hydra; ``hydra_blocks`` lists blocks
    made Hydra (the paper's hybrids); ``blocks`` spells out every block explicitly.
    Negative indices count from the end. ``local`` adds a local-mixing branch
    (:mod:`hydra_dense.local_mixing`, e.g. ``dwc3``) to every Hydra / linear block.

    Examples (YAML)::

        plan: {default: hydra}                                   # all Hydra
        plan: {default: hydra, local: dwc3}                      # all Hydra + 3x3 depthwise conv on v
        plan: {default: msa, hydra_last: 2}                      # paper's best hybrid
        plan: {window_size: 14, global_blocks: [2, 5, 8, 11], global_attention: hydra}  # ViTDet
    """

    default: AttentionKind = "msa"
    hydra_last: int = 0
    hydra_blocks: list[int] = field(default_factory=list)
    window_size: int = 0
    global_blocks: list[int] = field(default_factory=list)
    global_attention: Literal["msa", "hydra", "linear", "none"] = "msa"
    rel_pos: bool = False
    blocks: Optional[list[AttentionKind]] = None
    linear_heads: Optional[int] = None
    kernel: KernelName = "cosine"
    local: Optional[str] = None

    @classmethod
    def coerce(cls, plan: Union["AttentionPlan", str, Sequence[str], dict, None]) -> "AttentionPlan":
        """Accept a plan, a kind name (``"hydra"``), a per-block list, or a mapping."""
        if plan is None:
            return cls()
        if isinstance(plan, cls):
            return plan
        if isinstance(plan, str):
            if plan not in ATTENTION_KINDS:
                raise ValueError(f"unknown attention {plan!r}; choose from {list(ATTENTION_KINDS)}")
            return cls(default=plan)  # type: ignore[arg-type]
        if isinstance(plan, dict):
            unknown = set(plan) - set(cls.__dataclass_fields__)
            if unknown:
                raise ValueError(f"unknown attention-plan keys {sorted(unknown)}; valid: {sorted(cls.__dataclass_fields__)}")
            return cls(**plan)
        return cls(blocks=list(plan))

    def resolve(self, depth: int) -> list[str]:
        """Per-block attention kinds for a model of ``depth`` blocks, validated."""

        def idx(i: int, key: str) -> int:
            if not -depth <= i < depth:
                raise ValueError(f"attention plan: {key} index {i} is out of range for a model of depth {depth}")
            return i % depth

        for name in [self.default, self.global_attention] + list(self.blocks or []):
            if name not in ATTENTION_KINDS:
                raise ValueError(f"attention plan: unknown attention {name!r}; choose from {list(ATTENTION_KINDS)}")
        parse_local(self.local)  # validates the name
        if self.default == "window" and self.window_size <= 0:
            raise ValueError("attention plan: default 'window' needs window_size > 0")
        if self.global_blocks and self.window_size <= 0:
            raise ValueError("attention plan: global_blocks only apply with window_size > 0")
        if not 0 <= self.hydra_last <= depth:
            raise ValueError(f"attention plan: hydra_last={self.hydra_last} must be in [0, {depth}]")
        kinds = [self.default] * depth
        if self.window_size > 0:
            glob = {idx(i, "global_blocks") for i in self.global_blocks}
            kinds = [self.global_attention if i in glob else "window" for i in range(depth)]
        for i in range(depth - self.hydra_last, depth):
            kinds[i] = "hydra"
        for i in self.hydra_blocks:
            kinds[idx(i, "hydra_blocks")] = "hydra"
        if self.blocks is not None:
            if len(self.blocks) != depth:
                raise ValueError(f"attention plan: blocks lists {len(self.blocks)} entries for a model of depth {depth}")
            kinds = list(self.blocks)
        if "window" in kinds and self.window_size <= 0:
            raise ValueError("attention plan: 'window' blocks need window_size > 0")
        return kinds

    def attention_kwargs(self) -> dict:
        """Extra constructor arguments passed to every attention module."""
        return dict(window_size=self.window_size, rel_pos=self.rel_pos,
                    linear_heads=self.linear_heads, kernel=self.kernel, local=self.local)

    def local_of(self, kind: str) -> Optional[str]:
        """The local-mixing name a block of ``kind`` gets (only the global linear attentions get one)."""
        return self.local if kind in LOCAL_KINDS and parse_local(self.local) is not None else None

    def block_labels(self, depth: int) -> list[str]:
        """Per-block ``kind`` or ``kind+local`` (e.g. ``hydra+dwc3``)."""
        return [k + (f"+{self.local_of(k)}" if self.local_of(k) else "") for k in self.resolve(depth)]

    def describe(self, depth: int) -> str:
        """Compact text such as ``msa x10, hydra x2`` or ``window x8, hydra@[2,5,8,11]``."""
        kinds = self.block_labels(depth)
        counts: dict[str, list[int]] = {}
        for i, k in enumerate(kinds):
            counts.setdefault(k, []).append(i)
        return ", ".join(f"{k} x{len(v)}" if len(v) > depth // 2 or len(counts) == 1 else f"{k}@{v}"
                         for k, v in counts.items())
