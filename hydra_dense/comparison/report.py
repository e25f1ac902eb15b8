"""The comparison's outputs: one row per recipe as mean ± std over seeds (Markdown, CSV, JSON),
per-seed runs (CSV), per-class tables, the accuracy-vs-speed Pareto plot with error bars, and every
run's training curves overlaid."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Optional

import matplotlib

from ..runtime.atomic_file import atomic_savefig, atomic_write_text
from ..runtime.curves import plot_curves, read_metrics
from ..tables import markdown_table, write_csv
from .html import write_html_report
from .runs import run_folder

__all__ = ["aggregate", "write_report", "plot_run_curves", "pareto_front", "TABLE_COLUMNS", "RUN_COLUMNS"]

TABLE_COLUMNS = ["plan", "attention", "seeds", "score", "score_std", "scores", "score2", "score_near",
                 "score_near_std", "score_far", "score_far_std", "global_zeroed", "global_zeroed_std", "global_cost",
                 "global_cost_std", "head_pool_zeroed", "head_pool_zeroed_std", "head_pool_cost",
                 "head_pool_cost_std", "train_img_s", "infer_img_s", "speedup",
                 "flop_ideal", "infer_img_s_big", "speedup_big", "flop_ideal_big", "peak_train_mem_mb",
                 "params_m", "gflops_img", "steps", "train_min", "convert_min", "convert_error", "convert_data"]
RUN_COLUMNS = ["recipe", "seed", "metric", "score", "metric2", "score2", "score_near", "score_far",
               "score_global_zeroed", "score_head_pool_zeroed", "train_img_s",
               "peak_train_mem_mb", "steps", "train_min"]


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.fmean(xs) if xs else float("nan")


def _std(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.stdev(xs) if len(xs) > 1 else 0.0 if xs else float("nan")


def aggregate(runs: list[dict], conversions: dict[str, dict]) -> list[dict]:
    """Per-seed results -> one row per recipe (in first-seen order): means, sample std of the score."""
    rows: dict[str, dict] = {}
    for r in runs:
        rows.setdefault(r["recipe"], {"runs": []})["runs"].append(r)
    out = []
    for name, entry in rows.items():
        rs = sorted(entry["runs"], key=lambda r: r["seed"])
        scores = [r["score"] for r in rs]
        row = dict(plan=name, attention=rs[0]["attention"], seeds=",".join(str(r["seed"]) for r in rs),
                   metric=rs[0]["metric"], metric2=rs[0]["metric2"], score=_mean(scores), score_std=_std(scores),
                   scores=" / ".join(f"{s:.1f}" for s in scores), score2=_mean([r["score2"] for r in rs]),
                   train_img_s=_mean([r["train_img_s"] for r in rs]),
                   peak_train_mem_mb=_mean([r["peak_train_mem_mb"] for r in rs]),
                   params_m=rs[0]["params_m"], gflops_img=rs[0]["gflops_img"], steps=rs[0]["steps"],
                   train_min=_mean([r["train_min"] for r in rs]))
        for path in ("global", "head_pool"):  # what zeroing the backbone's / the head's global path costs
            zeroed = [r.get(f"score_{path}_zeroed", float("nan")) for r in rs]
            if any(z == z for z in zeroed):
                costs = [s - z for s, z in zip(scores, zeroed)]
                row.update({f"{path}_zeroed": _mean(zeroed), f"{path}_zeroed_std": _std(zeroed),
                            f"{path}_cost": _mean(costs), f"{path}_cost_std": _std(costs)})
        for region in ("near", "far"):  # a context track's score near its cue and far from it
            split = [r.get(f"score_{region}", float("nan")) for r in rs]
            if any(v == v for v in split):
                row.update({f"score_{region}": _mean(split), f"score_{region}_std": _std(split)})
        for size in rs[0].get("scores_at") or {}:
            at = [r.get("scores_at", {}).get(size, float("nan")) for r in rs]
            row[f"score_at_{size}"], row[f"score_at_{size}_std"] = _mean(at), _std(at)
        conv = conversions.get(name)
        if conv:
            row.update(convert_min=conv["minutes"], convert_data=conv["data"],
                       convert_error=conv.get("error_text") or f"{conv['error_before']:.3f} -> {conv['error_after']:.3f}")
        out.append(row)
    return out


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (higher is better), by x."""
    keep = [i for i, (x, y) in enumerate(points)
            if not any((x2 >= x and y2 >= y) and (x2 > x or y2 > y) for x2, y2 in points)]
    return sorted(keep, key=lambda i: points[i][0])


