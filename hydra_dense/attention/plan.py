"""The attention plan: which attention (and local mixing) each transformer block runs.

A plan is written in YAML as a few fields (``default``, ``hydra_last``, ``window_size`` ...) and is
resolved, for a model's depth, into one :class:`BlockAttention` per block: its kind and the
options that kind takes. A backbone resolves its plan once, when it is built (or given a new plan),
and keeps that list (``backbone.block_attention``); everything downstream (the modules, labels,
conversion, the checkpoint identity) reads it. A plan is frozen: a changed plan is a new one
(``dataclasses.replace``). The tools' plan names (``hybrid4+dwc7``, ``vitdet_hydra``) are a grammar
over the fields: :mod:`~hydra_dense.attention.plan_grammar`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Sequence, Union

from .local_mixing import LOCAL_NAMES, parse_local
from .modules import ATTENTION_CLASSES, ATTENTION_KINDS, AttentionKind
from .ops import FeatureMapName

__all__ = ["AttentionPlan", "BlockAttention", "describe_labels", "LOCAL_KINDS", "MEAN_KINDS", "GAIN_KINDS", "LOCAL_NAMES"]

# read from the attention classes' plan_options: the kinds a plan's ``local`` branch applies to, the
# kinds whose kv is a sum over tokens (``token_mean`` averages it), the kinds with a global-term gain
LOCAL_KINDS = tuple(k for k, cls in ATTENTION_CLASSES.items() if "local" in cls.plan_options)
MEAN_KINDS = tuple(k for k, cls in ATTENTION_CLASSES.items() if "token_mean" in cls.plan_options)
GAIN_KINDS = tuple(k for k, cls in ATTENTION_CLASSES.items() if "global_gain" in cls.plan_options)


@dataclass(frozen=True)
class BlockAttention:
    """What one block runs: its attention ``kind`` and the plan options that kind takes (its
    class's ``plan_options``, e.g. ``local``, ``token_mean`` for Hydra; ``window_size`` for windows)."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, plan: "AttentionPlan", kind: str) -> "BlockAttention":
        """A block of ``kind`` under ``plan``: the plan's values of the options ``kind`` takes."""
        return cls(kind, {name: getattr(plan, name) for name in ATTENTION_CLASSES[kind].plan_options})

    @property
    def local(self) -> Optional[str]:
        """The local-mixing name of the block (None: no local branch)."""
        local = self.options.get("local")
        return local if parse_local(local) is not None else None

    @property
    def label(self) -> str:
        """``kind`` with its options as the plan names write them: ``hydra``, ``hydra+dwc3``,
        ``hydra+mean+gain+dwc7``."""
        flags = "+mean" * bool(self.options.get("token_mean")) + "+gain" * bool(self.options.get("global_gain"))
        return self.kind + flags + (f"+{self.local}" if self.local else "")

    def arguments(self, grid_dims: int = 2, shifted: bool = False) -> dict:
        """The module's constructor arguments: the options and, for a kind with a local branch, where
        it runs (a ``grid_dims``-D token grid; the shifted windows of a ``win<W>_shift`` plan)."""
        if "local" not in self.options:
            return dict(self.options)
        return dict(self.options, grid_dims=grid_dims, local_shifted=shifted)


def describe_labels(labels: Sequence[str]) -> str:
    """Per-block labels as compact text: ``msa x10, hydra@[10, 11]`` (a kind in more than half the
    blocks, or the only one, as a count; the others with their block indices)."""
    depth = len(labels)
    counts: dict[str, list[int]] = {}
    for i, k in enumerate(labels):
        counts.setdefault(k, []).append(i)
    return ", ".join(f"{k} x{len(v)}" if len(v) > depth // 2 or len(counts) == 1 else f"{k}@{v}"
                     for k, v in counts.items())


@dataclass(frozen=True)
class AttentionPlan:
    """Which attention each transformer block runs. Settable from YAML as a mapping.

    Resolution order (later wins): ``default`` for every block; ``window_size > 0`` turns
    every block into windowed MSA except ``global_blocks``, which run ``global_attention``
    (ViTDet); ``hydra_last`` makes the last L blocks Hydra; ``hydra_blocks`` lists blocks
    made Hydra (the paper's hybrids); ``blocks`` spells out every block explicitly.
    Negative indices count from the end. ``local`` adds a local-mixing branch
    (:mod:`hydra_dense.attention.local_mixing`, e.g. ``dwc3``) to every Hydra / linear block.
    ``token_mean`` makes Hydra / linear blocks average ``kv`` over the (valid) tokens instead of
    summing it, so their output scale does not grow with the token count: a model converted or
    fine-tuned at one resolution then keeps its scale at another.

    Examples (YAML)::

        plan: {default: hydra}                                   # all Hydra
        plan: {default: hydra, local: dwc3}                      # all Hydra + 3x3 depthwise conv on v
        plan: {default: hydra, local: dwc7, token_mean: true}    # kv averaged over tokens, not summed
        plan: {default: msa, hydra_last: 2}                      # paper's best hybrid
        plan: {window_size: 14, global_blocks: [2, 5, 8, 11], global_attention: hydra}  # ViTDet
    """

    default: AttentionKind = "msa"
    hydra_last: int = 0
    hydra_blocks: list[int] = field(default_factory=list)
    window_size: int = 0
    global_blocks: list[int] = field(default_factory=list)
    global_attention: Literal["msa", "hydra", "hydra_norm", "linear", "aft", "polynl", "none"] = "msa"
    rel_pos: bool = False
    blocks: Optional[list[AttentionKind]] = None
    linear_heads: Optional[int] = None
    feature_map: FeatureMapName = "cosine"
    local: Optional[str] = None
    token_mean: bool = False
    global_gain: bool = False

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

    def per_block(self, depth: int) -> list[BlockAttention]:
        """The plan resolved for a model of ``depth`` blocks: what each block runs."""
        return [BlockAttention.of(self, kind) for kind in self.resolve(depth)]

    def block_labels(self, depth: int) -> list[str]:
        """Per-block labels: ``kind``, ``kind+local`` (e.g. ``hydra+dwc3``), ``kind+mean+local`` with
        ``token_mean`` (``+gain`` with ``global_gain``)."""
        return [block.label for block in self.per_block(depth)]

    def describe(self, depth: int) -> str:
        """Compact text such as ``msa x10, hydra x2`` or ``window x8, hydra@[2,5,8,11]``."""
        return describe_labels(self.block_labels(depth))
