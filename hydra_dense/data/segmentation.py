"""Semantic-segmentation datasets in the standard on-disk layouts, and their LightningDataModule.

Layouts (``layout`` init arg; ``root`` points at the dataset):

- ``ade20k``: ``images/{training,validation}/*.jpg`` + ``annotations/{training,validation}/*.png``
  (label 0 = "other"; ``reduce_zero_label: true`` maps 0 -> ignore and k -> k-1, as mmseg does).
- ``cityscapes``: ``leftImg8bit/{train,val}/<city>/*_leftImg8bit.png`` +
  ``gtFine/{train,val}/<city>/*_gtFine_labelTrainIds.png`` (19 classes, 255 = ignore).
- ``folders``: ``<image_dir>/{split}/*`` + ``<mask_dir>/{split}/*`` matched by file stem
  (defaults ``img_dir`` / ``ann_dir``, mmseg's generic layout), optionally restricted to the
  stems listed in ``<root>/<split_file>`` (``{split}`` is replaced by the split name).

Every problem names the file or setting at fault. ``skip_bad: true`` skips unreadable or
invalid samples instead, counting and reporting them.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, Optional, Sequence, Union

import numpy as np
import torch
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2

from .base import SplitDataModule
from .files import IMAGE_EXTS, files_under, read_image
from .normalisation import IMAGENET_MEAN, IMAGENET_STD
from .preflight import pair_problems
from .skipping import SkipPolicy

log = logging.getLogger(__name__)

__all__ = ["SegmentationDataset", "SegmentationDataModule", "SampleError", "find_pairs", "collate_segmentation"]



class SampleError(ValueError):
    """A sample that cannot be used (unreadable, sizes differ, labels out of range)."""


@dataclass(frozen=True)
class _Layout:
    image_dir: str
    mask_dir: str
    image_suffix: str
    mask_suffix: str
    splits: dict


LAYOUTS = {
    "ade20k": _Layout("images/{split}", "annotations/{split}", ".jpg", ".png",
                      {"train": "training", "val": "validation", "test": "validation"}),
    "cityscapes": _Layout("leftImg8bit/{split}", "gtFine/{split}", "_leftImg8bit.png", "_gtFine_labelTrainIds.png",
                          {"train": "train", "val": "val", "test": "test"}),
}


def find_pairs(root: Path, layout: str, split: str, image_dir: str = "img_dir/{split}",
               mask_dir: str = "ann_dir/{split}", image_suffix: str = "", mask_suffix: str = "",
               split_file: Optional[str] = None) -> list[tuple[Path, Path]]:
    """(image, mask) paths of one split, with errors naming a missing folder; an image without its
    mask keeps the path its mask should have (the pre-check lists every one, ``skip_bad`` skips them)."""
    if layout in LAYOUTS:
        lay = LAYOUTS[layout]
        split_name = lay.splits.get(split, split)
        image_dir, mask_dir = lay.image_dir, lay.mask_dir
        image_suffix, mask_suffix = image_suffix or lay.image_suffix, mask_suffix or lay.mask_suffix
    elif layout == "folders":
        split_name = split
    else:
        raise ValueError(f"unknown layout {layout!r}; choose from ade20k, cityscapes, folders")
    img_root = root / image_dir.format(split=split_name)
    mask_root = root / mask_dir.format(split=split_name)
    for what, folder in (("image", img_root), ("mask", mask_root)):
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(f"{layout} {split} split: {what} folder {folder} is a file, not a folder")
        if not folder.is_dir():
            raise FileNotFoundError(f"{layout} {split} split: {what} folder {folder} does not exist")
    images = files_under(img_root, [image_suffix] if image_suffix else IMAGE_EXTS)
    wanted = None
    if split_file:
        list_path = root / split_file.format(split=split)
        if not list_path.is_file():
            raise FileNotFoundError(f"split list {list_path} does not exist")
        wanted = {line.strip() for line in list_path.read_text().splitlines() if line.strip()}
    masks_by_stem = None
    pairs = []
    for img in images:
        rel = img.relative_to(img_root)
        stem = str(rel)[: -len(image_suffix)] if image_suffix else str(rel.with_suffix(""))
        if wanted is not None and stem not in wanted and Path(stem).name not in wanted:
            continue
        if mask_suffix:
            mask = mask_root / f"{stem}{mask_suffix}"
        else:
            if masks_by_stem is None:
                masks_by_stem = {str(p.relative_to(mask_root).with_suffix("")): p
                                 for p in files_under(mask_root, IMAGE_EXTS)}
            mask = masks_by_stem.get(stem, mask_root / f"{stem}.png")
        pairs.append((img, mask))  # a missing mask is listed by the pre-check with the other problems
    if wanted is not None:
        found = {str(img.relative_to(img_root))[: -len(image_suffix)] if image_suffix
                 else str(img.relative_to(img_root).with_suffix("")) for img, _ in pairs}
        missing = sorted(w for w in wanted if w not in found and w not in {Path(f).name for f in found})
        if missing:
            raise FileNotFoundError(f"split list {root / split_file.format(split=split)} names {len(missing)} "
                                    f"image(s) not in {img_root}: {', '.join(missing[:10])}"
                                    f"{' ...' if len(missing) > 10 else ''}")
    if not pairs:
        where = f" (restricted by {split_file.format(split=split)})" if split_file else ""
        raise ValueError(f"{layout} {split} split is empty: no images in {img_root}{where}")
    return pairs


class SegmentationDataset(SkipPolicy, Dataset):
    """(image, mask) pairs -> ``(image (3, H, W) float, mask (H, W) int64)`` after ``transform``.

    Labels: ``reduce_zero_label`` maps 0 -> ``ignore_index`` and k -> k-1; any label that is not
    in ``[0, num_classes)`` and not ``ignore_index`` is an error naming the file and the ids.
    """

    def __init__(self, pairs: Sequence[tuple[Path, Path]], num_classes: int, transform=None,
                 reduce_zero_label: bool = False, ignore_index: int = 255, skip_bad: bool = False,
                 label_map: Optional[dict[int, int]] = None) -> None:
        self.pairs = list(pairs)
        self.num_classes, self.transform = num_classes, transform
        self.reduce_zero_label, self.ignore_index = reduce_zero_label, ignore_index
        self.label_map = label_map
        self.init_skipping(skip_bad)

    def __len__(self) -> int:
        return len(self.pairs)

    def file_problems(self) -> tuple[list[str], int]:
        """Every pair's headers checked (:func:`~hydra_dense.data.preflight.pair_problems`); files checked."""
        return pair_problems(self.pairs), 2 * len(self.pairs)

    def load(self, i: int) -> tuple[tv_tensors.Image, tv_tensors.Mask]:
        img_path, mask_path = self.pairs[i]
        try:
            img = read_image(img_path)
        except Exception as err:
            raise SampleError(f"cannot read image {img_path}: {err}") from err
        try:
            mask = read_image(mask_path, mode=None)
        except Exception as err:
            raise SampleError(f"cannot read mask {mask_path}: {err}") from err
        if mask.ndim == 3:
            raise SampleError(f"mask {mask_path} has {mask.shape[2]} channels; expected a single-channel label map")
        if mask.shape != img.shape[:2]:
            raise SampleError(f"image {img_path} is {img.shape[1]}x{img.shape[0]} but mask {mask_path} is "
                              f"{mask.shape[1]}x{mask.shape[0]}")
        mask = mask.astype(np.int64)
        if self.label_map:
            out = np.full_like(mask, self.ignore_index)
            for src, dst in self.label_map.items():
                out[mask == src] = dst
            mask = out
        if self.reduce_zero_label:
            mask = np.where(mask == 0, self.ignore_index, mask - 1)
            mask[mask == self.ignore_index - 1] = self.ignore_index
        bad = np.unique(mask[(mask != self.ignore_index) & ((mask < 0) | (mask >= self.num_classes))])
        if bad.size:
            raise SampleError(f"mask {mask_path} has label ids {bad[:10].tolist()} outside [0, {self.num_classes}) "
                              f"that are not ignore_index={self.ignore_index} (wrong num_classes or reduce_zero_label?)")
        return (tv_tensors.Image(torch.from_numpy(img.copy()).permute(2, 0, 1)),
                tv_tensors.Mask(torch.from_numpy(mask)))

    def __getitem__(self, i: int):
        sample = self.load_or_skip(i, (SampleError,))
        if sample is None:
            return None
        img, mask = sample
        if self.transform is not None:
            img, mask = self.transform(img, mask)
        return img, mask, i


