"""Callbacks that make a training run fail on purpose, for the fault-tolerance tests (used by
``class_path`` from subprocess runs of tools/train.py)."""
import os
import signal

import lightning as L
import torch


class KillAt(L.Callback):
    """SIGKILL this process (no cleanup, no atexit) after global step ``step`` - on rank ``rank``."""

    def __init__(self, step: int, rank: int = 0, sig: str = "SIGKILL") -> None:
        self.step, self.rank, self.sig = step, rank, sig

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step and trainer.global_rank == self.rank:
            os.kill(os.getpid(), getattr(signal, self.sig))


class RaiseAt(L.Callback):
    """Raise an exception at global step ``step`` on rank ``rank`` only."""

    def __init__(self, step: int, rank: int = 1) -> None:
        self.step, self.rank = step, rank

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step and trainer.global_rank == self.rank:
            raise RuntimeError(f"injected failure on rank {self.rank} at step {self.step}")


class NaNLossAt(L.Callback):
    """Turn the loss into NaN at global step ``step`` (on rank ``rank``), by poisoning one weight
    for that step only and restoring it afterwards."""

    def __init__(self, step: int, rank: int = 0) -> None:
        self.step, self.rank = step, rank
        self._saved = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step and trainer.global_rank == self.rank:
            p = next(pl_module.parameters())
            self._saved = p.detach().clone()
            with torch.no_grad():
                p.fill_(float("nan"))

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if self._saved is not None:
            with torch.no_grad():
                next(pl_module.parameters()).copy_(self._saved)
            self._saved = None
