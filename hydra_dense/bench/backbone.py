"""Backbone-level benchmark: every attention plan of one model (:mod:`.models`), timed interleaved at
each input size, with its FLOPs, peak memory and the ratios to MSA."""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import torch
from torch import nn

from .detection import count_flops_real
from .flops import ELEMENTWISE_PER_TOKEN_CHANNEL, count_flops, hydra_flops_by_formula
from .input_sizes import InputSize
from .memory import peak_memory_mb, peak_memory_mb_isolated
from .models import MODELS, bench_input, build_backbone, is_detection_model, token_count, vit_of
from .timing import interleaved_medians

__all__ = ["BenchSettings", "build_backbone", "bench_backbones", "count_backbone_flops", "attention_flop_shares", "MODELS",
           "ROW_COLUMNS"]

ROW_COLUMNS = ["backbone", "attention", "height", "width", "frames", "tokens", "batch", "mode", "dtype", "compile",
               "device", "ms_per_iter", "throughput", "peak_mem_mb", "gflops", "attn_flop_share",
               "speedup_vs_msa", "flop_ideal_vs_msa", "pct_of_ideal", "overhead_vs_none", "note"]


@dataclass
class BenchSettings:
    model: str = "vit_base"
    plans: list[str] = field(default_factory=lambda: ["msa", "hydra", "none"])
    sizes: list[InputSize] = field(default_factory=lambda: [InputSize(224, 224)])
    patch_size: int = 16
    tubelet_size: int = 2
    batch: int = 1
    mode: str = "infer"  # or "train": forward, backward, optimizer step
    dtype: torch.dtype = torch.float32
    compile: bool = False
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    warmup: int = 1
    repeats: int = 5
    grad_checkpointing: bool = False
    memory: bool = True  # measure peak memory (CPU: one extra step in a fresh process)


def _step_fn(model: nn.Module, x: torch.Tensor, s: BenchSettings) -> Callable[[], None]:
    run = torch.compile(model) if s.compile else model
    amp = (torch.autocast(s.device.type, dtype=s.dtype) if s.dtype != torch.float32
           else contextlib.nullcontext())

    def reduce(out) -> torch.Tensor:
        outs = out if isinstance(out, (list, tuple)) else [out]
        return sum(o.float().mean() for o in outs)

    if s.mode == "infer":
        model.eval()

        def step() -> None:
            with torch.inference_mode(), amp:
                run(x)
        return step
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def step() -> None:
        with amp:
            loss = reduce(run(x))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def _build_step(s: BenchSettings, plan: str, size: InputSize) -> Callable[[], None]:
    """Module-level (picklable) builder used to measure memory in a fresh process."""
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = build_backbone(s.model, plan, s.patch_size, s.tubelet_size, s.grad_checkpointing).to(s.device)
    return _step_fn(model, bench_input(model, size, s.batch, s.device), s)


def _count_real(model_name: str, plan: str, size: InputSize, s: BenchSettings) -> int:
    """FLOPs of one step on real tensors (detectors: their sampling and NMS are data dependent)."""
    torch.manual_seed(0)
    model = build_backbone(model_name, plan, s.patch_size, s.tubelet_size)
    x = bench_input(model, size, s.batch, "cpu")
    if s.mode == "infer":
        model.eval()
        with torch.no_grad():
            return count_flops_real(lambda: model(x))
    model.train()
    return count_flops_real(lambda: model(x).backward())


def count_backbone_flops(model_name: str, plan: str, size: InputSize, s: BenchSettings) -> int:
    """FLOPs of one step, counted on the meta device (no memory, exact shapes)."""
    if is_detection_model(model_name):
        flops = _count_real(model_name, plan, size, s)
        model = build_backbone(model_name, plan, s.patch_size)
        return flops + _hydra_extra(model_name, plan, size, s, vit_of(model).attention_kinds, model)
    with torch.device("meta"):
        model = build_backbone(model_name, plan, s.patch_size, s.tubelet_size)
        x = bench_input(model, size, s.batch, "meta")
    if s.mode == "infer":
        model.eval()
        fn = lambda: model(x)  # noqa: E731
    else:
        def fn():
            out = model(x)
            outs = out if isinstance(out, (list, tuple)) else [out]
            sum(o.mean() for o in outs).backward()
    return count_flops(fn) + _hydra_extra(model_name, plan, size, s, vit_of(model).attention_kinds, model)