def collate_segmentation(batch, ignore_index: int = 255):
    """Pad images (0) and masks (``ignore_index``) to the largest size in the batch.

    Returns ``images (B, 3, H, W)``, ``masks (B, H, W)``, ``pad (B, H, W)`` bool (True = padding)
    and the dataset indices; skipped samples (None) are dropped.
    """
    batch = [b for b in batch if b is not None]
    if not batch:
        return None
    H = max(b[0].shape[-2] for b in batch)
    W = max(b[0].shape[-1] for b in batch)
    imgs = torch.zeros(len(batch), batch[0][0].shape[0], H, W, dtype=batch[0][0].dtype)
    masks = torch.full((len(batch), H, W), ignore_index, dtype=torch.int64)
    pad = torch.ones(len(batch), H, W, dtype=torch.bool)
    for j, (img, mask, _) in enumerate(batch):
        h, w = img.shape[-2:]
        imgs[j, :, :h, :w] = img
        masks[j, :h, :w] = mask
        pad[j, :h, :w] = False
    return imgs, masks, pad, torch.tensor([b[2] for b in batch])


class SegmentationDataModule(SplitDataModule):
    """Segmentation data in ADE20K / Cityscapes / generic-folder layouts.

    Args:
        root: dataset folder. layout: ``ade20k``, ``cityscapes`` or ``folders``.
        num_classes: classes counted after ``reduce_zero_label``. ignore_index: label to ignore.
        crop_size: training crop ``(h, w)`` (padded with ignore where the image is smaller).
        scale_range: random resize range relative to ``base_size`` (mmseg: 0.5–2.0).
        base_size: ``(h, w)`` the random resize is relative to (ADE20K recipe: 512x2048).
        val_size: resize validation images so the short side is this (None: original size).
        class_names: optional names for the per-class tables (else ``classes.json`` in root).
        predict_files: inputs for ``predict`` instead of the test split: folders (recursive),
            globs or files, unlabeled, any size; unreadable ones are named, skipped and counted.
        max_image_pixels: PIL's decompression-bomb limit for the predict files (None: PIL's, about
            179 megapixels; a larger file is skipped naming its size and this option).
    """

    provides = "segmentation"

    def __init__(
        self,
        root: str,
        layout: Literal["ade20k", "cityscapes", "folders"] = "ade20k",
        num_classes: int = 150,
        reduce_zero_label: bool = False,
        ignore_index: int = 255,
        crop_size: tuple[int, int] = (512, 512),
        base_size: Optional[tuple[int, int]] = None,
        scale_range: tuple[float, float] = (0.5, 2.0),
        hflip: bool = True,
        photometric: bool = True,
        val_size: Optional[int] = None,
        batch_size: int = 8,
        val_batch_size: int = 1,
        num_workers: int = 2,
        image_dir: str = "img_dir/{split}",
        mask_dir: str = "ann_dir/{split}",
        image_suffix: str = "",
        mask_suffix: str = "",
        split_file: Optional[str] = None,
        train_split: str = "train",
        val_split: str = "val",
        test_split: Optional[str] = None,
        skip_bad: bool = False,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
        class_names: Optional[list[str]] = None,
        limit_train: Optional[int] = None,
        predict_files: Union[str, list[str], None] = None,
        max_image_pixels: Optional[int] = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.check_loader_settings()
        self.root = self.dataset_root(root)
        if layout not in ("ade20k", "cityscapes", "folders"):
            raise ValueError(f"data.layout: unknown layout {layout!r}; choose from ade20k, cityscapes, folders")
        if num_classes < 1:
            raise ValueError(f"data.num_classes must be >= 1, got {num_classes}")
        self.num_classes, self.ignore_index = num_classes, ignore_index
        self.class_names = class_names or self._read_class_names()
        self.datasets: dict[str, SegmentationDataset] = {}

    def _read_class_names(self) -> list[str]:
        path = self.root / "classes.json"
        if not path.is_file():
            return [f"class_{i}" for i in range(self.num_classes)]
        try:
            meta = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: not valid JSON ({err})") from None
        names = meta.get("classes") if isinstance(meta, dict) else meta
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{path}: expected a list of class names or {{\"classes\": [...]}}, "
                             f"got {type(names).__name__}")
        if self.hparams.reduce_zero_label and len(names) == self.num_classes + 1:
            names = names[1:]  # label 0 ("other") is ignored, the rest shift down
        if len(names) != self.num_classes:
            raise ValueError(f"{path} names {len(names)} classes but data.num_classes={self.num_classes}"
                             f"{' (reduce_zero_label: true)' if self.hparams.reduce_zero_label else ''}")
        return names

    def _pairs(self, split: str):
        h = self.hparams
        return find_pairs(self.root, h.layout, split, h.image_dir, h.mask_dir, h.image_suffix, h.mask_suffix,
                          h.split_file)

    def train_transform(self) -> v2.Compose:
        h = self.hparams
        crop = tuple(h.crop_size)
        base = tuple(h.base_size) if h.base_size else crop
        steps = [v2.ScaleJitter(target_size=base, scale_range=tuple(h.scale_range), antialias=True),
                 v2.RandomCrop(crop, pad_if_needed=True, fill={tv_tensors.Image: 0, tv_tensors.Mask: h.ignore_index})]
        if h.hflip:
            steps.append(v2.RandomHorizontalFlip())
        if h.photometric:
            steps.append(v2.RandomPhotometricDistort(p=0.5))
        return v2.Compose(steps + self._to_float())

    def _to_float(self) -> list:
        return [v2.ToDtype({tv_tensors.Image: torch.float32, tv_tensors.Mask: torch.int64}, scale=True),
                v2.Normalize(self.hparams.mean, self.hparams.std)]

    def eval_transform(self) -> v2.Compose:
        steps = [v2.Resize(self.hparams.val_size, antialias=True)] if self.hparams.val_size else []
        return v2.Compose(steps + self._to_float())

    def _dataset(self, split: str, train: bool) -> SegmentationDataset:
        h = self.hparams
        return SegmentationDataset(self._pairs(split), h.num_classes,
                                   self.train_transform() if train else self.eval_transform(),
                                   h.reduce_zero_label, h.ignore_index, h.skip_bad)

    def setup(self, stage: Optional[str] = None) -> None:
        h = self.hparams
        if stage in (None, "fit") and "train" not in self.datasets:
            self.datasets["train"] = self._dataset(h.train_split, train=True)
            if h.limit_train:
                self.datasets["train"].pairs = self.datasets["train"].pairs[: h.limit_train]
        if stage in (None, "fit", "validate") and "val" not in self.datasets:
            self.datasets["val"] = self._dataset(h.val_split, train=False)
        if stage in (None, "test", "predict") and "test" not in self.datasets:
            self.datasets["test"] = self._dataset(h.test_split or h.val_split, train=False)
        self.check_files(stage)

    def collate_fn(self):
        return partial(collate_segmentation, ignore_index=self.hparams.ignore_index)
