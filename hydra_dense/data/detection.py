"""Object detection / instance segmentation data: COCO json or Pascal-VOC XML, transforms v2.

Layouts (``format`` init arg):

- ``coco``: ``<root>/<train_json>`` + images in ``<root>/<train_images>`` (defaults are COCO 2017's
  ``annotations/instances_train2017.json`` and ``train2017/``; same for val). Boxes, polygon and
  RLE masks, ``iscrowd``; category ids are mapped to contiguous labels ``1..K`` in id order.
- ``voc``: ``<root>/Annotations/*.xml`` + ``<root>/JPEGImages/`` restricted to the ids listed in
  ``<root>/ImageSets/Main/{split}.txt`` (the VOC devkit layout; ``voc_*`` args change the folders).

Samples are ``(image (3, H, W) float in [0, 1], target dict, index)``; the target holds
``boxes (N, 4)`` xyxy, ``labels (N,)``, ``iscrowd (N,)``, ``image_id`` and, with ``masks: true``,
``masks (N, H, W)`` uint8. Normalisation and batch padding are the detector's job (its transform
knows the image sizes and hands the padding mask to the backbone). Training drops crowd /
difficult instances (torchvision's detectors have no ignore regions); evaluation keeps them, and
the COCO metric ignores them.
"""
from __future__ import annotations

import logging
import random
from typing import Any, Literal, Optional, Union

import numpy as np
import PIL.Image
import torch
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from .base import SplitDataModule
from .files import read_image
from .skipping import SkipPolicy
from .preflight import sized_image_problems
from .detection_formats import CocoAnnotations, ImageRecord, decode_segmentation, read_coco, read_voc
from .segmentation import SampleError

log = logging.getLogger(__name__)

__all__ = ["DetectionDataset", "DetectionDataModule", "RandomCropUpTo", "collate_detection"]


class RandomCropUpTo(v2.Transform):
    """Random ``size x size`` crop, or the whole side where the image is smaller (no padding:
    the detector pads batches itself and masks the padding out of attention).

    ``min_visible``: a box with less than this fraction of its area left inside the crop is made
    empty, so the ``SanitizeBoundingBoxes`` after it drops it (with its label and mask) — for
    small objects, slivers cut by the crop edge otherwise teach the model that image borders are
    objects."""

    def __init__(self, size: int, min_visible: float = 0.0) -> None:
        super().__init__()
        self.size = int(size)
        self.min_visible = float(min_visible)

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        # the inputs this transform acts on: images (tv_tensor, plain tensor or PIL), masks, boxes (their canvas)
        sizes = {tuple(TF.get_size(x)) for x in flat_inputs if type(x) is torch.Tensor or isinstance(
            x, (tv_tensors.Image, tv_tensors.Video, tv_tensors.Mask, tv_tensors.BoundingBoxes, PIL.Image.Image))}
        if len(sizes) != 1:
            raise ValueError(f"RandomCropUpTo: expected one image size among the inputs, got {sorted(sizes)}")
        h, w = sizes.pop()
        ch, cw = min(self.size, h), min(self.size, w)
        return dict(top=random.randint(0, h - ch), left=random.randint(0, w - cw), height=ch, width=cw)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        out = TF.crop(inpt, **params)  # dispatches on the tv_tensor type (boxes keep their canvas)
        if self.min_visible > 0 and isinstance(inpt, tv_tensors.BoundingBoxes) and len(inpt):
            xyxy = TF.convert_bounding_box_format(inpt, new_format=tv_tensors.BoundingBoxFormat.XYXY)
            before = (xyxy[:, 2] - xyxy[:, 0]) * (xyxy[:, 3] - xyxy[:, 1])
            cut = TF.convert_bounding_box_format(out, new_format=tv_tensors.BoundingBoxFormat.XYXY)
            after = (cut[:, 2] - cut[:, 0]).clamp_min(0) * (cut[:, 3] - cut[:, 1]).clamp_min(0)
            hidden = after < self.min_visible * before
            if hidden.any():
                out = out.clone()
                out[hidden] = 0  # zero-size: SanitizeBoundingBoxes removes it
        return out


