"""Random-number-generator state in checkpoints, restored right before the first resumed step."""
from __future__ import annotations

import random
from typing import Any, Optional

import lightning as L
import numpy as np
import torch

__all__ = ["RNGStateCheckpoint"]


class RNGStateCheckpoint(L.Callback):
    """Saves torch (CPU and CUDA), numpy and Python RNG states with every checkpoint.

    Restored at the first training batch after a resume, not at load time: between loading and
    that batch Lightning may run a sanity check or build loaders, and the uninterrupted run
    consumed nothing there (data loading never touches the global RNG, see data/sampling.py).
    So dropout / drop-path masks, mixup draws and the detectors' proposal sampling continue
    exactly where the interrupted run stopped.
    """

    def __init__(self) -> None:
        self._pending: Optional[dict[str, Any]] = None

    def state_dict(self) -> dict[str, Any]:
        # plain tensors / ints only: LightningCLI reads checkpoints with torch.load(weights_only=True)
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        state = {"torch": torch.get_rng_state(), "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos),
                                                          int(has_gauss), float(gauss)],
                 "python": random.getstate()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if self._pending is None:
            return
        state, self._pending = self._pending, None
        torch.set_rng_state(state["torch"])
        kind, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
        random.setstate(state["python"])
        if "cuda" in state and torch.cuda.is_available():
            cuda = state["cuda"]
            if len(cuda) == torch.cuda.device_count():
                torch.cuda.set_rng_state_all(cuda)
