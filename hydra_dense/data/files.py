"""Image files: which extensions count, how one is read, and the inputs of ``predict``.

``read_image`` is the one reader of image files for training, evaluation and prediction.
``predict`` takes a folder (recursive), a glob or a list of files, any size; each input gets an
output name: its path relative to the inputs' common folder, without the suffix (``a/b/img001``),
so predictions land next to each other as the inputs did.
"""
from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import torch
from PIL import Image, ImageOps
from torch.utils.data import Dataset

from .skipping import SkipPolicy

__all__ = ["IMAGE_EXTS", "read_image", "PredictInputs", "find_predict_files", "ImageFiles", "collate_image_files"]

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")

_GLOB_CHARS = set("*?[")


def find_predict_files(spec: Union[str, Sequence[str]], extensions: Sequence[str],
                       key: str = "data.predict_files", folders_as_files: bool = False) -> list[Path]:
    """Files named by ``spec``: folders (searched recursively for ``extensions``, any case), globs
    (``**`` recursive) and plain files, in order, without repeats.

    ``folders_as_files``: a folder that holds no file of ``extensions`` is itself one input (a
    video stored as a folder of frames). An entry that matches nothing is an error naming it.
    """
    entries = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    if not entries:
        raise ValueError(f"{key}: no inputs given")
    exts = tuple(e.lower() for e in extensions)
    found: list[Path] = []
    for entry in entries:
        text = os.path.expanduser(str(entry))
        if _GLOB_CHARS & set(text):
            matches = [Path(p) for p in sorted(glob.glob(text, recursive=True))]
            matches = [p for p in matches if (p.is_file() and p.suffix.lower() in exts) or
                       (folders_as_files and p.is_dir())]
        else:
            path = Path(text)
            if path.is_dir():
                matches = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in exts)
                if not matches and folders_as_files:
                    matches = sorted(p for p in path.iterdir() if p.is_dir()) or [path]
            elif path.is_file():
                matches = [path]
            else:
                raise FileNotFoundError(f"{key}: {path} does not exist")
        if not matches:
            raise ValueError(f"{key}: {entry} holds no input files ({', '.join(exts)})")
        found.extend(matches)
    return list(dict.fromkeys(p.resolve() for p in found))


class PredictInputs:
    """Input files and their output names (relative to the inputs' common folder, no suffix)."""

    def __init__(self, files: Sequence[Path]) -> None:
        self.files = [Path(f) for f in files]
        parents = [str(f.parent) for f in self.files]
        self.base = Path(os.path.commonpath(parents)) if parents else Path(".")
        self.names = [str(f.relative_to(self.base).with_suffix("")) for f in self.files]


class ImageFiles(SkipPolicy, Dataset):
    """Image files -> ``(image (3, H, W) uint8, index)`` at their own size, EXIF-upright, RGB.

    Unreadable files are named in the log, skipped and counted (``skipped``); uint8 keeps a large
    image small until the model normalises the window it is looking at.
    """

    def __init__(self, files: Sequence[Path]) -> None:
        self.inputs = PredictInputs(files)
        self.files = self.inputs.files
        self.init_skipping(skip_bad=True)

    def __len__(self) -> int:
        return len(self.files)

    def load(self, i: int) -> torch.Tensor:
        try:
            array = read_image(self.files[i])
        except Exception as err:  # noqa: BLE001 - any failure to decode is an unreadable file
            raise OSError(f"cannot read image {self.files[i]}: {err}") from err
        return torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1)

    def __getitem__(self, i: int):
        image = self.load_or_skip(i, (OSError,))
        return None if image is None else (image, i)


def collate_image_files(batch) -> dict | None:
    """``[(image, index)]`` -> ``{"images": [(3, H_i, W_i) uint8], "index": (B,)}``; skipped
    files dropped; None when all were."""
    batch = [b for b in batch if b is not None]
    if not batch:
        return None
    return {"images": [b[0] for b in batch], "index": torch.tensor([b[1] for b in batch])}


SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I")


def read_image(path, mode: Optional[str] = "RGB") -> np.ndarray:
    """An image file as an array, turned upright by its EXIF orientation (phone photos are stored
    sideways with a tag saying so), converted to ``mode`` (None keeps it: label maps).

    A 16-bit grey image (microscopy, depth) becomes RGB scaled by 255 / 65535 (PIL's own conversion
    would clip every value above 255 to white)."""
    with Image.open(path) as im:
        im = ImageOps.exif_transpose(im)
        if mode == "RGB" and im.mode in SIXTEEN_BIT_MODES:
            grey = (np.asarray(im).astype(np.float32) * (255.0 / 65535.0)).round().clip(0, 255).astype(np.uint8)
            return np.repeat(grey[..., None], 3, axis=2)
        return np.array(im.convert(mode) if mode else im)  # a copy: writable, so torch.from_numpy takes it
