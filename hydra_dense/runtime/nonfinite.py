"""Never train on NaN: stop with the step named, or skip the step and count it."""
from __future__ import annotations

from typing import Any, Literal

import lightning as L
import torch

__all__ = ["NonFiniteLossGuard", "NonFiniteLossError"]


class NonFiniteLossError(FloatingPointError):
    """Raised when a training loss or gradient is NaN / inf (``action: stop``), or too many were skipped."""


class NonFiniteLossGuard(L.Callback):
    """Checks every optimizer step's loss(es) and gradients before the weights are touched.

    Args:
        action: ``stop`` raises :class:`NonFiniteLossError` naming the global step, epoch and batch;
            ``skip`` drops the step (gradients cleared, so AdamW moves nothing and its moments stay),
            counts it (``train_nonfinite_skips`` in the logs) and stops after ``max_skips``.
        max_skips: skips allowed in one run (``skip`` only).

    The check runs after DDP's gradient all-reduce, and the loss flags of all ranks are combined,
    so every rank takes the same decision (a rank that alone skipped or stopped would hang the
    others). With fp16 and a gradient scaler, inf gradients are the scaler's business: only the
    loss is checked.
    """

    def __init__(self, action: Literal["stop", "skip"] = "stop", max_skips: int = 10) -> None:
        if action not in ("stop", "skip"):
            raise ValueError(f"nonfinite.action must be 'stop' or 'skip', got {action!r}")
        self.action, self.max_skips = action, max_skips
        self.skipped = 0
        self._bad_loss: list[float] = []

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        if not bool(torch.isfinite(loss.detach()).all()):
            self._bad_loss.append(float(loss.detach().float().mean()))

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: Any) -> None:
        bad_loss, self._bad_loss = self._bad_loss, []
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        bad_grad = False
        if scaler is None and params:
            bad_grad = not bool(torch.stack([torch.isfinite(p.grad).all() for p in params]).all())
        bad = trainer.strategy.reduce_boolean_decision(bool(bad_loss) or bad_grad, all=False)
        if not bad:
            return
        loop = trainer.fit_loop.epoch_loop
        where = f"global step {trainer.global_step} (epoch {trainer.current_epoch}, batch {loop.batch_idx})"
        what = f"loss {bad_loss[0]}" if bad_loss else "non-finite gradients" if bad_grad else "another rank's loss"
        if self.action == "stop":
            raise NonFiniteLossError(
                f"non-finite training {what} at {where}; stopping before the weights are updated. Lower the lr, "
                "prefer bf16-mixed over 16-mixed, check the data, or pass --nonfinite.action=skip to skip such "
                "steps (at most --nonfinite.max_skips).")
        self.skipped += 1
        if self.skipped > self.max_skips:
            raise NonFiniteLossError(f"non-finite training {what} at {where}: {self.skipped} steps skipped, more than "
                                     f"--nonfinite.max_skips={self.max_skips}; stopping.")
        for p in params:
            p.grad = None
        pl_module.print(f"[nonfinite] skipped {where}: {what} ({self.skipped} skipped so far)")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.action == "skip":
            pl_module.log("train_nonfinite_skips", float(self.skipped), reduce_fx="max", rank_zero_only=True)

    def state_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.skipped = int(state_dict.get("skipped", 0))
