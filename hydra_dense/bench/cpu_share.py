"""Whether the machine was busy while a CPU timing ran: the share of its threads' time the timing
process actually got. Alone on its cores, a process running ``n`` threads gets close to ``n`` CPU
seconds per wall second; another heavy job on the machine takes part of that, and every speed
measured meanwhile is disturbed (each model slowed by whatever else ran during its turn)."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

__all__ = ["CpuShare", "cpu_share", "BUSY_BELOW"]

# below this share of its threads' time the timing is marked as disturbed (alone, this machine's
# timing runs measured 0.85-1.0; with a second training job on its 2 cores, about 0.5)
BUSY_BELOW = 0.7


@dataclass
class CpuShare:
    """``share``: CPU seconds the process used / (wall seconds x threads it ran), over the block."""

    share: float = float("nan")
    threads: int = 1

    @property
    def busy(self) -> bool:
        return self.share == self.share and self.share < BUSY_BELOW

    def note(self) -> str:
        """A sentence for a table when the timing was disturbed, else empty."""
        if not self.busy:
            return ""
        return (f"timed while the machine was busy: the timing process got {100 * self.share:.0f} % of its "
                f"{self.threads} threads' time, so these speed columns are disturbed; time again on a quiet machine")


@contextmanager
def cpu_share(device: torch.device) -> Iterator[CpuShare]:
    """Measure the block's :class:`CpuShare` on the CPU (left NaN on a GPU, where it says nothing)."""
    out = CpuShare(threads=max(1, min(torch.get_num_threads(), os.cpu_count() or 1)))
    wall, cpu = time.perf_counter(), time.process_time()
    yield out
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if device.type == "cpu" and wall > 0:
        out.share = cpu / (wall * out.threads)
