"""The shared body of the token-linear global mixers: the global term, its mean and gain, and the
optional local branch added before ``proj``."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..layout import TokenLayout
from ..local_mixing import LocalMixing, parse_local
from ..local_window import WindowSoftmaxBranch
from ..ops import feature_map_by_name
from .planned import PlannedAttention

__all__ = ["GlobalLinearAttention", "GAIN_RATE"]

# ``global_gain``'s multiplier of its log-gain parameter: at a conversion's lr (5e-4) it moves the log
# gain by ~0.016 a step, so a gain of D = 384 (log 6) is in reach within 400 steps
GAIN_RATE = 32.0


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
