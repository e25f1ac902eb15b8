"""Training order and augmentation randomness that survive restarts, workers and world sizes.

Two pieces make a training run resumable to the bit:

- :class:`ResumableSampler` - a ``DistributedSampler`` (so Lightning leaves it in place under DDP;
  one replica without DDP) whose permutation depends only on ``(seed, epoch)``, which can skip the
  batches a resumed run has already trained on, and which yields ``(index, sample_seed)`` pairs.
- :class:`SeededSamples` - wraps a dataset; draws each sample's augmentation from torch, numpy and
  Python RNGs seeded with ``sample_seed`` and restores the caller's RNG state afterwards.

So a sample's augmentation is a function of ``(seed, epoch, index)`` alone: the same whatever the
number of data-loader workers or processes, and the same after a restart in the middle of an epoch;
the global RNG (dropout, drop-path, mixup, detector sampling) is never touched by data loading.
"""
from __future__ import annotations

import contextlib
import os
import random
from typing import Iterator, Optional

import numpy as np
import torch
from torch.utils.data import Dataset, DistributedSampler

__all__ = ["ResumableSampler", "SeededSamples", "seeded_rngs", "global_seed", "sample_seed"]

_MASK = (1 << 63) - 1


def global_seed() -> int:
    """The seed of ``seed_everything`` (Lightning exports it as ``PL_GLOBAL_SEED``), else 0."""
    try:
        return int(os.environ.get("PL_GLOBAL_SEED", 0))
    except ValueError:
        return 0


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for one sample of one epoch (SplitMix64-style mixing of the three)."""
    x = (seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + index * 0x94D049BB133111EB) & _MASK
    x ^= x >> 31
    x = (x * 0xD6E8FEB86659FD93) & _MASK
    return x ^ (x >> 29)


@contextlib.contextmanager
def seeded_rngs(seed: int):
    """Seed torch (CPU), numpy and Python's ``random`` for a block; restore all three after it."""
    torch_state, np_state, py_state = torch.get_rng_state(), np.random.get_state(), random.getstate()
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
    random.seed(seed)
    try:
        yield
    finally:
        torch.set_rng_state(torch_state)
        np.random.set_state(np_state)
        random.setstate(py_state)


class SeededSamples(Dataset):
    """``dataset`` indexed by ``(index, sample_seed)``: the sample is built under :func:`seeded_rngs`.

    Plain integer indices pass through unseeded.
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, key):
        if isinstance(key, tuple):
            index, seed = key
            with seeded_rngs(seed):
                return self.dataset[index]
        return self.dataset[key]


class ResumableSampler(DistributedSampler):
    """Shuffled (or not) order of one rank, fixed by ``(seed, epoch)``; yields ``(index, sample_seed)``.

    ``resume(epoch, batches, batch_size)`` makes the next iteration over ``epoch`` start after the
    first ``batches`` batches of this rank (the ones a checkpoint already trained on). ``len`` stays
    the full epoch so the trainer's batch counters keep their meaning; only the iterator is shorter.

    Args:
        dataset: sized dataset. num_replicas / rank: the process group (1 / 0 without DDP).
        shuffle: random permutation per epoch (else dataset order). seed: base of the permutation and
            of the per-sample seeds. drop_last: as ``DistributedSampler`` (drop the tail instead of
            repeating samples to even out the ranks).
    """

    def __init__(self, dataset: Dataset, num_replicas: int = 1, rank: int = 0, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed,
                         drop_last=drop_last)
        self._resume: Optional[tuple[int, int]] = None  # (epoch, samples of this rank to skip)

    def resume(self, epoch: int, batches: int, batch_size: int) -> None:
        self._resume = (int(epoch), int(batches) * int(batch_size))

    def __iter__(self) -> Iterator[tuple[int, int]]:  # type: ignore[override]
        indices = list(super().__iter__())
        if self._resume is not None:
            epoch, skip = self._resume
            self._resume = None
            if epoch == self.epoch:
                indices = indices[skip:]
        return iter([(i, sample_seed(self.seed, self.epoch, i)) for i in indices])
