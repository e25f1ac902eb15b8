"""A timm ViT block whose attention comes from the plan and sees the token layout."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from timm.models.vision_transformer import Block

from ..attention import AttentionPlan, BlockAttention, PlannedAttention, TokenLayout, build_attention


class PlannedBlock(Block):
    """timm's pre-norm ViT block (same parameter names), attention chosen by the plan.

    ``forward(x, layout)``: ``x`` is ``(B, N, D)``; ``layout`` tells the attention the patch grid,
    the number of prefix tokens and which tokens are padding.
    """

    attn: PlannedAttention

    def forward(self, x: torch.Tensor, layout: Optional[TokenLayout] = None) -> torch.Tensor:  # type: ignore[override]
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), layout)))
        x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
        return x


def swap_attention(old: PlannedAttention | torch.nn.Module, kind: str, **kwargs) -> PlannedAttention:
    """A new attention module of ``kind`` holding ``old``'s weights (qkv, proj, q/k norms).

    Extra parameters of the new kind (e.g. relative position tables) keep their fresh init;
    parameters only ``old`` has are dropped.
    """
    dim, heads = old.qkv.in_features, old.num_heads
    ctor = dict(getattr(old, "_init_args", {}))
    ctor.update(
        qkv_bias=old.qkv.bias is not None,
        qk_norm=not isinstance(old.q_norm, torch.nn.Identity),
        proj_bias=old.proj.bias is not None,
        attn_drop=old.attn_drop.p,
        proj_drop=old.proj_drop.p,
    )
    ctor.pop("dim", None), ctor.pop("num_heads", None)
    if ctor["qk_norm"] and ctor.get("norm_layer") is None:
        ctor["norm_layer"] = type(old.q_norm)
    new = build_attention(kind, dim, heads, **ctor, **kwargs)
    own = new.state_dict()
    new.load_state_dict({k: v for k, v in old.state_dict().items() if k in own and own[k].shape == v.shape},
                        strict=False)
    return new.to(device=old.qkv.weight.device, dtype=old.qkv.weight.dtype)


def planned_attention(old: PlannedAttention | torch.nn.Module, block: BlockAttention, grid_dims: int,
                      shifted: bool) -> PlannedAttention:
    """The attention ``block`` asks for in a block that holds ``old``: ``old`` itself when it already
    is that kind built with the same arguments, otherwise a new module holding ``old``'s weights."""
    arguments = block.arguments(grid_dims, shifted)
    if getattr(old, "kind", None) == block.kind and getattr(old, "plan_arguments", None) == arguments:
        return old  # type: ignore[return-value]
    return swap_attention(old, block.kind, **arguments)


def apply_plan(plan: AttentionPlan, attention_slots: Sequence[Sequence[tuple[torch.nn.Module, str, int]]]) -> list[str]:
    """Give every block the attention ``plan`` assigns it; returns the per-block kinds.

    ``attention_slots``: per block, each attention it holds as ``(owner, attribute, grid_dims)``
    (a ViT block: its ``attn`` on the 2-D grid; a divided space-time block: spatial on 2-D and
    temporal on 1-D; a joint video block: 3-D). Odd blocks get the shifted windows of a shifted plan.
    """
    blocks = plan.per_block(len(attention_slots))
    for i, (slots, block) in enumerate(zip(attention_slots, blocks)):
        for owner, attribute, grid_dims in slots:
            setattr(owner, attribute, planned_attention(getattr(owner, attribute), block, grid_dims, i % 2 == 1))
    return [block.kind for block in blocks]