def _fmt_pm(row: dict) -> dict:
    """Scores as ``mean ± std``; with one seed the score alone, marked as such (no spread was measured)."""
    shown = dict(row)
    one_seed = len(str(row.get("seeds", "")).split(",")) == 1
    for key in ["score", "score_near", "score_far", "global_zeroed", "global_cost", "head_pool_zeroed",
                "head_pool_cost"] + [k for k in row if k.startswith("score_at_") and not k.endswith("_std")]:
        if key not in row:
            continue
        if row[key] == row[key]:
            shown[key] = f"{row[key]:.1f} (1 seed)" if one_seed else f"{row[key]:.1f} ± {row[key + '_std']:.1f}"
    return shown


def _columns(rows: list[dict]) -> list[str]:
    """TABLE_COLUMNS present in the rows, the ``score_at_<size>`` columns (and their std) after score2."""
    at = sorted({k for r in rows for k in r if k.startswith("score_at_")}, key=lambda k: (int(k.split("_")[2]), k))
    columns = [c for c in TABLE_COLUMNS if any(c in r for r in rows)]
    i = columns.index("score2") + 1 if "score2" in columns else len(columns)
    return columns[:i] + at + columns[i:]


def write_report(rows: list[dict], runs: list[dict], out: Path, header: str, legend: str,
                 big_size: str, summary: dict) -> str:
    """Write table.md / table.csv / runs.csv / per_class.md / summary.json / accuracy_vs_speed.png /
    curves.png, and all of it as one self-contained report.html."""
    columns = _columns(rows)
    shown = [c for c in columns if not c.endswith("_std")]
    table = markdown_table([_fmt_pm(r) for r in rows], shown)
    text = f"# {header}\n\n{table}\n\n{legend}\n"
    atomic_write_text(out / "table.md", text)
    write_csv(rows, out / "table.csv", columns[:2] + ["metric", "metric2"] + columns[2:])
    write_csv(runs, out / "runs.csv", RUN_COLUMNS)
    per_class = "\n\n".join(f"## {r['recipe']} (seed {r['seed']})\n\n{r['per_class']}" for r in runs if r.get("per_class"))
    atomic_write_text(out / "per_class.md", per_class + "\n")
    atomic_write_text(out / "summary.json", json.dumps(dict(summary, rows=rows, runs=runs), indent=1, default=float))
    plot(rows, out / "accuracy_vs_speed.png", big_size)
    plot_run_curves(runs, out, out / "curves.png")
    write_html_report([_fmt_pm(r) for r in rows], runs, out, header, legend, shown)
    return text


def plot_run_curves(runs: list[dict], out: Path, path: Path) -> Optional[Path]:
    """Every run's loss and validation curve in one figure (a recipe's seeds share a colour), from
    the newest ``metrics.csv`` under ``out/<recipe>/seed<n>``."""
    series = {}
    for r in runs:
        files = sorted(run_folder(out, r["recipe"], r["seed"]).rglob("metrics.csv"), key=lambda f: f.stat().st_mtime)
        if files:
            series[f"{r['recipe']} seed {r['seed']}"] = read_metrics(files[-1])
    return plot_curves(series, path, "training curves (each seed one line)") if series else None


def plot(rows: list[dict], path: Path, big_size: str) -> Optional[Path]:
    """Score (mean ± std over seeds) against speed; the Pareto front (best score for the speed) drawn."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = []
    if big_size and all(r.get("speedup_big") == r.get("speedup_big") for r in rows if "speedup_big" in r) \
            and any("speedup_big" in r for r in rows):
        keys.append(("speedup_big", f"inference speedup vs {rows[0]['plan']} at {big_size}"))
    keys.append(("infer_img_s", "inference img/s at the evaluation size"))
    fig, axes = plt.subplots(1, len(keys), figsize=(6.2 * len(keys), 4.8), squeeze=False)
    for ax, (key, label) in zip(axes[0], keys):
        pts = [(r.get(key, float("nan")), r["score"]) for r in rows]
        for r, (x, y) in zip(rows, pts):
            ax.errorbar(x, y, yerr=r["score_std"], fmt="o", capsize=4, ms=6)
            ax.annotate(r["plan"], (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
        valid = [(x, y) for x, y in pts if not (math.isnan(x) or math.isnan(y))]
        front = pareto_front(valid)
        if len(front) > 1:
            ax.plot([valid[i][0] for i in front], [valid[i][1] for i in front], "--", color="grey", lw=1,
                    label="Pareto front")
            ax.legend(loc="lower left", fontsize=8)
        ax.set_xlabel(label)
        ax.set_ylabel(f"{rows[0]['metric']} (%), mean ± std over seeds")
        ax.grid(alpha=0.3)
    fig.suptitle("accuracy vs speed (same data and schedule; error bars: std over seeds)")
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)
    return path
