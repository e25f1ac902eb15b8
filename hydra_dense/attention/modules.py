"""Attention modules on timm's Attention parameters: softmax MSA, Hydra, windowed MSA, linear, no-mix.

Every module subclasses timm's :class:`~timm.layers.Attention`, so all of them own the same
parameters (``qkv``, ``proj`` and, if enabled, ``q_norm`` / ``k_norm``) and one state dict
initialises any of them: an MSA-pretrained ViT initialises a Hydra or hybrid one. ``forward(x,
layout)`` takes ``(B, N, D)`` tokens and the :class:`TokenLayout` (grid, prefix tokens, padding).
"""
from __future__ import annotations

from typing import Literal, Optional, get_args

import torch
import torch.nn.functional as F
from torch import nn
from timm.layers import Attention as TimmAttention
from timm.models.vision_transformer_sam import get_decomposed_rel_pos_bias

from .layout import TokenLayout
from .local_mixing import LocalMixing, parse_local
from .local_window import WindowSoftmaxBranch
from .windows import keep_one_key, partition, unpartition, window_grid, window_key_mask
from .ops import (FeatureMapName, aft_simple, feature_map_by_name, hydra_attention, linear_attention,
                  norm_aware_hydra, poly_nl)

__all__ = ["TokenLayout", "PlannedAttention", "MSAttention", "GlobalLinearAttention", "HydraAttention",
           "NormAwareHydraAttention", "LinearAttention", "NoMixAttention", "LocalOnlyAttention", "WindowMSAttention", "AFTSimpleAttention", "PolyNLAttention",
           "build_attention", "AttentionKind", "ATTENTION_KINDS", "ATTENTION_CLASSES", "LOCAL_PLACEMENT"]

AttentionKind = Literal["msa", "hydra", "hydra_norm", "window", "none", "local", "linear", "aft", "polynl"]
ATTENTION_KINDS: tuple[str, ...] = get_args(AttentionKind)


# ``global_gain``'s multiplier of its log-gain parameter: at a conversion's lr (5e-4) it moves the log
# gain by ~0.016 a step, so a gain of D = 384 (log 6) is in reach within 400 steps
GAIN_RATE = 32.0


class PlannedAttention(TimmAttention):
    """Base of every attention variant: timm's Attention parameters, a common ``forward``.

    ``forward(x, layout)`` takes ``x`` of shape ``(B, N, D)`` and an optional
    :class:`TokenLayout`, and returns ``(B, N, D)``.
    """

    kind: str = "base"
    # the AttentionPlan fields this kind takes (a plan's BlockAttention of this kind holds exactly these)
    plan_options: tuple[str, ...] = ()

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = True, qk_norm: bool = False,
                 proj_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0,
                 norm_layer: Optional[type[nn.Module]] = None, **timm_arguments) -> None:
        # timm's Block builds its attention with more arguments (scale_norm, device, dtype): they go to
        # timm's Attention, which refuses any it does not know
        if qk_norm and norm_layer is None:
            norm_layer = nn.LayerNorm
        super().__init__(dim, num_heads=num_heads, qkv_bias=qkv_bias, qk_norm=qk_norm, proj_bias=proj_bias,
                         attn_drop=attn_drop, proj_drop=proj_drop, norm_layer=norm_layer, **timm_arguments)
        self.plan_arguments: dict = {}  # what build_attention passed from the plan (set there)
        self._init_args = dict(dim=dim, num_heads=num_heads, qkv_bias=qkv_bias, qk_norm=qk_norm, proj_bias=proj_bias,
                               attn_drop=attn_drop, proj_drop=proj_drop, norm_layer=norm_layer,
                               **{k: v for k, v in timm_arguments.items() if k not in ("device", "dtype")})

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

    def _project(self, x: torch.Tensor) -> torch.Tensor:
        """Heads merged ``(B, N, D)`` -> the block's output projection."""
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
        return self._project(out.transpose(1, 2).reshape(B, N, D))


