"""The run's log folder, known on every rank without a collective inside rank-zero-only code."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import lightning as L

__all__ = ["RunDirMixin"]


class RunDirMixin(L.LightningModule):
    """Sets ``self.run_dir`` at the start of every validation / test epoch, on every rank.

    ``trainer.log_dir`` broadcasts rank 0's folder under DDP: reading it from code that only rank 0
    runs (saving overlays) would block rank 0 forever in that broadcast. Here all ranks read it
    together, at a point every rank reaches.
    """

    run_dir: Optional[Path] = None

    def _resolve_run_dir(self) -> None:
        trainer = self.trainer
        self.run_dir = Path(trainer.log_dir or trainer.default_root_dir)

    def on_validation_epoch_start(self) -> None:
        self._resolve_run_dir()

    def on_test_epoch_start(self) -> None:
        self._resolve_run_dir()
