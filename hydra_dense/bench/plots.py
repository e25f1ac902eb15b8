"""The backbone benchmark's plot: speed-up and attention's FLOP share against the input size."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib

from ..runtime.atomic_file import atomic_savefig

__all__ = ["plot_backbone_rows"]


def plot_backbone_rows(rows: Iterable[dict], shares: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Throughput and peak memory against tokens per plan; attention FLOP share against resolution."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if isinstance(r.get("ms_per_iter"), float) and not math.isnan(r["ms_per_iter"])]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    plans = sorted({r["attention"] for r in rows}, key=lambda p: ["msa", "hydra", "none"].index(p)
                   if p in ("msa", "hydra", "none") else 9)
    for plan in plans:
        pts = sorted((r["tokens"], r["throughput"], r["peak_mem_mb"]) for r in rows if r["attention"] == plan)
        if not pts:
            continue
        t, thr, mem = zip(*pts)
        axes[0].plot(t, thr, "o-", label=plan)
        axes[1].plot(t, mem, "o-", label=plan)
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    measured_memory = any(isinstance(r.get("peak_mem_mb"), float) and r["peak_mem_mb"] > 0 for r in rows)
    if not measured_memory:  # --no-memory: say so instead of a log axis over no data
        axes[1].text(0.5, 0.5, "peak memory not measured (--no-memory)", ha="center", va="center",
                     transform=axes[1].transAxes)
        axes[1].set_axis_off()
    for ax, ylabel in ((axes[0], "throughput (inputs / s)"), (axes[1], "peak memory (MiB)")):
        if ax is axes[1] and not measured_memory:
            continue
        ax.set_xscale("log"), ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("tokens per input"), ax.set_ylabel(ylabel), ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    if shares:
        labels = [f"{s['height']}x{s['width']}" for s in shares]
        axes[2].bar(labels, [100 * s["attn_flop_share"] for s in shares], color="tab:red")
        for i, s in enumerate(shares):
            axes[2].text(i, 100 * s["attn_flop_share"] + 1, f"{100 * s['attn_flop_share']:.1f}%", ha="center")
        axes[2].set_ylabel("softmax attention share of FLOPs (%)")
        axes[2].set_title(f"all-MSA {shares[0]['backbone']}: attention share")
        axes[2].set_ylim(0, 100)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)
    return path
