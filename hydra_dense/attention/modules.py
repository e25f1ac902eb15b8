"""Every attention kind a plan can name, its module class, and the one function that builds it.

The modules themselves live one per file in :mod:`~hydra_dense.attention.mixers`. Every one subclasses
timm's :class:`~timm.layers.Attention`, so all of them own the same parameters (``qkv``, ``proj`` and,
if enabled, ``q_norm`` / ``k_norm``) and one state dict initialises any of them: an MSA-pretrained ViT
initialises a Hydra or hybrid one. ``forward(x, layout)`` takes ``(B, N, D)`` tokens and the
:class:`TokenLayout` (grid, prefix tokens, padding).
"""
from __future__ import annotations

from typing import Literal, get_args

from .layout import TokenLayout
from .mixers import (GAIN_RATE, AFTSimpleAttention, GlobalLinearAttention, HydraAttention, LinearAttention,
                     LocalOnlyAttention, MSAttention, NoMixAttention, NormAwareHydraAttention, PlannedAttention,
                     PolyNLAttention, WindowMSAttention)

__all__ = ["TokenLayout", "PlannedAttention", "MSAttention", "GlobalLinearAttention", "HydraAttention",
           "NormAwareHydraAttention", "LinearAttention", "NoMixAttention", "LocalOnlyAttention", "WindowMSAttention",
           "AFTSimpleAttention", "PolyNLAttention", "GAIN_RATE", "build_attention", "AttentionKind", "ATTENTION_KINDS",
           "ATTENTION_CLASSES", "LOCAL_PLACEMENT"]

AttentionKind = Literal["msa", "hydra", "hydra_norm", "window", "none", "local", "linear", "aft", "polynl"]
ATTENTION_KINDS: tuple[str, ...] = get_args(AttentionKind)


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