class DetectionDataset(SkipPolicy, Dataset):
    """:class:`ImageRecord` list -> ``(image, target, index)`` after ``transform``.

    ``train`` drops crowd instances. Unreadable images or annotations that disagree with the image
    raise :class:`SampleError` naming the file, or are skipped and counted with ``skip_bad``."""

    def __init__(self, records: list[ImageRecord], transform=None, train: bool = False, masks: bool = False,
                 skip_bad: bool = False, source: str = "its annotations") -> None:
        self.records, self.transform, self.train, self.masks = records, transform, train, masks
        self.source = source
        self.init_skipping(skip_bad)

    def __len__(self) -> int:
        return len(self.records)

    def file_problems(self) -> tuple[list[str], int]:
        """Every listed image exists, reads, and has the size ``source`` gives it; files checked."""
        return sized_image_problems(((r.path, r.width, r.height) for r in self.records), self.source), len(self.records)

    def load(self, i: int) -> tuple[tv_tensors.Image, dict]:
        rec = self.records[i]
        try:
            img = read_image(rec.path)
        except Exception as err:
            raise SampleError(f"cannot read image {rec.path}: {err}") from err
        H, W = img.shape[:2]
        if (W, H) != (rec.width, rec.height):
            raise SampleError(f"image {rec.path} is {W}x{H} but its annotation says {rec.width}x{rec.height}")
        keep = ~rec.iscrowd if self.train else np.ones(len(rec.labels), bool)
        target: dict[str, Any] = dict(
            boxes=tv_tensors.BoundingBoxes(torch.from_numpy(rec.boxes[keep]).reshape(-1, 4), format="XYXY",
                                           canvas_size=(H, W)),
            labels=torch.from_numpy(rec.labels[keep]), iscrowd=torch.from_numpy(rec.iscrowd[keep]),
            image_id=rec.image_id)
        if self.masks:
            segs = [s for s, k in zip(rec.segmentations or [], keep) if k]
            try:
                m = np.stack([decode_segmentation(s, H, W) for s in segs]) if segs else np.zeros((0, H, W), np.uint8)
            except Exception as err:
                raise SampleError(f"cannot decode the masks of image {rec.path} (id {rec.image_id}): {err}") from err
            if m.shape[1:] != (H, W):
                raise SampleError(f"masks of image {rec.path} are {m.shape[2]}x{m.shape[1]}, the image is {W}x{H}")
            target["masks"] = tv_tensors.Mask(torch.from_numpy(m))
        return tv_tensors.Image(torch.from_numpy(img.copy()).permute(2, 0, 1)), target

    def __getitem__(self, i: int):
        sample = self.load_or_skip(i, (SampleError,))
        if sample is None:
            return None
        img, target = sample
        if self.transform is not None:
            img, target = self.transform(img, target)
        target["boxes"] = target["boxes"].as_subclass(torch.Tensor)
        if "masks" in target:
            target["masks"] = target["masks"].as_subclass(torch.Tensor)
        return img.as_subclass(torch.Tensor), target, i


def collate_detection(batch):
    """Lists of images ``(3, H_i, W_i)``, targets and indices (torchvision detectors take lists);
    skipped samples (None) are dropped; None when all were."""
    batch = [b for b in batch if b is not None]
    if not batch:
        return None
    images, targets, idx = zip(*batch)
    return list(images), list(targets), torch.tensor(idx)


