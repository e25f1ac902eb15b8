"""The base of every token mixer: timm's Attention parameters (``qkv``, ``proj``, q/k norms), so one
state dict initialises any of them, and one ``forward(x, layout)`` signature."""
from __future__ import annotations

from typing import Optional

import torch
from timm.layers import Attention as TimmAttention
from torch import nn

from ..layout import TokenLayout

__all__ = ["PlannedAttention"]


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
