"""Progress a person can read in a log file: one line every few steps instead of a progress bar
(whose carriage returns make one endless line in a file), and Lightning's known noise silenced."""
from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import lightning as L
from lightning.pytorch.utilities import rank_zero_only

__all__ = ["StepProgress", "silence_known_noise", "minutes"]


def minutes(seconds: float) -> str:
    """``75`` -> ``1.2 min``; ``4000`` -> ``1 h 07 min``."""
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


class StepProgress(L.Callback):
    """``[label] step 100/400 | 1.7 min | ETA 5.1 min`` every ``every`` optimizer steps (and at the
    last), and each validation's metrics as soon as they are known. Rank 0 only."""

    def __init__(self, label: str = "train", every: int = 50) -> None:
        self.label, self.every = label, max(1, int(every))
        self._t0, self._step0 = 0.0, 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._t0, self._step0 = time.time(), trainer.global_step

    @rank_zero_only
    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step, total = trainer.global_step, trainer.max_steps
        if step % self.every and step != total:
            return
        elapsed = time.time() - self._t0
        done = max(step - self._step0, 1)
        eta = f" | ETA {minutes(elapsed / done * (total - step))}" if total and total > 0 else ""
        print(f"[{self.label}] step {step}/{total if total and total > 0 else '?'} | {minutes(elapsed)}{eta}",
              flush=True)

    @rank_zero_only
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        shown = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val_") and v.numel() == 1}
        if shown:
            text = ", ".join(f"{k} {v:.3f}" for k, v in sorted(shown.items()))
            print(f"[{self.label}] step {trainer.global_step}: {text}", flush=True)


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip: For seamless cloud" not in record.getMessage()


def silence_known_noise() -> None:
    """Warnings and tips the toolkit's own entry points cause or cannot act on, silenced there (not
    on import): LightningCLI's advice against ``args=`` (the comparison passes arguments on
    purpose), Lightning's cloud-service tips, torch's ``LeafSpec`` deprecation inside Lightning, and
    Lightning's ``sync_dist`` advice (epoch metrics here come from torchmetrics states that are
    already all-reduced: syncing again would average identical values), and its warning that an
    epoch has fewer batches than the logging interval (the runs here are counted in steps, and
    logging follows the global step across epochs), and its note that a resumed attempt checkpoints
    into a new version folder (the attempt is logged there on purpose)."""
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended to run from within Python")
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")
    warnings.filterwarnings("ignore", message=r"It is recommended to use `self.log\('(val|test)_")
    warnings.filterwarnings("ignore", message=r"The number of training batches \(\d+\) is smaller than the logging")
    warnings.filterwarnings("ignore", message=r"The dirpath has changed from")
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropTips) for f in logger.filters):
            logger.addFilter(_DropTips())
