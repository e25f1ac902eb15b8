"""Training throughput measured inside a real run: only the training batches are timed."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import lightning as L

__all__ = ["TrainClock"]


class TrainClock(L.Callback):
    """Times training batches (not start-up, validation or checkpointing) after ``skip`` warm-up
    batches; ``images`` counts this rank's samples. With ``out``, rank 0 writes
    ``{"seconds", "steps", "images_per_rank", "world_size", "images_per_s"}`` as JSON at the end
    (``images_per_s`` over all ranks: every rank runs the same number of equal batches)."""

    def __init__(self, skip: int = 0, out: Optional[str] = None) -> None:
        self.skip, self.out = skip, out
        self.seconds, self.images, self.steps, self._seen, self._t = 0.0, 0, 0, 0, 0.0

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        self._t = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        dt = time.perf_counter() - self._t
        self._seen += 1
        if self._seen <= self.skip or batch is None:
            return
        self.seconds += dt
        self.steps += 1
        # a tensor batch, a list of images (detection) or an OpenMMLab dict batch
        self.images += len(batch["inputs"] if isinstance(batch, dict) else batch[0])

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.out and trainer.is_global_zero:
            world = trainer.world_size
            Path(self.out).write_text(json.dumps(dict(
                seconds=self.seconds, steps=self.steps, images_per_rank=self.images, world_size=world,
                images_per_s=self.images * world / max(self.seconds, 1e-9))))
