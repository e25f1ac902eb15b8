"""What every hydra_dense data module shares: split datasets in ``self.datasets``, their loaders."""
from __future__ import annotations

from typing import Callable

import lightning as L
import torch
from torch.utils.data import DataLoader

__all__ = ["SplitDataModule"]


class SplitDataModule(L.LightningDataModule):
    """Loaders over ``self.datasets["train" | "val" | "test"]`` (filled by ``setup``).

    Subclasses give ``collate_fn`` and the hparams ``batch_size``, ``val_batch_size`` and
    ``num_workers``. Worker loaders carry a timeout, so a stuck worker fails loudly instead of
    hanging the job.
    """

    datasets: dict

    def collate_fn(self) -> Callable:
        raise NotImplementedError

    def _loader(self, key: str, shuffle: bool, batch_size: int) -> DataLoader:
        workers = self.hparams.num_workers
        return DataLoader(self.datasets[key], batch_size=batch_size, shuffle=shuffle, num_workers=workers,
                          collate_fn=self.collate_fn(), drop_last=shuffle, persistent_workers=workers > 0,
                          pin_memory=torch.cuda.is_available(), timeout=600 if workers > 0 else 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True, self.hparams.batch_size)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False, self.hparams.val_batch_size)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False, self.hparams.val_batch_size)

    def predict_dataloader(self) -> DataLoader:
        return self.test_dataloader()

    def skipped_report(self) -> dict[str, int]:
        """Samples skipped per split (only with ``skip_bad``)."""
        return {k: d.skipped for k, d in self.datasets.items() if d.skipped}
