"""Training curves you can look at: training loss and the main validation metric against step.

Every run gets ``curves.png`` next to its ``metrics.csv`` (refreshed after each validation and at
the end of fit), and :func:`plot_curves` overlays several runs, e.g. every plan of a comparison.
The numbers come from the CSV logger's file, so a resumed run's curve continues where it stopped.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Mapping, Optional

import matplotlib
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.utilities import rank_zero_warn

from .atomic_file import atomic_savefig

__all__ = ["read_metrics", "main_metric", "plot_curves", "TrainingCurves", "MAIN_METRICS"]

# the metric each task is compared on, in order of preference (segmentation, detection, video, conversion)
MAIN_METRICS = ("val_mIoU", "val_mAP", "val_top1", "val_rel_error")
Series = dict[str, list[tuple[int, float]]]


def read_metrics(path: Path) -> Series:
    """A Lightning ``metrics.csv`` -> column -> ``[(step, value), ...]`` (empty cells skipped)."""
    out: Series = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                step = int(float(row.get("step") or "nan"))
            except ValueError:
                continue
            for key, text in row.items():
                if key in ("epoch", "step") or not text:
                    continue
                try:
                    value = float(text)
                except ValueError:
                    continue
                if not math.isnan(value):
                    out.setdefault(key, []).append((step, value))
    return out


def main_metric(series: Series) -> Optional[str]:
    """The validation metric a run is judged by (see :data:`MAIN_METRICS`), else any ``val_`` column."""
    return next((k for k in MAIN_METRICS if k in series), next((k for k in sorted(series) if k.startswith("val_")), None))


def curve_layout(runs: Mapping[str, Series]) -> tuple[list[str], dict[str, list[str]]]:
    """What :func:`plot_curves` draws: its panels (``train_loss`` and the main validation metric, those
    any run has) and, per recipe (one colour and one legend entry each), the run labels
    ``"<recipe> seed <n>"`` drawn in it."""
    metric = next((m for m in (main_metric(s) for s in runs.values()) if m), None)
    panels = [k for k in ("train_loss", metric) if k and any(k in s for s in runs.values())]
    recipes: dict[str, list[str]] = {}
    for label in runs:
        recipes.setdefault(label.split(" seed ")[0], []).append(label)
    return panels, recipes


def plot_curves(runs: Mapping[str, Series], path: Path, title: str = "") -> Optional[Path]:
    """The panels of :func:`curve_layout`, one line per run, a recipe's seeds in its colour. Returns
    ``path`` (None: nothing to plot)."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pyplot picks its backend when first imported: after use("Agg")

    panels, by_recipe = curve_layout(runs)
    if not panels:
        return None
    recipes = list(by_recipe)
    colours = {r: plt.get_cmap("tab10")(i % 10) for i, r in enumerate(recipes)}
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    for ax, key in zip(axes[0], panels):
        named: set[str] = set()
        for label, series in runs.items():
            points = series.get(key)
            if not points:
                continue
            steps, values = zip(*points)
            recipe = label.split(" seed ")[0]
            ax.plot(steps, values, "-" if key == "train_loss" else "o-", ms=3, lw=1.2, alpha=0.8,
                    color=colours[recipe], label=None if recipe in named or not recipe else recipe)
            named.add(recipe)
        ax.set_xlabel("step")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        if any(r for r in recipes):
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, path, dpi=100)
    plt.close(fig)
    return path


class TrainingCurves(Callback):
    """Writes ``<log dir>/curves.png`` from the CSV logger's metrics after every validation and at
    the end of fit (rank 0 only; a plotting failure warns and never stops training)."""

    def _write(self, trainer: Trainer) -> None:
        if not trainer.is_global_zero or trainer.sanity_checking:
            return
        csv_logger = next((lg for lg in trainer.loggers if isinstance(lg, CSVLogger)), None)
        if csv_logger is None:
            return
        try:
            csv_logger.save()  # flush what the logger holds back
            path = Path(csv_logger.experiment.metrics_file_path)
            if path.is_file():
                plot_curves({"": read_metrics(path)}, path.parent / "curves.png", title=str(path.parent))
        except Exception as err:  # a figure must not cost the run
            rank_zero_warn(f"training curves not written: {err}")

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._write(trainer)

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._write(trainer)
