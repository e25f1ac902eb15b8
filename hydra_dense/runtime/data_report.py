"""What the data readers skipped, clipped or dropped, said once per fit and kept in the run folder."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_info

from .atomic_file import atomic_write_text

__all__ = ["DataReport"]


class DataReport(L.Callback):
    """At the start of a fit: the data module's ``data_report()`` (e.g. detection's clipped and
    dropped boxes). At its end: samples skipped by ``skip_bad`` per split, summed over all ranks.
    Printed once (rank 0) and written to ``<run folder>/data_report.json``."""

    def __init__(self) -> None:
        self.formats = ""

    @staticmethod
    def _run_dir(trainer: L.Trainer) -> Path:
        return Path(trainer.log_dir or trainer.default_root_dir)  # every rank reads it: it broadcasts

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        dm = trainer.datamodule
        self.formats = dm.data_report() if hasattr(dm, "data_report") else ""
        if self.formats:
            rank_zero_info(f"[data] {self.formats}")
        self._write(trainer, {})

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        dm = trainer.datamodule
        datasets = getattr(dm, "datasets", {})
        local = {split: int(getattr(ds, "skipped", 0)) for split, ds in datasets.items()}
        counts = torch.tensor(list(local.values()) or [0], dtype=torch.float64)
        total = trainer.strategy.reduce(counts, reduce_op="sum") if trainer.world_size > 1 else counts
        skipped = {split: int(n) for split, n in zip(local, total.tolist())}
        if any(skipped.values()):
            rank_zero_info("[data] skipped unreadable samples (skip_bad): " +
                           ", ".join(f"{split} {n}" for split, n in skipped.items() if n))
        self._write(trainer, skipped)

    def _write(self, trainer: L.Trainer, skipped: dict[str, Any]) -> None:
        run_dir = self._run_dir(trainer)
        if trainer.is_global_zero:
            run_dir.mkdir(parents=True, exist_ok=True)
            report = {"formats": self.formats.splitlines(), "skipped_samples": skipped}
            atomic_write_text(run_dir / "data_report.json", json.dumps(report, indent=2) + "\n")