class DetectionDataModule(SplitDataModule):
    """COCO-json or VOC-XML detection data with torchvision.transforms.v2 augmentation.

    Args:
        root: dataset folder. format: ``coco`` or ``voc``.
        train_json / val_json / test_json, train_images / val_images / test_images: COCO files and
            image folders, relative to ``root`` (test defaults to val).
        masks: load instance masks (Mask R-CNN). num_classes: if given, checked against the data.
        train_size: training scale. With ``lsj`` (ViTDet's large-scale jitter) the image is
            resized to ``train_size * U(scale_range)`` (longest side) and randomly cropped to at most
            ``train_size`` (boxes with less than ``crop_min_visible`` of their area left in the crop
            are dropped; 0 keeps every box with any area, as detectron2); without it, the shortest side is resized to a random ``train_sizes``
            entry capped by ``train_max_size`` (None: images keep their size).
        hflip: random horizontal flip. photometric: colour jitter.
        voc_annotations / voc_images / voc_split_file: the VOC folders; ``{split}`` is replaced.
        voc_classes: VOC label order (default: every name found, sorted).
        skip_bad: skip unreadable samples (counted) instead of failing.
        predict_files: inputs for ``predict`` instead of the test split: folders (recursive),
            globs or files, unlabeled, any size; unreadable ones are named, skipped and counted.
        max_image_pixels: PIL's decompression-bomb limit for the predict files (None: PIL's, about
            179 megapixels; a larger file is skipped naming its size and this option).
    """

    provides = "detection"

    def __init__(
        self,
        root: str,
        format: Literal["coco", "voc"] = "coco",
        train_json: str = "annotations/instances_train2017.json",
        val_json: str = "annotations/instances_val2017.json",
        test_json: Optional[str] = None,
        train_images: str = "train2017",
        val_images: str = "val2017",
        test_images: Optional[str] = None,
        masks: bool = False,
        num_classes: Optional[int] = None,
        lsj: bool = False,
        train_size: int = 1024,
        crop_min_visible: float = 0.0,
        scale_range: tuple[float, float] = (0.1, 2.0),
        train_sizes: Optional[list[int]] = None,
        train_max_size: int = 1333,
        hflip: bool = True,
        vflip: bool = False,
        photometric: bool = False,
        voc_annotations: str = "Annotations",
        voc_images: str = "JPEGImages",
        voc_split_file: Optional[str] = "ImageSets/Main/{split}.txt",
        train_split: str = "train",
        val_split: str = "val",
        test_split: Optional[str] = None,
        voc_classes: Optional[list[str]] = None,
        batch_size: int = 2,
        val_batch_size: int = 1,
        num_workers: int = 2,
        skip_bad: bool = False,
        limit_train: Optional[int] = None,
        predict_files: Union[str, list[str], None] = None,
        max_image_pixels: Optional[int] = None,
    ) -> None:
        super().__init__()
        # num_classes is only checked here; kept out of hparams so an unset one does not clash with
        # the model's in Lightning's hparams merge (the model checks its own against the data)
        self.save_hyperparameters(ignore=["num_classes"])
        self.check_loader_settings()
        self.root = self.dataset_root(root)
        if format not in ("coco", "voc"):
            raise ValueError(f"data.format: unknown format {format!r}; choose coco or voc")
        self.datasets: dict[str, DetectionDataset] = {}
        self.annotations: dict[str, CocoAnnotations] = {}
        train = self._read("train")  # read now: label order, class names and errors before training
        self.category_ids, self.class_names = train.category_ids, train.class_names
        if num_classes is not None and num_classes != len(self.category_ids):
            raise ValueError(f"data.num_classes={num_classes} but {self._source('train')} defines "
                             f"{len(self.category_ids)} categories: {self.class_names[:10]}")

    @property
    def num_classes(self) -> int:
        return len(self.category_ids)

    def _source(self, split: str) -> str:
        h = self.hparams
        if h.format == "voc":
            return str(self.root / h.voc_annotations)
        return str(self.root / {"train": h.train_json, "val": h.val_json, "test": h.test_json or h.val_json}[split])

    def _read(self, split: str) -> CocoAnnotations:
        if split in self.annotations:
            return self.annotations[split]
        h = self.hparams
        known = self.annotations["train"].category_ids if "train" in self.annotations else None
        if h.format == "coco":
            images = {"train": h.train_images, "val": h.val_images, "test": h.test_images or h.val_images}[split]
            if not (self.root / images).is_dir():
                raise FileNotFoundError(f"data.{split}_images: image folder {self.root / images} does not exist")
            ann = read_coco(self._source(split), self.root / images, with_masks=h.masks, category_ids=known)
        else:
            if h.masks:
                raise ValueError("data.masks: VOC XML has no instance masks; use format: coco for Mask R-CNN")
            name = {"train": h.train_split, "val": h.val_split, "test": h.test_split or h.val_split}[split]
            ann_dir = self.root / h.voc_annotations
            if not ann_dir.is_dir():
                raise FileNotFoundError(f"data.voc_annotations: folder {ann_dir} does not exist")
            if h.voc_split_file:
                list_path = self.root / h.voc_split_file.format(split=name)
                if not list_path.is_file():
                    raise FileNotFoundError(f"data.voc_split_file: {list_path} does not exist")
                ids = [s.strip() for s in list_path.read_text().split() if s.strip()]
                xmls = [ann_dir / f"{i}.xml" for i in ids]
                absent = [str(x) for x in xmls if not x.is_file()]
                if absent:
                    raise FileNotFoundError(f"{list_path} lists ids without an XML file: {absent[:5]}")
            else:
                xmls = sorted(ann_dir.glob("*.xml"))
            names = h.voc_classes or (self.annotations["train"].class_names if known else None)
            ann = read_voc(xmls, self.root / h.voc_images if h.voc_images else None, names)
        if not ann.records:
            raise ValueError(f"{self._source(split)}: the {split} split has no images")
        self.annotations[split] = ann
        return ann

    def data_report(self) -> str:
        """What the readers clipped, dropped and kept, per split."""
        return "\n".join(a.report.summary() for a in self.annotations.values())

    def train_transform(self) -> v2.Compose:
        h = self.hparams
        if h.lsj:
            steps = [v2.ScaleJitter((h.train_size, h.train_size), scale_range=tuple(h.scale_range), antialias=True),
                     RandomCropUpTo(h.train_size, h.crop_min_visible)]
        elif h.train_sizes:
            steps = [v2.RandomShortestSize(list(h.train_sizes), max_size=h.train_max_size, antialias=True)]
        else:
            steps = []
        if h.hflip:
            steps.append(v2.RandomHorizontalFlip())
        if h.vflip:
            steps.append(v2.RandomVerticalFlip())
        if h.photometric:
            steps.append(v2.RandomPhotometricDistort(p=0.5))
        return v2.Compose(steps + [v2.SanitizeBoundingBoxes(min_size=1), v2.ToDtype(torch.float32, scale=True)])

    def eval_transform(self) -> v2.Compose:
        return v2.Compose([v2.ToDtype(torch.float32, scale=True)])

    def setup(self, stage: Optional[str] = None) -> None:
        h = self.hparams
        if stage in (None, "fit") and "train" not in self.datasets:
            records = self._read("train").records
            if h.limit_train:
                records = records[: h.limit_train]
            if not any((~r.iscrowd).any() for r in records):  # training drops crowd boxes
                crowd = sum(int(r.iscrowd.sum()) for r in records)
                what = (f"every one of its {crowd} boxes is a crowd box (iscrowd: 1 / VOC difficult), which training "
                        "ignores" if crowd else "none of them has a box")
                raise ValueError(f"{self._source('train')}: {len(records)} training images, and {what}; a detector "
                                 "would learn nothing (images without boxes may be mixed with ones that have some)")
            self.datasets["train"] = DetectionDataset(records, self.train_transform(), True, h.masks, h.skip_bad,
                                                      self._source("train"))
        if stage in (None, "fit", "validate") and "val" not in self.datasets:
            self.datasets["val"] = DetectionDataset(self._read("val").records, self.eval_transform(), False, h.masks,
                                                    h.skip_bad, self._source("val"))
        if stage in (None, "test", "predict") and "test" not in self.datasets:
            self.datasets["test"] = DetectionDataset(self._read("test").records, self.eval_transform(), False,
                                                     h.masks, h.skip_bad, self._source("test"))
        self.check_files(stage)

    def collate_fn(self):
        return collate_detection
