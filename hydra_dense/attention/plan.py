"""The attention plan: which attention (and local mixing) each transformer block runs."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence, Union

from .local_mixing import LOCAL_NAMES, parse_local
from .modules import ATTENTION_CLASSES, ATTENTION_KINDS, LOCAL_PLACEMENT, AttentionKind
from .ops import FeatureMapName

__all__ = ["AttentionPlan", "LOCAL_KINDS", "MEAN_KINDS", "PLAN_NAMES", "LOCAL_NAMES"]

# read from the attention classes' plan_options: the kinds a plan's ``local`` branch applies to, and
# the kinds whose kv is a sum over tokens (``token_mean`` averages it)
LOCAL_KINDS = tuple(k for k, cls in ATTENTION_CLASSES.items() if "local" in cls.plan_options)
MEAN_KINDS = tuple(k for k, cls in ATTENTION_CLASSES.items() if "token_mean" in cls.plan_options)
GAIN_KINDS = tuple(k for k, cls in ATTENTION_CLASSES.items() if "global_gain" in cls.plan_options)
# the plan-name vocabulary of the tools (benchmark, compare, convert), see AttentionPlan.from_name
PLAN_NAMES = ("msa", "hydra", "hydra_norm", "aft", "polynl", "none", "local+<local>", "hybrid<L>", "aft_last<L>",
              "polynl_last<L>", "hydra_at<i>.<j>...", "vitdet_msa", "vitdet_hydra", "vitdet<W>_msa", "vitdet<W>_hydra",
              "linear<H>")
# every plan with Hydra / linear blocks also takes a local-mixing suffix (LOCAL_NAMES): hydra+dwc3, hybrid4+dwc5, ...


@dataclass
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

    def block_arguments(self, kind: str, grid_dims: int = 2, shifted: bool = False) -> dict:
        """The arguments a block of ``kind`` is built with: the plan fields its class takes
        (``plan_options``) and, for kinds with a local branch, where it runs: on a ``grid_dims``-D
        token grid, with the shifted windows of a ``win<W>_shift`` plan when ``shifted``."""
        options = ATTENTION_CLASSES[kind].plan_options
        arguments = {name: getattr(self, name) for name in options}
        if "local" in options:
            arguments.update(zip(LOCAL_PLACEMENT, (grid_dims, shifted)))
        return arguments

    def local_of(self, kind: str) -> Optional[str]:
        """The local-mixing name a block of ``kind`` gets (only the global linear attentions get one)."""
        return self.local if kind in LOCAL_KINDS and parse_local(self.local) is not None else None

    def block_labels(self, depth: int) -> list[str]:
        """Per-block ``kind``, ``kind+local`` (e.g. ``hydra+dwc3``), ``kind+mean+local`` with ``token_mean``
        (``+gain`` with ``global_gain``)."""
        def label(k: str) -> str:
            mean = "+mean" if self.token_mean and k in MEAN_KINDS else ""
            mean += "+gain" if self.global_gain and k in GAIN_KINDS else ""
            return k + mean + (f"+{self.local_of(k)}" if self.local_of(k) else "")

        return [label(k) for k in self.resolve(depth)]

    def describe(self, depth: int) -> str:
        """Compact text such as ``msa x10, hydra x2`` or ``window x8, hydra@[2,5,8,11]``."""
        kinds = self.block_labels(depth)
        counts: dict[str, list[int]] = {}
        for i, k in enumerate(kinds):
            counts.setdefault(k, []).append(i)
        return ", ".join(f"{k} x{len(v)}" if len(v) > depth // 2 or len(counts) == 1 else f"{k}@{v}"
                         for k, v in counts.items())

    # ---- names used by the tools ----------------------------------------------------------------
    @classmethod
    def from_name(cls, name: str, depth: int, window_size: int = 14) -> "AttentionPlan":
        """Plan names of the tools -> plans. ``hybrid<L>``: Hydra in the last L blocks; ``vitdet_*``:
        windowed MSA with global blocks every depth/4 (2, 5, 8, 11 for depth 12) running MSA or Hydra;
        ``linear<H>``: cosine linear attention with H heads; ``hydra_norm``: norm-aware Hydra everywhere; ``aft`` / ``polynl``: the paper's token-linear
        baselines everywhere, ``aft_last<L>`` / ``polynl_last<L>`` in the last L blocks; ``hydra_at0.1.11``: Hydra in blocks 0, 1 and 11
        (MSA elsewhere). A ``+<local>`` suffix (``hydra+dwc3``,
        ``hybrid4+dwc5``) adds local mixing (:mod:`hydra_dense.attention.local_mixing`) to the Hydra / linear blocks;
        ``+mean`` (``hydra+mean``, ``hydra+mean+dwc7``) sets ``token_mean``, ``+gain`` (``hydra+mean+gain+dwc7``)
        ``global_gain``; ``local+dwc7``: the local branch alone in every block (no global term), the
        control of ``hydra+dwc7``; ``vitdet<W>_msa`` / ``vitdet<W>_hydra``: ViTDet with W x W windows."""
        base, _, rest = name.partition("+")
        plan = cls._from_base_name(base, depth, window_size)
        flags = rest.split("+") if rest else []
        while flags and flags[0] in ("mean", "gain"):
            flag = flags.pop(0)
            kinds = MEAN_KINDS if flag == "mean" else GAIN_KINDS
            if not any(k in kinds for k in plan.resolve(depth)):
                raise ValueError(f"plan {name!r}: {base!r} has no Hydra / linear block whose global term "
                                 f"'+{flag}' would change")
            setattr(plan, "token_mean" if flag == "mean" else "global_gain", True)
        local = "+".join(flags)
        if local:
            parse_local(local)
            plan.local = local
            if not any(plan.local_of(k) for k in plan.resolve(depth)):
                raise ValueError(f"plan {name!r}: {base!r} has no Hydra / linear block for local mixing {local!r}")
        elif base == "local":
            raise ValueError(f"plan {name!r}: 'local' is a local branch alone; name it, e.g. local+dwc7")
        return plan

    @staticmethod
    def names(depth: int = 12) -> list[str]:
        """Plan names worth listing for a model of ``depth`` blocks (patterns ``hybrid<L>`` / ``linear<H>``
        accept any L / H)."""
        bases = ["msa", "hydra", "hydra_norm", "aft", "polynl", "none", "hybrid<L>"] + [f"hybrid{n}" for n in (2, 4, 8) if n < depth] + ["hydra_at<i>.<j>..."]
        bases += ["aft_last<L>", "polynl_last<L>", "vitdet_msa", "vitdet_hydra", "vitdet<W>_msa", "vitdet<W>_hydra", "linear<H>"]
        with_local = [b for b in bases if b not in ("msa", "none", "vitdet_msa", "vitdet<W>_msa")]
        # the baselines have no feature map phi, so no kernel-restricted (``_kv``) branch
        fits = lambda b, loc: not (b.startswith(("aft", "polynl", "hydra_norm")) and parse_local(loc).source == "kv")
        named = bases + [f"{b}+{loc}" for b in with_local for loc in LOCAL_NAMES if fits(b, loc)]
        # token-mean variants of the Hydra plans (aft / polynl / hydra_norm average over tokens already)
        mean = [b for b in with_local if not b.startswith(("aft", "polynl", "hydra_norm"))]
        local_only = [f"local+{loc}" for loc in LOCAL_NAMES]
        return (named + local_only + [f"{b}+mean" for b in mean] + [f"{b}+mean+{loc}" for b in mean for loc in LOCAL_NAMES]
                + [f"{b}+mean+gain+{loc}" for b in mean for loc in LOCAL_NAMES])

    @classmethod
    def _from_base_name(cls, name: str, depth: int, window_size: int) -> "AttentionPlan":
        glob = [i * depth // 4 + depth // 4 - 1 for i in range(4)]
        if name in ("msa", "hydra", "hydra_norm", "aft", "polynl", "none", "local"):
            return cls(default=name)  # type: ignore[arg-type]
        if m := re.fullmatch(r"hybrid(\d+)", name):
            return cls(default="msa", hydra_last=int(m.group(1)))
        if m := re.fullmatch(r"(aft|polynl)_last(\d+)", name):
            last = int(m.group(2))
            if not 0 < last <= depth:
                raise ValueError(f"plan {name!r}: the last {last} blocks of a model of depth {depth}?")
            return cls(blocks=["msa"] * (depth - last) + [m.group(1)] * last)  # type: ignore[list-item]
        if m := re.fullmatch(r"hydra_at(\d+(?:\.\d+)*)", name):
            return cls(default="msa", hydra_blocks=[int(i) for i in m.group(1).split(".")])
        if m := re.fullmatch(r"vitdet(\d*)_(msa|hydra)", name):
            size = int(m.group(1) or window_size)
            if size < 1:
                raise ValueError(f"plan {name!r}: the window must be at least 1 token")
            return cls(window_size=size, global_blocks=glob, global_attention=m.group(2))  # type: ignore[arg-type]
        if m := re.fullmatch(r"linear(\d+)", name):
            return cls(default="linear", linear_heads=int(m.group(1)))
        raise ValueError(f"unknown plan {name!r}; choose from {', '.join(PLAN_NAMES)} (each with an optional "
                         f"+<local> suffix: {', '.join(LOCAL_NAMES)})")
