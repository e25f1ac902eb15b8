"""Tiny image data on disk: ADE20K-layout scenes of coloured rectangles, smooth unlabeled images."""
from pathlib import Path

import numpy as np
from PIL import Image

from hydra_dense.backbones import ViT


COLOURS = [(230, 40, 40), (40, 230, 40), (40, 40, 230)]


def scene(rng, size=32):
    """Background + up to 3 coloured rectangles; class = colour index + 1."""
    img = np.full((size, size, 3), 20, np.uint8)
    mask = np.zeros((size, size), np.uint8)
    for c in rng.permutation(3)[: rng.integers(1, 4)]:
        y, x = rng.integers(0, size - 10, 2)
        h, w = rng.integers(6, 14, 2)
        img[y:y + h, x:x + w] = COLOURS[c]
        mask[y:y + h, x:x + w] = c + 1
    return img, mask


def write(path: Path, arr, fmt=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, format=fmt)


def make_ade(root: Path, n_train=24, n_val=8, size=32, zero_label=False):
    rng = np.random.default_rng(0)
    for split, n in (("training", n_train), ("validation", n_val)):
        for i in range(n):
            img, mask = scene(rng, size)
            if zero_label:
                mask = mask + 1  # ADE20K: 0 = "other", real classes from 1
            write(root / "images" / split / f"ADE_{i:04d}.jpg", img)
            write(root / "annotations" / split / f"ADE_{i:04d}.png", mask)
    return root


def tiny_backbone(**kw):
    kw.setdefault("out_indices", [0, 1])
    return ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=4, img_size=32, **kw)


def make_images(folder, n=12, seed=0):
    """Smooth colour fields with a few blobs (structure for attention to find), various sizes."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        h, w = rng.integers(36, 60, 2)
        yy, xx = np.mgrid[0:h, 0:w]
        img = rng.uniform(0, 255, 3) * (xx / w)[..., None] + rng.normal(0, 10, (h, w, 3))
        for _ in range(3):
            cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(4, 10)
            img[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = rng.uniform(0, 255, 3)
        sub = folder / ("nested" if i % 3 == 0 else ".")
        sub.mkdir(exist_ok=True)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(sub / f"img_{i:02d}.png")
    return folder


def assert_drawn(path: Path, min_side: int = 100, min_colours: int = 8) -> None:
    """``path`` is an image of at least ``min_side`` pixels a side with at least ``min_colours``
    distinct colours: something was drawn on it (a blank or one-colour canvas fails)."""
    with Image.open(path) as im:
        rgb = np.asarray(im.convert("RGB"))
    assert min(rgb.shape[:2]) >= min_side, f"{path}: {rgb.shape[1]}x{rgb.shape[0]} pixels"
    colours = len(np.unique(rgb.reshape(-1, 3), axis=0))
    assert colours >= min_colours, f"{path}: only {colours} colours"
