"""Interleaved timing: every candidate runs once per round, so drift hits all of them alike."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Mapping, Optional

import torch


def _sync(device: Optional[torch.device]) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def interleaved_medians(
    fns: Mapping[str, Callable[[], object]],
    warmup: int = 2,
    repeats: int = 5,
    device: Optional[torch.device] = None,
    on_round: Optional[Callable[[int], None]] = None,
) -> dict[str, float]:
    """Median seconds per call of each function, measured round-robin after ``warmup`` calls.

    CUDA work is synchronised before and after each call.
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(repeats):
        for name, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times[name].append(time.perf_counter() - t0)
        if on_round is not None:
            on_round(r)
    return {name: statistics.median(ts) for name, ts in times.items()}