class GlobalLinearAttention(PlannedAttention):
    """Base of the global linear attentions (Hydra, multi-head linear): an optional local branch.

    ``local`` names a :mod:`~hydra_dense.attention.local_mixing` variant (``"dwc3"``, ``"win4"``, ``"win4+dwc7"``
    ...) over the token grid (``grid_dims`` = 2 for images, 3 for video, 1 for a temporal axis),
    added to the global output before ``proj``: a zero-initialised depthwise convolution (parameters
    ``local.conv.*``) and / or gated window softmax with the block's own heads (``local_window.gate``,
    :mod:`~hydra_dense.attention.local_window`; ``local_shifted``: this block's windows are the shifted ones of a
    ``win<W>_shift`` plan). ``token_mean``: the global term divided by the number of valid tokens,
    i.e. ``kv`` averaged over tokens instead of summed, so that its scale does not grow with the
    token count (Hydra and linear attention; the plan passes it to those kinds only). ``global_gain``:
    a learned per-channel gain on the global term alone, ``exp(GAIN_RATE * global_log_gain)`` (zeros at first, so
    the block starts at the plain op's scale): the one knob that scales the global term without the
    local branch, since qkv and proj are shared and the cosine kernel removes q's and k's norms.
    """

    plan_options = ("local", "token_mean", "global_gain")
    has_feature_map = True  # the global op has a feature map phi: a ``source="kv"`` branch is defined

    def __init__(self, dim: int, num_heads: int = 8, local: Optional[str] = None, grid_dims: int = 2,
                 local_shifted: bool = False, token_mean: bool = False, global_gain: bool = False, **kwargs) -> None:
        super().__init__(dim, num_heads=num_heads, **kwargs)
        self.token_mean = token_mean
        # log-space, and GAIN_RATE times the parameter: Adam moves every parameter by about the lr per
        # step, and the gain must reach ~D (the cosine terms are ~1/sqrt(D) each) within a conversion
        self.global_log_gain = nn.Parameter(torch.zeros(dim)) if global_gain else None
        spec = parse_local(local)
        if spec is not None and spec.conv_size and spec.source == "kv" and not self.has_feature_map:
            raise ValueError(f"{type(self).__name__}: local mixing {local!r} restricts Hydra's kernel to a "
                             f"neighbourhood; {self.kind!r} blocks take a branch on v or x (dwc3, dwc5_x, ...)")
        self.local_spec = spec
        self.local = LocalMixing(dim, spec, grid_dims) if spec is not None and spec.conv_size else None
        shift = spec.window // 2 if spec is not None and spec.shifted and local_shifted else 0
        self.local_window = (WindowSoftmaxBranch(dim, num_heads, spec.window, grid_dims, shift)
                             if spec is not None and spec.window else None)

    @property
    def local_name(self) -> Optional[str]:
        return self.local_spec.name if self.local_spec is not None else None

    def _qkv_flat(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(B, N, D)`` -> q, k, v each ``(B, N, D)`` (q/k norms applied per original head)."""
        B, N, D = x.shape
        if isinstance(self.q_norm, nn.Identity):
            return self.qkv(x).unflatten(-1, (3, D)).unbind(-2)  # no copies
        return tuple(t.transpose(1, 2).reshape(B, N, D) for t in self._heads(x))  # type: ignore[return-value]

    def _phi(self, t: torch.Tensor) -> torch.Tensor:
        """The feature map of the global op (Hydra: the cosine kernel), in fp32."""
        return feature_map_by_name("cosine")(t)

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        """The global token mixing on ``(B, N, D)`` q, k, v (padded keys masked): the subclass's op."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        q, k, v = self._qkv_flat(x)
        mask = layout.key_padding_mask if layout is not None else None
        return self._add_local_and_project(self._global(q, k, v, mask), x, q, k, v, layout)

    def _add_local_and_project(self, global_out: torch.Tensor, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 layout: Optional[TokenLayout]) -> torch.Tensor:
        if self.token_mean:
            mask = layout.key_padding_mask if layout is not None else None
            # a (B, 1, 1) count per image: scaling the output equals scaling kv, and leaves the op's kernels alone
            count = (~mask).sum(-1)[:, None, None] if mask is not None else global_out.new_full((1, 1, 1), global_out.shape[-2])
            global_out = global_out / count.clamp_min(1).to(global_out.dtype)
        if self.global_log_gain is not None:
            global_out = global_out * (GAIN_RATE * self.global_log_gain).exp().to(global_out.dtype)
        if self.local_window is not None:
            global_out = global_out + self.local_window(q, k, v, layout).to(global_out.dtype)
        if self.local is not None:
            source = self.local.spec.source
            if source == "kv":  # local Hydra: D * phi(q) * dwc(phi(k) * v)
                # phi(q)_d * phi(k)_d is ~1/D per channel: the factor D gives the branch unit scale,
                # so its conv weights learn at the pace of the other variants'
                local = q.shape[-1] * self._phi(q) * self.local((self._phi(k) * v.float()).to(v.dtype), layout).float()
                global_out = global_out + local.to(global_out.dtype)
            else:
                global_out = global_out + self.local(x if source == "x" else v, layout)
        return self._project(global_out)

    def extra_repr(self) -> str:
        mean = ", token_mean=True" if self.token_mean else ""
        mean += ", global_gain=True" if self.global_log_gain is not None else ""
        return super().extra_repr() + mean + (f", local={self.local_name}" if self.local_spec is not None else "")


class HydraAttention(GlobalLinearAttention):
    """Hydra attention (H = D heads, cosine kernel) on timm Attention's parameters.

    ``num_heads`` is kept only so the module can be swapped back to MSA; q/k norms, when the
    checkpoint has them, are applied per original head before the Hydra op.
    """

    kind = "hydra"

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return hydra_attention(q, k, v, key_padding_mask=mask)


class NormAwareHydraAttention(GlobalLinearAttention):
    """Hydra's H = D one-feature heads with weights that sum to one and keep the query's norm
    (:func:`~hydra_dense.attention.ops.norm_aware_hydra`): ``mean_s(v) + scale * q * cov_s(k, v)``.

    With the cosine kernel and ``token_mean``, Hydra's global term is ``phi(q) * mean(phi(k) * v)``,
    of order ``|v| / D``: next to a local branch on ``v`` it carries almost nothing. Here the token
    weights sum to one, so the term is of order ``|v|`` from the start, and ``scale`` (the softmax
    teacher's ``head_dim^-0.5``) with the raw q, k makes it the first-order expansion of each
    channel's softmax, which an MSA checkpoint's q, k initialise. No new parameters: any ViT state
    dict loads. Takes a local branch on v or x.
    """

    kind = "hydra_norm"
    plan_options = ("local",)
    has_feature_map = False

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return norm_aware_hydra(q * self.scale, k, v, key_padding_mask=mask)


class LinearAttention(GlobalLinearAttention):
    """Multi-head linear attention with ``linear_heads`` heads and a decomposable kernel (ablations)."""

    kind = "linear"
    plan_options = ("local", "token_mean", "global_gain", "linear_heads", "feature_map")

    def __init__(self, dim: int, num_heads: int = 8, linear_heads: Optional[int] = None,
                 feature_map: FeatureMapName = "cosine", **kwargs) -> None:
        super().__init__(dim, num_heads=num_heads, **kwargs)
        self.linear_heads = linear_heads or num_heads
        if dim % self.linear_heads:
            raise ValueError(f"LinearAttention: dim={dim} not divisible by linear_heads={self.linear_heads}")
        feature_map_by_name(feature_map)  # validates the name
        self.feature_map = feature_map

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        B, N, D = x.shape
        q, k, v = self.qkv(x).unflatten(-1, (3, D)).unbind(-2)
        mask = layout.key_padding_mask if layout is not None else None
        out = linear_attention(q, k, v, self.linear_heads, self.feature_map, mask)
        return self._add_local_and_project(out, x, q, k, v, layout)

    def _phi(self, t: torch.Tensor) -> torch.Tensor:
        return feature_map_by_name(self.feature_map)(t)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", linear_heads={self.linear_heads}, feature_map={self.feature_map}"


class _ChannelGlobalAttention(GlobalLinearAttention):
    """A token-linear baseline whose global term is one function of ``q, k, v`` (``op``), per channel,
    with no feature map; takes a local branch on v or x."""

    plan_options = ("local",)
    has_feature_map = False
    op: staticmethod

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return type(self).op(q, k, v, key_padding_mask=mask)


class AFTSimpleAttention(_ChannelGlobalAttention):
    """AFT-Simple (:func:`~hydra_dense.attention.ops.aft_simple`) on timm Attention's q, k, v, proj:
    ``sigmoid(q) * sum_t softmax_t(k) * v``, per channel."""

    kind = "aft"
    op = staticmethod(aft_simple)


class PolyNLAttention(_ChannelGlobalAttention):
    """Poly-NL's third-order polynomial (:func:`~hydra_dense.attention.ops.poly_nl`) on timm
    Attention's parameters: ``q * mean_t(k * v)``."""

    kind = "polynl"
    op = staticmethod(poly_nl)


class LocalOnlyAttention(GlobalLinearAttention):
    """The local branch alone: ``proj(local(v))``, Hydra's block with its global term removed. The
    control that says what a Hydra recipe's global term adds (plan names ``local+dwc7``, ...)."""

    kind = "local"
    plan_options = ("local",)

    def __init__(self, dim: int, num_heads: int = 8, local: Optional[str] = None, **kwargs) -> None:
        if parse_local(local) is None:
            raise ValueError("attention 'local' is a local branch alone: give it one (plan: {default: local, "
                             "local: dwc7}, or the plan name local+dwc7)")
        super().__init__(dim, num_heads=num_heads, local=local, **kwargs)

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        return torch.zeros_like(v)


class NoMixAttention(PlannedAttention):
    """No token mixing: ``proj(v)``. The speed floor for any attention (qkv and proj kept)."""

    kind = "none"

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:
        self._check(x, layout)
        D = x.shape[-1]
        v = self.qkv(x).unflatten(-1, (3, D))[..., 2, :]
        return self._project(v)


class WindowMSAttention(PlannedAttention):
    """ViTDet-style windowed softmax attention over the patch grid, optional relative position.

    Grid tokens are split into non-overlapping ``window_size`` x ``window_size`` windows (the
    grid is padded to a window multiple; padded tokens are masked out, unlike detectron2 which
    lets zero padding into the softmax). Prefix tokens (cls / registers), if any, attend only
    to themselves in window blocks. Image padding (``key_padding_mask``) is masked per window.
    """

    kind = "window"
    plan_options = ("window_size", "rel_pos")

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
        out_prefix = v[:, :, :P]  # softmax over a single key (itself) returns its own value
        cut = window_grid(B, (h, w), ws)
        qw, kw, vw = (partition(t[:, :, P:], cut) for t in (q, k, v))  # (B * windows, H, ws * ws, d)
        pad = layout.key_padding_mask
        keys = window_key_mask(cut, None if pad is None else pad[:, P:], x.device)
        bias = None
        if keys is not None:
            bias = torch.zeros(keys.shape, dtype=qw.dtype, device=x.device).masked_fill(~keep_one_key(keys),
                                                                                        float("-inf"))
        if self.use_rel_pos:
            # detectron2 adds the decomposed bias, computed from the unscaled q, to q·k*scale
            rel = get_decomposed_rel_pos_bias(qw.reshape(-1, ws * ws, self.head_dim), self.rel_pos_h,
                                              self.rel_pos_w, (ws, ws), (ws, ws))
            rel = rel.reshape(B * cut.per_sample, self.num_heads, ws * ws, ws * ws).to(qw.dtype)
            bias = rel if bias is None else bias + rel
        o = F.scaled_dot_product_attention(qw, kw, vw, attn_mask=bias,
                                           dropout_p=self.attn_drop.p if self.training else 0.0)
        out = torch.cat([out_prefix, unpartition(o, cut)], dim=2).transpose(1, 2).reshape(B, N, D)
        return self._project(out)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", window_size={self.window_size}, rel_pos={self.use_rel_pos}"


# every attention kind and its class: what each kind takes is its class's ``plan_options``
ATTENTION_CLASSES: dict[str, type[PlannedAttention]] = {
    "msa": MSAttention,
    "hydra": HydraAttention,
    "hydra_norm": NormAwareHydraAttention,
    "window": WindowMSAttention,
    "none": NoMixAttention,
    "local": LocalOnlyAttention,
    "linear": LinearAttention,
    "aft": AFTSimpleAttention,
    "polynl": PolyNLAttention,
}
# where a block's local branch runs, given by the backbone to kinds that take ``local``
LOCAL_PLACEMENT = ("grid_dims", "local_shifted")


def build_attention(kind: str, dim: int, num_heads: int, **kwargs) -> PlannedAttention:
    """Build the attention module for ``kind`` (one of :data:`ATTENTION_KINDS`).

    ``kwargs``: timm Attention's arguments (``qkv_bias``, ``qk_norm``, ...) and the kind's own
    ``plan_options`` (plus :data:`LOCAL_PLACEMENT` for kinds that take ``local``); an argument the
    kind does not take is an error. The plan's arguments are kept as ``plan_arguments``.
    """
    if kind not in ATTENTION_CLASSES:
        raise ValueError(f"unknown attention {kind!r}; choose from {list(ATTENTION_KINDS)}")
    cls = ATTENTION_CLASSES[kind]
    own = set(cls.plan_options) | (set(LOCAL_PLACEMENT) if "local" in cls.plan_options else set())
    every_option = {o for c in ATTENTION_CLASSES.values() for o in c.plan_options} | set(LOCAL_PLACEMENT)
    foreign = sorted(set(kwargs) & every_option - own)
    if foreign:
        raise ValueError(f"attention {kind!r} does not take {', '.join(foreign)}; it takes "
                         f"{', '.join(sorted(own)) or 'no plan options'}")
    module = cls(dim, num_heads=num_heads, **kwargs)
    module.plan_arguments = {k: v for k, v in kwargs.items() if k in own}
    return module
