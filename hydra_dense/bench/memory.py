"""Peak memory of one call: CUDA ``max_memory_allocated``; on CPU the resident-set high-water mark."""
from __future__ import annotations

import multiprocessing as mp
import os
import re
from pathlib import Path
from typing import Callable

import torch


def _status_kb(field: str) -> int:
    text = Path("/proc/self/status").read_text()
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else 0


def _reset_hwm() -> bool:
    """Reset the kernel's VmHWM (peak RSS) counter for this process (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_memory_mb(fn: Callable[[], object], device: torch.device) -> float:
    """MiB the call needs above what was allocated before it.

    CUDA: ``torch.cuda.max_memory_allocated`` delta (tensors only). CPU: the increase of the
    process's peak resident set (VmHWM) over its resident set before the call — it includes
    allocator caching, so it is an upper bound; NaN where /proc is not available.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    if not Path("/proc/self/status").exists() or not _reset_hwm():
        fn()
        return float("nan")
    before = _status_kb("VmRSS")
    fn()
    return max(_status_kb("VmHWM") - before, 0) / 1024


def _child(conn, builder: Callable[[], Callable[[], object]]) -> None:  # pragma: no cover - runs in a child
    try:
        step = builder()
        conn.send(peak_memory_mb(step, torch.device("cpu")))
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        conn.send(f"{type(err).__name__}: {err}")
    finally:
        conn.close()


def peak_memory_mb_isolated(builder: Callable[[], Callable[[], object]], timeout: float = 1800) -> float | str:
    """CPU peak memory of one step in a fresh process, so earlier runs' cached heap can't hide it.

    ``builder`` (picklable, module level) builds the model and inputs and returns the step; the
    child measures the first call. glibc is told to serve large blocks with mmap
    (``MALLOC_MMAP_THRESHOLD_``) so freed tensors leave the resident set and VmHWM tracks tensor
    memory. Returns MiB, or an error string (e.g. out of memory).
    """
    ctx = mp.get_context("spawn")
    old = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "131072"
    try:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, builder), daemon=True)
        proc.start()
        child.close()
        result = parent.recv() if parent.poll(timeout) else "timeout"
        proc.join(10)
        if proc.exitcode not in (0, None) and not isinstance(result, float):
            result = f"killed (exit {proc.exitcode}): out of memory?"
        return result
    except EOFError:
        return "child died: out of memory?"
    finally:
        if old is None:
            os.environ.pop("MALLOC_MMAP_THRESHOLD_", None)
        else:
            os.environ["MALLOC_MMAP_THRESHOLD_"] = old
