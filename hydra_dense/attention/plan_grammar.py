"""The plan names of the tools (benchmark, compare, convert): a thin grammar over
:class:`~hydra_dense.attention.plan.AttentionPlan`.

    <base>[+mean][+gain][+<local>]

``<base>`` is one row of :data:`BASES` (``msa``, ``hydra``, ``hybrid4``, ``vitdet_hydra``, ...);
``+mean`` averages Hydra's ``kv`` over tokens (``token_mean``), ``+gain`` learns a per-channel gain
on its global term (``global_gain``), and ``+<local>`` adds a local branch (``dwc7``, ``win4``,
``win4+dwc7``; :mod:`~hydra_dense.attention.local_mixing`) to the Hydra / linear blocks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from .local_mixing import LOCAL_NAMES, parse_local
from .plan import GAIN_KINDS, MEAN_KINDS, AttentionPlan

__all__ = ["BASES", "PLAN_NAMES", "plan_from_name", "plan_names"]


def _vitdet_blocks(depth: int) -> list[int]:
    """ViTDet's global blocks: every depth/4 (2, 5, 8, 11 for depth 12)."""
    return [i * depth // 4 + depth // 4 - 1 for i in range(4)]


def _last(kind: str, last: int, depth: int, name: str) -> AttentionPlan:
    if not 0 < last <= depth:
        raise ValueError(f"plan {name!r}: the last {last} blocks of a model of depth {depth}?")
    return AttentionPlan(blocks=["msa"] * (depth - last) + [kind] * last)  # type: ignore[list-item]


def _vitdet(size: str, attention: str, depth: int, window_size: int, name: str) -> AttentionPlan:
    """ViTDet's layout: ``size`` x ``size`` windows, global blocks running ``attention`` (``windows``:
    no global block, the layout's windows-only control)."""
    size_ = int(size or window_size)
    if size_ < 1:
        raise ValueError(f"plan {name!r}: the window must be at least 1 token")
    if attention == "windows":
        return AttentionPlan(window_size=size_)
    return AttentionPlan(window_size=size_, global_blocks=_vitdet_blocks(depth),
                         global_attention=attention)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Base:
    """One base name: its ``pattern`` (regex), how the listing shows it (``listed``), what it builds
    from the match (``build(match, depth, window_size, name)``), and the suffixes it takes: a local
    branch (``local``; ``kv_local``: the kernel-restricted ``_kv`` one, which needs Hydra's feature
    map) and ``+mean`` / ``+gain`` (``flags``). ``needs_local``: it is a local branch alone."""

    pattern: str
    listed: tuple[str, ...]
    build: Callable[[re.Match, int, int, str], AttentionPlan]
    local: bool = True
    kv_local: bool = True
    flags: bool = True
    needs_local: bool = False


BASES: tuple[Base, ...] = (
    Base(r"msa|none", ("msa", "none"), lambda m, d, w, n: AttentionPlan(default=m[0]), local=False, flags=False),
    Base(r"hydra", ("hydra",), lambda m, d, w, n: AttentionPlan(default="hydra")),
    Base(r"hydra_norm|aft|polynl", ("hydra_norm", "aft", "polynl"), lambda m, d, w, n: AttentionPlan(default=m[0]),
         kv_local=False, flags=False),
    Base(r"local", (), lambda m, d, w, n: AttentionPlan(default="local"), flags=False, needs_local=True),
    Base(r"hybrid(\d+)", ("hybrid<L>", "hybrid2", "hybrid4", "hybrid8"),
         lambda m, d, w, n: AttentionPlan(default="msa", hydra_last=int(m[1]))),
    Base(r"hydra_at(\d+(?:\.\d+)*)", ("hydra_at<i>.<j>...",),
         lambda m, d, w, n: AttentionPlan(default="msa", hydra_blocks=[int(i) for i in m[1].split(".")])),
    Base(r"(aft|polynl)_last(\d+)", ("aft_last<L>", "polynl_last<L>"), lambda m, d, w, n: _last(m[1], int(m[2]), d, n),
         kv_local=False, flags=False),
    Base(r"vitdet(\d*)_msa", ("vitdet_msa", "vitdet<W>_msa"), lambda m, d, w, n: _vitdet(m[1], "msa", d, w, n),
         local=False, flags=False),
    Base(r"vitdet(\d*)_hydra", ("vitdet_hydra", "vitdet<W>_hydra"), lambda m, d, w, n: _vitdet(m[1], "hydra", d, w, n)),
    Base(r"vitdet(\d*)_windows", ("vitdet_windows", "vitdet<W>_windows"),
         lambda m, d, w, n: _vitdet(m[1], "windows", d, w, n), local=False, flags=False),
    Base(r"linear(\d+)", ("linear<H>",), lambda m, d, w, n: AttentionPlan(default="linear", linear_heads=int(m[1]))),
)
# every base, as the listing and the errors name it (the local-only base with its required branch)
PLAN_NAMES: tuple[str, ...] = tuple(n for b in BASES for n in (b.listed or ("local+<local>",))
                                    if not re.fullmatch(r"hybrid\d+", n))


def _base(name: str) -> tuple[Base, re.Match]:
    for base in BASES:
        if m := re.fullmatch(base.pattern, name):
            return base, m
    raise ValueError(f"unknown plan {name!r}; choose from {', '.join(PLAN_NAMES)} (each with an optional "
                     f"+<local> suffix: {', '.join(LOCAL_NAMES)})")


def plan_from_name(name: str, depth: int, window_size: int = 14) -> AttentionPlan:
    """``<base>[+mean][+gain][+<local>]`` -> its plan for a model of ``depth`` blocks. ``hybrid<L>``:
    Hydra in the last L blocks; ``hydra_at0.1.11``: Hydra in blocks 0, 1 and 11 (MSA elsewhere);
    ``vitdet_*``: windowed MSA with global blocks every depth/4 running MSA or Hydra
    (``vitdet<W>_*``: W x W windows, else ``window_size``; ``vitdet<W>_windows``: windows in every
    block, no global block); ``linear<H>``: cosine linear attention
    with H heads; ``hydra_norm``: norm-aware Hydra; ``aft`` / ``polynl``: the paper's token-linear
    baselines (``*_last<L>``: in the last L blocks); ``local+dwc7``: the local branch alone in every
    block, the control of ``hydra+dwc7``."""
    head, _, rest = name.partition("+")
    base, match = _base(head)
    plan = base.build(match, depth, window_size, name)
    suffix = rest.split("+") if rest else []
    while suffix and suffix[0] in ("mean", "gain"):
        flag = suffix.pop(0)
        if not any(k in (MEAN_KINDS if flag == "mean" else GAIN_KINDS) for k in plan.resolve(depth)):
            raise ValueError(f"plan {name!r}: {head!r} has no Hydra / linear block whose global term "
                             f"'+{flag}' would change")
        plan = replace(plan, **{"token_mean" if flag == "mean" else "global_gain": True})
    local = "+".join(suffix)
    if local:
        parse_local(local)
        plan = replace(plan, local=local)
        if not any(block.local for block in plan.per_block(depth)):
            raise ValueError(f"plan {name!r}: {head!r} has no Hydra / linear block for local mixing {local!r}")
    elif base.needs_local:
        raise ValueError(f"plan {name!r}: 'local' is a local branch alone; name it, e.g. local+dwc7")
    return plan


def plan_names(depth: int = 12) -> list[str]:
    """Plan names worth listing for a model of ``depth`` blocks (patterns ``hybrid<L>`` / ``linear<H>``
    accept any L / H)."""
    def listed(base: Base) -> list[str]:
        return [n for n in base.listed if not (re.fullmatch(r"hybrid\d+", n) and int(n[6:]) >= depth)]

    def locals_of(base: Base) -> list[str]:
        return [loc for loc in LOCAL_NAMES if base.kv_local or parse_local(loc).source != "kv"] if base.local else []

    bases = [n for b in BASES for n in listed(b)]
    with_local = [f"{n}+{loc}" for b in BASES for n in listed(b) for loc in locals_of(b)]
    local_only = [f"local+{loc}" for b in BASES if b.needs_local for loc in locals_of(b)]
    flagged = [(n, b) for b in BASES if b.flags for n in listed(b)]
    return (bases + with_local + local_only + [f"{n}+mean" for n, _ in flagged]
            + [f"{n}+mean+{loc}" for n, b in flagged for loc in LOCAL_NAMES]
            + [f"{n}+mean+gain+{loc}" for n, b in flagged for loc in LOCAL_NAMES])
