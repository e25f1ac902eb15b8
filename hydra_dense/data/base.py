"""What every hydra_dense data module shares: split datasets in ``self.datasets``, their loaders."""
from __future__ import annotations

import logging
from typing import Callable

import lightning as L
import torch
from torch.utils.data import DataLoader

__all__ = ["SplitDataModule", "SkipCounter"]


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


class SkipCounter:
    """``skip_bad`` for datasets: :meth:`load_or_skip` calls ``self.load(i)`` and, when it raises
    one of ``errors``, re-raises — or with ``skip_bad`` logs it, counts it (shared with data-loader
    workers) and returns None, which the collate functions drop."""

    def init_skipping(self, skip_bad: bool) -> None:
        import multiprocessing

        self.skip_bad = skip_bad
        self._skipped = multiprocessing.Value("i", 0)

    @property
    def skipped(self) -> int:
        return self._skipped.value

    def load_or_skip(self, i: int, errors: tuple[type[BaseException], ...]):
        try:
            return self.load(i)  # type: ignore[attr-defined]
        except errors as err:
            if not self.skip_bad:
                raise
            with self._skipped.get_lock():
                self._skipped.value += 1
            logging.getLogger(type(self).__module__).warning("skipping sample %d: %s", i, err)
            return None
