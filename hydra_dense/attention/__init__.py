"""Hydra attention, softmax multi-head attention and the per-block attention plan.

``ops`` holds the functional ops, ``mixers`` the attention modules (one per file), ``modules`` the
kinds and their builder, ``plan`` the plan,
``layout`` the token layout they all read, ``local_mixing`` / ``local_window`` the local branches,
``windows`` the window partition, ``maps`` per-block attention maps for inspection.

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
from .modules import (ATTENTION_CLASSES, ATTENTION_KINDS, AttentionKind, GlobalLinearAttention, HydraAttention, LinearAttention,
                      MSAttention, NoMixAttention, PlannedAttention, WindowMSAttention, build_attention)
from .layout import TokenLayout
from .ops import FUSED_MIN_NUMEL, HYDRA_EPS, FeatureMapName, hydra_attention, hydra_attention_eager, linear_attention
from .plan import LOCAL_KINDS, LOCAL_NAMES, AttentionPlan, BlockAttention
from .plan_grammar import PLAN_NAMES, plan_from_name, plan_names

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
    "BlockAttention",
    "plan_from_name",
    "plan_names",
    "build_attention",
    "ATTENTION_KINDS",
    "LOCAL_KINDS",
    "PLAN_NAMES",
    "LOCAL_NAMES",
    "FeatureMapName",
    "ATTENTION_CLASSES",
    "HYDRA_EPS",
    "FUSED_MIN_NUMEL",
]
