"""``last.ckpt`` that always ends with the final weights of a finished run."""
from __future__ import annotations

import os
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = ["PeriodicLastCheckpoint"]


class PeriodicLastCheckpoint(ModelCheckpoint):
    """``last.ckpt`` every N steps or minutes (``ModelCheckpoint`` arguments), and once more when
    training ends after steps no periodic save covered (e.g. ``max_steps`` not a multiple of N):
    otherwise the run's last steps would exist only in memory. A run stopped on purpose (NaN guard,
    requeue: ``trainer.should_stop``) is not saved again here."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(save_last=True, save_top_k=0, **kwargs)
        self._saved_step = -1

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> dict:
        self._saved_step = trainer.global_step
        return super().on_save_checkpoint(trainer, pl_module, checkpoint)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        if trainer.should_stop or trainer.global_step == self._saved_step or self.dirpath is None:
            return
        trainer.save_checkpoint(os.path.join(self.dirpath, self.CHECKPOINT_NAME_LAST + self.FILE_EXTENSION))
