"""Parsing benchmark specs: plan names, input sizes, dtypes, devices — with errors that name the value."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import torch

from ..attention import AttentionPlan

__all__ = ["InputSize", "parse_size", "plan_from_name", "plan_names", "PLAN_NAMES", "LOCAL_NAMES", "parse_dtype", "parse_devices"]

PLAN_NAMES = ("msa", "hydra", "none", "hybrid<L>", "hydra_at<i>.<j>...", "vitdet_msa", "vitdet_hydra", "linear<H>")
# every plan with Hydra / linear blocks also takes a local-mixing suffix: hydra+dwc3, hybrid4+dwc5, ...
LOCAL_NAMES = ("dwc3", "dwc5", "dwc7", "dwc3_x", "dwc3_kv", "dwc3_2d")
_ALIASES = {"1080p": "1080x1920", "720p": "720x1280", "4k": "2160x3840"}


@dataclass(frozen=True)
class InputSize:
    """An image (``frames is None``) or clip size in pixels."""

    height: int
    width: int
    frames: Optional[int] = None

    def __str__(self) -> str:
        hw = f"{self.height}x{self.width}"
        return f"{self.frames}x{hw}" if self.frames else hw


def parse_size(text: str) -> InputSize:
    """``"224"`` -> 224x224; ``"HxW"``; ``"1080p"``; ``"FxHxW"`` (a clip of F frames)."""
    raw = text.strip().lower()
    raw = _ALIASES.get(raw, raw)
    if not re.fullmatch(r"\d+(x\d+){0,2}", raw):
        raise ValueError(f"bad size {text!r}: use S, HxW, FxHxW or one of {sorted(_ALIASES)}")
    parts = [int(p) for p in raw.split("x")]
    if any(p <= 0 for p in parts):
        raise ValueError(f"bad size {text!r}: every dimension must be positive")
    if len(parts) == 1:
        return InputSize(parts[0], parts[0])
    if len(parts) == 2:
        return InputSize(parts[0], parts[1])
    return InputSize(parts[1], parts[2], parts[0])


def plan_from_name(name: str, depth: int, window_size: int = 14) -> AttentionPlan:
    """Benchmark plan names -> plans. ``hybrid<L>``: Hydra in the last L blocks; ``vitdet_*``:
    windowed MSA with global blocks every depth/4 (2, 5, 8, 11 for depth 12) running MSA or Hydra;
    ``linear<H>``: cosine linear attention with H heads; ``hydra_at0.1.11``: Hydra in blocks 0, 1 and 11
    (MSA elsewhere). A ``+<local>`` suffix (``hydra+dwc3``,
    ``hybrid4+dwc5``) adds local mixing (:mod:`hydra_dense.local_mixing`) to the Hydra / linear blocks."""
    base, plus, local = name.partition("+")
    plan = _base_plan(base, depth, window_size)
    if plus:
        from ..local_mixing import parse_local

        parse_local(local)
        plan.local = local
        if not any(plan.local_of(k) for k in plan.resolve(depth)):
            raise ValueError(f"plan {name!r}: {base!r} has no Hydra / linear block for local mixing {local!r}")
    return plan


def plan_names(depth: int = 12) -> list[str]:
    """Plan names worth listing for a model of ``depth`` blocks (patterns ``hybrid<L>`` / ``linear<H>``
    accept any L / H)."""
    bases = ["msa", "hydra", "none", "hybrid<L>"] + [f"hybrid{n}" for n in (2, 4, 8) if n < depth] + ["hydra_at<i>.<j>..."]
    bases += ["vitdet_msa", "vitdet_hydra", "linear<H>"]
    with_local = [b for b in bases if b not in ("msa", "none", "vitdet_msa")]
    return bases + [f"{b}+{loc}" for b in with_local for loc in LOCAL_NAMES]


def _base_plan(name: str, depth: int, window_size: int) -> AttentionPlan:
    glob = [i * depth // 4 + depth // 4 - 1 for i in range(4)]
    if name in ("msa", "hydra", "none"):
        return AttentionPlan(default=name)  # type: ignore[arg-type]
    if m := re.fullmatch(r"hybrid(\d+)", name):
        return AttentionPlan(default="msa", hydra_last=int(m.group(1)))
    if m := re.fullmatch(r"hydra_at(\d+(?:\.\d+)*)", name):
        return AttentionPlan(default="msa", hydra_blocks=[int(i) for i in m.group(1).split(".")])
    if name in ("vitdet_msa", "vitdet_hydra"):
        return AttentionPlan(window_size=window_size, global_blocks=glob, global_attention=name.split("_")[1])  # type: ignore[arg-type]
    if m := re.fullmatch(r"linear(\d+)", name):
        return AttentionPlan(default="linear", linear_heads=int(m.group(1)))
    raise ValueError(f"unknown plan {name!r}; choose from {', '.join(PLAN_NAMES)} (each with an optional "
                     f"+<local> suffix: {', '.join(LOCAL_NAMES)})")


def parse_dtype(name: str) -> torch.dtype:
    table = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
             "fp16": torch.float16, "float16": torch.float16}
    if name not in table:
        raise ValueError(f"unknown dtype {name!r}; choose from fp32, bf16, fp16")
    return table[name]


def parse_devices(text: str) -> list[torch.device]:
    """Comma-separated devices. A single missing device is an error; when several are asked for,
    missing ones are skipped with a message."""
    names = [d.strip() for d in text.split(",") if d.strip()]
    ok = []
    for name in names:
        dev = torch.device(name)
        present = dev.type == "cpu" or (dev.type == "cuda" and torch.cuda.is_available()
                                        and (dev.index or 0) < torch.cuda.device_count())
        if present:
            ok.append(dev)
        elif len(names) == 1:
            raise ValueError(f"device {name!r} is not present on this machine (torch.cuda.is_available()="
                             f"{torch.cuda.is_available()})")
        else:
            print(f"skipping device {name!r}: not present on this machine")
    if not ok:
        raise ValueError(f"none of the devices {names} is present")
    return ok
