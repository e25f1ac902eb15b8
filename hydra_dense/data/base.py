"""What every hydra_dense data module shares: split datasets in ``self.datasets``, their loaders."""
from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from .files import IMAGE_EXTS, ImageFiles, collate_image_files, find_predict_files
from .preflight import DataFilesError, report_problems
from .sampling import ResumableSampler, SeededSamples, global_seed

try:  # not re-exported at the top level; this path holds for lightning 2.4-2.6 (setup.cfg's range)
    from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSampler
except ImportError as err:  # pragma: no cover - a lightning outside the tested range
    raise ImportError(f"hydra_dense needs lightning's UnrepeatedDistributedSampler, which lightning {L.__version__} "
                      "does not have at lightning.pytorch.overrides.distributed; install lightning>=2.4,<2.7") from err

log = logging.getLogger(__name__)

__all__ = ["SplitDataModule"]


class SplitDataModule(L.LightningDataModule):
    """Loaders over ``self.datasets["train" | "val" | "test"]`` (filled by ``setup``).

    Subclasses give ``collate_fn`` and the hparams ``batch_size``, ``val_batch_size`` and
    ``num_workers``. Worker loaders carry a timeout, so a stuck worker fails loudly instead of
    hanging the job.

    Distributed and resumable: training draws its order from a :class:`ResumableSampler` (one
    shard per rank, order fixed by ``(seed, epoch)``, per-sample augmentation seeds); evaluation
    shards without repeating samples (``UnrepeatedDistributedSampler``), so metrics synchronised
    across ranks count every sample exactly once. :meth:`state_dict` stores how far the current
    epoch got, so ``--ckpt_path`` resumes mid-epoch at the next unseen batch.
    """

    datasets: dict
    # what its batches are for ("segmentation", "detection", "video", "images"): a task checks it
    # before anything runs, instead of failing on the first batch's shape
    provides: str = ""
    _resume_position: Optional[dict] = None
    _train_sampler: Optional[ResumableSampler] = None

    def collate_fn(self) -> Callable:
        raise NotImplementedError

    def check_loader_settings(self) -> None:
        """At construction: batch sizes of at least 1, no negative worker count, each named."""
        for name in ("batch_size", "val_batch_size"):
            value = getattr(self.hparams, name, None)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"data.{name} must be an integer >= 1, got {value!r}")
        workers = getattr(self.hparams, "num_workers", 0)
        if not isinstance(workers, int) or workers < 0:
            raise ValueError(f"data.num_workers must be an integer >= 0, got {workers!r}")

    @staticmethod
    def dataset_root(root: str | Path) -> Path:
        """``data.root`` as a path (``~`` expanded); an error naming it when it is not a folder."""
        path = Path(root).expanduser()
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(f"data.root: {path} is a file, not a dataset folder")
        if not path.is_dir():
            raise FileNotFoundError(f"data.root: dataset folder {path} does not exist")
        return path

    def _world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return trainer.world_size, trainer.global_rank

    def _seed(self) -> int:
        """The data module's own ``seed`` hparam where it has one, else ``seed_everything``'s."""
        seed = getattr(self.hparams, "seed", None)
        return global_seed() if seed is None else int(seed)

    def _loader(self, dataset: Dataset, batch_size: int, sampler, train: bool,
                collate: Optional[Callable] = None) -> DataLoader:
        workers = self.hparams.num_workers
        # the loader's own generator: creating an iterator must not consume the global RNG
        # (that would shift dropout masks after a resume)
        return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=workers,
                          collate_fn=collate or self.collate_fn(), drop_last=train, persistent_workers=workers > 0,
                          pin_memory=torch.cuda.is_available(), timeout=600 if workers > 0 else 0,
                          generator=torch.Generator().manual_seed(self._seed()))

    def train_dataloader(self) -> DataLoader:
        world, rank = self._world()
        dataset = self.datasets["train"]
        sampler = ResumableSampler(dataset, world, rank, shuffle=True, seed=self._seed())
        position = self._resume_position
        if position:
            self._resume_position = None
            if (position.get("world_size"), position.get("batch_size")) != (world, self.hparams.batch_size):
                log.warning("resuming with world size %d / batch size %d, the checkpoint had %s / %s: the rest of "
                            "epoch %s will not be the same samples as in the interrupted run", world,
                            self.hparams.batch_size, position.get("world_size"), position.get("batch_size"),
                            position["epoch"])
            # the epoch is set here, not only by the trainer's set_epoch: with workers the loader
            # draws its first indices as soon as its iterator exists, which can be before that call
            sampler.set_epoch(position["epoch"])
            sampler.resume(position["epoch"], position["batches"], self.hparams.batch_size)
        self._train_sampler = sampler
        return self._loader(SeededSamples(dataset), self.hparams.batch_size, sampler, train=True)

    def _eval_sampler(self, dataset: Dataset) -> Optional[UnrepeatedDistributedSampler]:
        """One shard per rank, no sample repeated (None on one process)."""
        world, rank = self._world()
        return UnrepeatedDistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False) \
            if world > 1 else None

    def _eval_loader(self, key: str) -> DataLoader:
        dataset = self.datasets[key]
        return self._loader(dataset, self.hparams.val_batch_size, self._eval_sampler(dataset), train=False)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def predict_dataloader(self) -> DataLoader:
        """The test split's loader, or with ``predict_files`` set, those files (one at a time:
        they can be of any size), each file read by exactly one rank."""
        files = getattr(self.hparams, "predict_files", None)
        if not files:
            return self.test_dataloader()
        if "predict" not in self.datasets:
            self.datasets["predict"] = self.predict_files_dataset(files)
        dataset = self.datasets["predict"]
        return self._loader(dataset, self.predict_batch_size, self._eval_sampler(dataset), train=False,
                            collate=self.predict_collate_fn())

    predict_batch_size = 1

    def predict_files_dataset(self, files) -> Dataset:
        """Images named by ``predict_files`` (folders, globs, files) at their own size."""
        return ImageFiles(find_predict_files(files, IMAGE_EXTS), getattr(self.hparams, "max_image_pixels", None))

    def predict_collate_fn(self) -> Callable:
        return collate_image_files

    def state_dict(self) -> dict:
        """Position in the training epoch, saved in checkpoints (from the trainer's own counters:
        the loader runs one batch ahead of the training step)."""
        trainer = getattr(self, "trainer", None)
        if trainer is None or self._train_sampler is None or trainer.state.fn != "fit":
            return {}
        done, epoch = int(trainer.fit_loop.epoch_loop.batch_progress.current.processed), self._train_sampler.epoch
        if done >= trainer.num_training_batches:  # after the epoch's last batch: resume at the next epoch
            epoch, done = epoch + 1, 0
        return {"train_position": dict(epoch=epoch, batches=done, world_size=trainer.world_size,
                                       batch_size=self.hparams.batch_size)}

    def load_state_dict(self, state_dict: dict) -> None:
        self._resume_position = state_dict.get("train_position")
        if self._resume_position:
            # Lightning warns that a plain DataLoader cannot resume mid-epoch; this module does
            warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that ended before the epoch")

    _checked_splits: Optional[set] = None

    def check_files(self, stage: Optional[str]) -> None:
        """Before anything runs: every file of the splits ``stage`` reads (their datasets'
        ``file_problems()``: headers only), all problems reported at once naming the files
        (:func:`~hydra_dense.data.preflight.report_problems`); and a training split that gives each
        rank at least one full batch (the last incomplete one is dropped). Each split is checked once."""
        splits = {None: ("train", "val", "test"), "fit": ("train", "val"), "validate": ("val",),
                  "test": ("test",)}.get(stage, ())
        self._checked_splits = self._checked_splits or set()
        todo = [s for s in splits if s in self.datasets and s not in self._checked_splits
                and hasattr(self.datasets[s], "file_problems")]
        trainer = getattr(self, "trainer", None)
        if "train" in todo and trainer is not None and trainer.state.fn == "fit":  # about to train
            self._check_one_batch()
        if not todo:
            return
        t0, problems, checked = time.perf_counter(), [], 0
        for split in todo:
            found, count = self.datasets[split].file_problems()
            problems += [(split, text) for text in found]
            checked += count
        self._checked_splits.update(todo)
        report_problems(problems, checked, time.perf_counter() - t0, bool(getattr(self.hparams, "skip_bad", False)))

    def _check_one_batch(self) -> None:
        world, _ = self._world()
        size, batch = len(self.datasets["train"]), self.hparams.batch_size
        if size // world < batch:
            raise DataFilesError(f"data: the training split has {size} sample(s), fewer than one batch of "
                                 f"data.init_args.batch_size={batch} per process ({world} process(es)); the last "
                                 f"incomplete batch is dropped, so nothing would train. Lower batch_size or add data")

    def skipped_report(self) -> dict[str, int]:
        """Samples skipped per split (only with ``skip_bad``)."""
        return {k: d.skipped for k, d in self.datasets.items() if d.skipped}