def _hydra_extra(model_name: str, plan: str, size: InputSize, s: BenchSettings, kinds: list[str],
                 model: Optional[nn.Module] = None) -> int:
    """The token-linear ops' elementwise work (not counted by FlopCounterMode), by formula; x3 for training."""
    counts = {k: kinds.count(k) for k in ELEMENTWISE_PER_TOKEN_CHANNEL if kinds.count(k)}
    if not counts:
        return 0
    if model is None:
        with torch.device("meta"):
            model = build_backbone(model_name, plan, s.patch_size, s.tubelet_size)
    T, D = token_count(model, size) * s.batch, vit_of(model).embed_dim
    return sum(hydra_flops_by_formula(T, D, n, kind) for kind, n in counts.items()) * (1 if s.mode == "infer" else 3)


def _is_oom(err: BaseException) -> bool:
    return isinstance(err, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in str(err).lower() or \
        "can't allocate memory" in str(err).lower() or "DefaultCPUAllocator" in str(err)


def _build_all(s: BenchSettings, size: InputSize, notes: dict[str, str]) -> dict[str, tuple[nn.Module, torch.Tensor]]:
    """Every plan's model and input at ``size``; a plan that cannot be built (out of memory) gets a
    note instead."""
    built: dict[str, tuple[nn.Module, torch.Tensor]] = {}
    for plan in s.plans:
        try:
            model = build_backbone(s.model, plan, s.patch_size, s.tubelet_size, s.grad_checkpointing).to(s.device)
            built[plan] = (model, bench_input(model, size, s.batch, s.device))
        except Exception as err:  # noqa: BLE001 - reported in the row
            if not _is_oom(err) and isinstance(err, ValueError):
                raise
            notes[plan] = f"failed to build: {type(err).__name__}: {str(err)[:120]}"
    return built


def _runnable_steps(s: BenchSettings, built: dict, notes: dict[str, str]) -> dict[str, Callable[[], None]]:
    """Each built plan's step, run once alone first so that a failing plan (OOM) is dropped, with a
    note, before the timed rounds."""
    fns = {plan: _step_fn(model, x, s) for plan, (model, x) in built.items()}
    for plan in list(fns):
        try:
            fns[plan]()
        except Exception as err:  # noqa: BLE001
            notes[plan] = "out of memory" if _is_oom(err) else f"{type(err).__name__}: {str(err)[:120]}"
            del fns[plan]
            built.pop(plan, None)
    return fns


def _peak_memories(s: BenchSettings, size: InputSize, fns: dict, notes: dict[str, str]) -> dict[str, float]:
    """Each plan's peak memory (CUDA: in this process; CPU: in a fresh process each)."""
    mems = {}
    for plan in (fns if s.memory else []):
        if s.device.type == "cuda":
            mems[plan] = peak_memory_mb(fns[plan], s.device)
            continue
        mem = peak_memory_mb_isolated(functools.partial(_build_step, s, plan, size))
        if isinstance(mem, str):
            notes[plan] = "; ".join(n for n in (notes.get(plan), f"memory: {mem[:80]}") if n)
            mem = float("nan")
        mems[plan] = mem
    return mems


def _plan_flops(s: BenchSettings, size: InputSize) -> tuple[dict[str, float], float]:
    """Each plan's FLOPs at ``size`` and those of no token mixing (NaN where counting fails: FLOPs
    are informative, not essential)."""
    def count(plan: str) -> float:
        try:
            return count_backbone_flops(s.model, plan, size, s)
        except Exception:  # noqa: BLE001
            return float("nan")

    flops = {plan: count(plan) for plan in s.plans}
    return flops, flops["none"] if "none" in flops else count("none")


def _add_ratios(rows: list[dict]) -> None:
    """Speedup and FLOP ratio against MSA, % of the FLOP-ideal, and the overhead over no mixing."""
    by_plan = {r["attention"]: r for r in rows}
    msa, none = by_plan.get("msa"), by_plan.get("none")
    for r in rows:
        r["speedup_vs_msa"] = msa["ms_per_iter"] / r["ms_per_iter"] if msa else float("nan")
        r["flop_ideal_vs_msa"] = msa["gflops"] / r["gflops"] if msa else float("nan")
        r["pct_of_ideal"] = 100 * r["speedup_vs_msa"] / r["flop_ideal_vs_msa"] if msa else float("nan")
        r["overhead_vs_none"] = r["ms_per_iter"] / none["ms_per_iter"] if none else float("nan")


def bench_backbones(s: BenchSettings, progress: Optional[Callable[[str], None]] = None) -> list[dict]:
    """Rows (dicts with :data:`ROW_COLUMNS`) for every plan at every size.

    Plans of one size are timed interleaved in one process; a plan that fails (e.g. runs out of
    memory) gets a row saying so and the run goes on.
    """
    rows: list[dict] = []
    for size in s.sizes:
        notes: dict[str, str] = {}
        built = _build_all(s, size, notes)
        any_model = next(iter(built.values()))[0] if built else build_backbone(s.model, "none", s.patch_size, s.tubelet_size)
        tokens, p = token_count(any_model, size), s.patch_size
        pad_note = (f"padded to {math.ceil(size.height / p) * p}x{math.ceil(size.width / p) * p}"
                    if size.height % p or size.width % p else "")
        fns = _runnable_steps(s, built, notes)
        if progress:
            progress(f"{s.model} {size}: timing {', '.join(fns)}")
        times = interleaved_medians(fns, warmup=s.warmup, repeats=s.repeats, device=s.device) if fns else {}
        mems = _peak_memories(s, size, fns, notes)
        flops, none_flops = _plan_flops(s, size)
        size_rows = []
        for plan in s.plans:
            ms = times.get(plan, float("nan")) * 1e3
            size_rows.append(dict(
                backbone=s.model, attention=plan, height=size.height, width=size.width, frames=size.frames or "",
                tokens=tokens, batch=s.batch, mode=s.mode, dtype=str(s.dtype).replace("torch.", ""),
                compile=s.compile, device=str(s.device), ms_per_iter=ms,
                throughput=s.batch / (ms / 1e3) if ms == ms else float("nan"), peak_mem_mb=mems.get(plan, float("nan")),
                gflops=flops[plan] / 1e9,
                attn_flop_share=max(flops[plan] - none_flops, 0) / flops[plan] if flops[plan] else float("nan"),
                note="; ".join(n for n in (notes.get(plan, ""), pad_note) if n)))
        _add_ratios(size_rows)
        rows += size_rows
        del built, fns
    return rows


def attention_flop_shares(model: str, sizes: Iterable[InputSize], patch_size: int = 16) -> list[dict]:
    """Share of forward FLOPs spent in softmax attention for the all-MSA model, counted
    (meta device) and by hand (4·T²·D per block over the counted total)."""
    out = []
    s = BenchSettings(model=model, patch_size=patch_size)
    for size in sizes:
        msa = count_backbone_flops(model, "msa", size, s)
        none = count_backbone_flops(model, "none", size, s)
        with torch.device("meta"):
            m = build_backbone(model, "none", patch_size)
        T, D, depth = token_count(m, size), m.embed_dim, len(m.blocks)
        hand = 4 * T * T * D * depth
        out.append(dict(backbone=model, height=size.height, width=size.width, frames=size.frames or "", tokens=T,
                        gflops_msa=msa / 1e9, gflops_attention=(msa - none) / 1e9,
                        attn_flop_share=(msa - none) / msa, attn_flop_share_hand=hand / (none + hand),
                        flop_ideal_msa_over_hydra=msa / (none + hydra_flops_by_formula(T, D, depth))))
    return out
