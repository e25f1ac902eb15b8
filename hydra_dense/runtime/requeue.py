"""SLURM auto-requeue at a step boundary agreed by all ranks."""
from __future__ import annotations

import signal
from typing import Any, Optional

import lightning as L
from lightning.pytorch.plugins.environments import SLURMEnvironment

__all__ = ["StepBoundaryRequeue"]


def _cluster_environment(trainer: L.Trainer) -> Optional[Any]:
    """The run's cluster environment: public on multi-process strategies; a single-device run
    keeps it only on the trainer's accelerator connector (Lightning 2.4-2.6, tested), so a
    Lightning without it gets None (Lightning's own, undeferred requeue handler then applies)."""
    env = getattr(trainer.strategy, "cluster_environment", None)
    if env is None:
        env = getattr(getattr(trainer, "_accelerator_connector", None), "cluster_environment", None)
    return env


class StepBoundaryRequeue(L.Callback):
    """Defers Lightning's SLURM requeue handler (save ``hpc_ckpt_N.ckpt``, ``scontrol requeue``) to
    the end of a training step.

    Lightning runs that handler inside the signal handler, wherever the main thread happens to
    be: in the middle of an optimizer step (half the parameters updated) or of a collective (its
    checkpoint barrier then deadlocks or pairs with the wrong all-reduce). Here the signal only
    sets a flag; at each step end the ranks agree (one tiny all-reduce) and all save together,
    then the run stops. A resume from that checkpoint is exact like any other.
    """

    def __init__(self) -> None:
        self._handler: Optional[Any] = None
        self._signal: Optional[int] = None
        self._requested = False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        env = _cluster_environment(trainer)
        if not (isinstance(env, SLURMEnvironment) and env.auto_requeue and env.requeue_signal is not None):
            return
        self._signal = env.requeue_signal
        self._handler = signal.getsignal(self._signal)
        if not callable(self._handler):
            self._handler = None
            return
        signal.signal(self._signal, self._flag)

    def _flag(self, signum: int, frame: Any) -> None:
        self._requested = True

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self._handler is None:
            return
        if trainer.strategy.reduce_boolean_decision(self._requested, all=False):
            self._requested = False
            self._handler(self._signal, None)  # Lightning's: checkpoint + scontrol requeue on rank 0
            trainer.should_stop = True

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._handler is not None and self._signal is not None:
            signal.signal(self._signal, self._handler)
            self._handler = None
