"""``last.ckpt`` that always ends with the final weights of a finished run."""
from __future__ import annotations

import logging
import os
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint

from ..runtime.refusal import DiskFull

__all__ = ["PeriodicLastCheckpoint"]

log = logging.getLogger(__name__)


class PeriodicLastCheckpoint(ModelCheckpoint):
    """``last.ckpt`` every N steps or minutes (``ModelCheckpoint`` arguments), and once more when
    training ends after steps no periodic save covered (e.g. ``max_steps`` not a multiple of N):
    otherwise the run's last steps would exist only in memory. A run stopped on purpose (NaN guard,
    requeue: ``trainer.should_stop``) is not saved again here; a run stopped by an error is
    (:meth:`on_exception`)."""

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
        trainer.save_checkpoint(self._last_path())

    def _last_path(self) -> str:
        return os.path.join(self.dirpath, self.CHECKPOINT_NAME_LAST + self.FILE_EXTENSION)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        """A run that fails while training (a bad sample, an error in validation) keeps its progress:
        ``last.ckpt`` is written at the current step when no save covers it yet, so ``--ckpt_path
        last`` continues from there. One process only: under DDP the other ranks would never reach
        the save's barrier; there the periodic saves are what is kept."""
        if (trainer.world_size != 1 or self.dirpath is None or trainer.state.fn != "fit"
                or trainer.global_step in (0, self._saved_step) or isinstance(exception, DiskFull)):
            return  # (a full disk would refuse this save too: the last one stays)
        try:
            trainer.save_checkpoint(self._last_path())
        except Exception as err:  # noqa: BLE001 - the original error is the one to report
            log.warning("could not save %s after %s: %s", self._last_path(), type(exception).__name__, err)
            return
        log.warning("saved %s at step %d before stopping on %s: %s (kept for resuming: tools/train.py goes on "
                    "with --ckpt_path last, a comparison by running the same command again)",
                    self._last_path(), trainer.global_step, type(exception).__name__, exception)
