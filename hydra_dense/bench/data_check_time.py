"""Time the before-training file check (hydra_dense.data.preflight) on generated ADE20K-style pairs.

    python tools/data_check_time.py --pairs 20000 --folder /tmp/ade_like

Writes ``--pairs`` JPEG images (512x512) and PNG label maps once (kept for later runs), then times
:func:`~hydra_dense.data.preflight.pair_problems` over all of them, twice: the first pass may read
from disk, the second from the page cache. Prints files checked, seconds, and files per second.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from PIL import Image

from hydra_dense.data.preflight import pair_problems


def write_pairs(folder: Path, n: int, side: int) -> list[tuple[Path, Path]]:
    images, masks = folder / "images", folder / "annotations"
    images.mkdir(parents=True, exist_ok=True)
    masks.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 255, (side, side, 3), dtype=np.uint8))
    mask = Image.fromarray(rng.integers(0, 150, (side, side), dtype=np.uint8))
    pairs = []
    for i in range(n):
        img, lab = images / f"ADE_{i:05d}.jpg", masks / f"ADE_{i:05d}.png"
        if not img.is_file():
            image.save(img, quality=90)
        if not lab.is_file():
            mask.save(lab)
        pairs.append((img, lab))
    return pairs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=20000)
    p.add_argument("--side", type=int, default=512)
    p.add_argument("--folder", default="/tmp/hydra_dense_data_check")
    args = p.parse_args()
    pairs = write_pairs(Path(args.folder), args.pairs, args.side)
    for attempt in ("first pass", "second pass"):
        t0 = time.perf_counter()
        problems = pair_problems(pairs)
        seconds = time.perf_counter() - t0
        print(f"{attempt}: {2 * len(pairs)} files checked in {seconds:.1f} s ({2 * len(pairs) / seconds:.0f} files/s), "
              f"{len(problems)} problem(s)")

