"""A timm ViT block whose attention comes from the plan and sees the token layout.

A backbone resolves its plan once into one :class:`~hydra_dense.attention.BlockAttention` per block
(:class:`PlannedBackbone`), builds each block's attention from that list through timm's
``block_fn`` / ``attn_layer`` seam (:func:`planned_block_builder`), and keeps the list for everything
that reports or checks the plan. A new plan later (conversion, a comparison's recipe) swaps the
modules whose kind changes, keeping their weights (:func:`apply_plan`).
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Optional, Sequence

import torch
from timm.models.vision_transformer import Block

from ..attention import AttentionPlan, BlockAttention, PlannedAttention, TokenLayout, build_attention
from ..attention.plan import describe_labels


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


def apply_plan(blocks: Sequence[BlockAttention],
               attention_slots: Sequence[Sequence[tuple[torch.nn.Module, str, int]]]) -> None:
    """Give every block the attention its entry of ``blocks`` (a resolved plan) asks for.

    ``attention_slots``: per block, each attention it holds as ``(owner, attribute, grid_dims)``
    (a ViT block: its ``attn`` on the 2-D grid; a divided space-time block: spatial on 2-D and
    temporal on 1-D; a joint video block: 3-D). Odd blocks get the shifted windows of a shifted plan.
    """
    for i, (slots, block) in enumerate(zip(attention_slots, blocks, strict=True)):
        for owner, attribute, grid_dims in slots:
            setattr(owner, attribute, planned_attention(getattr(owner, attribute), block, grid_dims, i % 2 == 1))


def attention_layer(block: BlockAttention, grid_dims: int, index: int) -> type:
    """timm's ``attn_layer`` for block ``index``: calling it builds the attention ``block`` asks for,
    on a ``grid_dims``-D token grid (odd blocks take the shifted windows of a shifted plan), with
    timm's arguments. timm asks ``issubclass`` of its ``attn_layer``, so this is a class; what it
    builds is an instance of the kind's own class (``build_attention``), nothing else."""
    build = partial(build_attention, block.kind, **block.arguments(grid_dims, index % 2 == 1))

    def __new__(cls, dim: int, **timm_arguments) -> PlannedAttention:  # noqa: N807
        return build(dim, **timm_arguments)

    return type(f"Planned{block.kind.title()}Layer", (), {"__new__": __new__})


def planned_block_builder(blocks: Sequence[BlockAttention], grid_dims: int = 2) -> Callable[..., PlannedBlock]:
    """timm's ``block_fn`` for a resolved plan: its i-th call builds block i, whose attention is
    built once, directly as ``blocks[i]`` asks (timm's ``attn_layer`` argument is replaced)."""
    pending = iter(enumerate(blocks))

    def build_block(**timm_arguments) -> PlannedBlock:
        index, block = next(pending)
        timm_arguments["attn_layer"] = attention_layer(block, grid_dims, index)
        return PlannedBlock(**timm_arguments)

    return build_block


class PlannedBackbone:
    """What a backbone's plan resolved to, kept from the moment it was resolved: ``plan`` and one
    :class:`~hydra_dense.attention.BlockAttention` per block (``block_attention``). Labels, the
    checkpoint identity, conversion and reports read these; none resolves the plan again."""

    plan: AttentionPlan
    block_attention: list[BlockAttention]

    @property
    def attention_kinds(self) -> list[str]:
        """Per-block attention kinds: ``["msa", ..., "hydra"]``."""
        return [block.kind for block in self.block_attention]

    @property
    def block_labels(self) -> list[str]:
        """Per-block labels with their options: ``["msa", ..., "hydra+mean+dwc7"]``."""
        return [block.label for block in self.block_attention]

    def describe_plan(self) -> str:
        """Compact text such as ``msa x10, hydra@[10, 11]``."""
        return describe_labels(self.block_labels)
