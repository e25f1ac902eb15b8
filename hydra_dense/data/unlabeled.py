"""Unlabeled images for label-free stages (backbone conversion): folders of any images, or the
training split of a task's data module with its labels never read.

Images of any size are read (EXIF orientation applied, converted to RGB) and cut into random
resized crops of ``crop_size`` — the crop size sets the token count, which matters to Hydra
(its global sum grows with the number of tokens). Validation crops are drawn the same way but
fixed per image, so every evaluation sees the same pixels.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Sequence, Union

import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision.transforms import v2

from .base import SplitDataModule
from .files import IMAGE_EXTS, read_image
from .skipping import SkipPolicy
from .sampling import seeded_rngs
from .normalisation import IMAGENET_MEAN, IMAGENET_STD
from .segmentation import SampleError

log = logging.getLogger(__name__)

__all__ = ["UnlabeledImageDataset", "UnlabeledImageDataModule", "find_images", "collate_unlabeled"]


def find_images(folder: Union[str, Path], key: str = "data.root") -> list[Path]:
    """Every image file (``IMAGE_EXTS``, any case) under ``folder``, recursively, sorted."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"{key}: image folder {path} does not exist")
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in IMAGE_EXTS and p.is_file())
    if not files:
        raise ValueError(f"{key}: no images ({', '.join(IMAGE_EXTS)}) under {path}")
    return files


class UnlabeledImageDataset(SkipPolicy, Dataset):
    """Image files -> ``(image (3, crop, crop) float, index)``.

    ``fixed_crops``: the random crop of image ``i`` is drawn from a generator seeded with ``i``
    (validation); otherwise from the caller's RNG (training, seeded per sample by the sampler).
    Unreadable files raise :class:`SampleError` naming the file, or with ``skip_bad`` are skipped
    and counted.
    """

    def __init__(self, files: Sequence[Path], transform, fixed_crops: bool = False, skip_bad: bool = False) -> None:
        self.files, self.transform, self.fixed_crops = list(files), transform, fixed_crops
        self.init_skipping(skip_bad)

    def __len__(self) -> int:
        return len(self.files)

    def load(self, i: int) -> Image.Image:
        path = self.files[i]
        try:
            return Image.fromarray(read_image(path))
        except Exception as err:
            raise SampleError(f"cannot read image {path}: {err}") from err

    def __getitem__(self, i: int):
        image = self.load_or_skip(i, (SampleError,))
        if image is None:
            return None
        if self.fixed_crops:
            with seeded_rngs(i):
                return self.transform(image), i
        return self.transform(image), i


def collate_unlabeled(batch):
    """``[(image, index)]`` -> ``images (B, 3, S, S)``, ``indices (B,)``; skipped samples dropped."""
    batch = [b for b in batch if b is not None]
    if not batch:
        return None
    return torch.stack([b[0] for b in batch]), torch.tensor([b[1] for b in batch])


class UnlabeledImageDataModule(SplitDataModule):
    """Unlabeled images for :class:`~hydra_dense.conversion.ConversionTask`.

    Args:
        root: folder(s) searched recursively for images (any size).
        val_root: held-out folder(s); without it, every ``val_every``-th image of ``root`` is held out.
        train_files: image files to train on, instead of or besides ``root`` (a caller's list: the
            training split of a task, see :class:`~hydra_dense.conversion.ConversionImages`);
            validation images come from ``val_root`` or are held out.
        crop_size: side of the square crops (sets the token count: ``(crop_size / patch)^2``).
        scale_range: area fraction of the image a crop covers before resizing (RandomResizedCrop).
        hflip: random horizontal flips for training crops.
        max_images: use at most this many training images (the first ones, sorted by path).
    """

    provides = "images"

    def __init__(
        self,
        root: Union[str, list[str], None] = None,
        val_root: Union[str, list[str], None] = None,
        train_files: Optional[Sequence[Union[str, Path]]] = None,
        crop_size: int = 224,
        scale_range: tuple[float, float] = (0.25, 1.0),
        hflip: bool = True,
        val_every: int = 10,
        max_images: Optional[int] = None,
        batch_size: int = 16,
        val_batch_size: int = 16,
        num_workers: int = 2,
        skip_bad: bool = False,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["train_files"])  # a list of every file: too long for hparams
        self.check_loader_settings()
        if root is None and not train_files:
            raise ValueError("data: give data.root (image folders), image files, or both")
        if crop_size < 1 or val_every < 2:
            raise ValueError(f"data: crop_size must be >= 1 and val_every >= 2, got {crop_size} and {val_every}")
        train = self._folders(root, "data.root") if root is not None else []
        self.listed_files = len(train_files or [])
        train += [Path(f) for f in train_files or []]
        if val_root is not None:
            val = self._folders(val_root, "data.val_root")
        else:
            val, train = train[::val_every], [f for i, f in enumerate(train) if i % val_every]
            if not train:
                raise ValueError(f"data: {len(val)} image(s) are too few to hold out every {val_every}-th one for "
                                 "validation; add images or give data.val_root")
        self.files = {"train": train[:max_images] if max_images else train, "val": val}
        self.datasets: dict[str, UnlabeledImageDataset] = {}

    @staticmethod
    def _folders(roots: Union[str, list[str]], key: str) -> list[Path]:
        return [f for r in ([roots] if isinstance(roots, str) else roots) for f in find_images(r, key)]

    def _transform(self) -> v2.Compose:
        h = self.hparams
        steps = [v2.PILToTensor(), v2.RandomResizedCrop(h.crop_size, scale=tuple(h.scale_range), antialias=True)]
        if h.hflip:
            steps.append(v2.RandomHorizontalFlip())
        return v2.Compose(steps + [v2.ToDtype(torch.float32, scale=True), v2.Normalize(h.mean, h.std)])

    def setup(self, stage: Optional[str] = None) -> None:
        for split, fixed in (("train", False), ("val", True)):
            if split not in self.datasets:
                self.datasets[split] = UnlabeledImageDataset(self.files[split], self._transform(), fixed,
                                                             self.hparams.skip_bad)
        self.datasets.setdefault("test", self.datasets["val"])

    def collate_fn(self):
        return collate_unlabeled

    def _listed_source(self) -> list[str]:
        return [f"{self.listed_files} listed files"] if self.listed_files else []

    def describe(self) -> str:
        """One line for tables: where the images come from and how many."""
        h = self.hparams
        source = " + ".join(([str(h.root)] if h.root is not None else []) + self._listed_source())
        return f"{source}: {len(self.files['train'])} train / {len(self.files['val'])} val images, crops {h.crop_size}px"

