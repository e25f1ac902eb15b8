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


class _AtNthSave(L.Callback):
    """Calls :meth:`strike` when the ``n``-th checkpoint is about to be written."""

    def __init__(self, n: int = 2) -> None:
        self.n, self.count = n, 0

    def on_save_checkpoint(self, trainer, pl_module, checkpoint) -> None:
        self.count += 1
        if self.count == self.n:
            self.strike()

    def strike(self) -> None:
        raise NotImplementedError


class KillDuringSave(_AtNthSave):
    """SIGKILL in the middle of writing the ``n``-th checkpoint: half of its bytes are on disk."""

    def strike(self) -> None:
        real_save = torch.save

        def half_then_die(obj, f, *args, **kwargs):
            import io

            buf = io.BytesIO()
            real_save(obj, buf, *args, **kwargs)
            data = buf.getvalue()
            f.write(data[: len(data) // 2])
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        torch.save = half_then_die


class DiskFullDuringSave(_AtNthSave):
    """The ``n``-th checkpoint meets a full disk half-way, as torch's zip writer reports one: a
    RuntimeError raised while handling ``OSError(ENOSPC)``; images written after it fail likewise."""

    def strike(self) -> None:
        import errno

        from PIL import Image

        def full(*args, **kwargs):
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError:
                raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 742016 vs 741908")

        torch.save = full
        Image.Image.save = full


class SignalAt(L.Callback):
    """Send ``sig`` to this process at the start of global step ``step`` (mid-step, like a
    scheduler's warning signal would)."""

    def __init__(self, step: int, sig: str = "SIGUSR1") -> None:
        self.step, self.sig = step, sig

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), getattr(signal, self.sig))

