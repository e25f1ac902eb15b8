"""Image files: which extensions count, how one is read, and the inputs of ``predict``.

``read_image`` is the one reader of image files for training, evaluation and prediction.
``predict`` takes a folder (recursive), a glob or a list of files, any size; each input gets an
output name: its path relative to the inputs' common folder, without the suffix (``a/b/img001``;
with it where two inputs share a stem), so predictions land next to each other as the inputs did.
"""
from __future__ import annotations

import glob
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch
from PIL import Image, ImageOps
from torch.utils.data import Dataset

from .skipping import SkipPolicy

__all__ = ["files_under", "IMAGE_EXTS", "IMAGE_MODES", "ImageModeError", "mode_problem", "read_image", "PredictInputs",
           "find_predict_files", "ImageFiles", "Unreadable", "collate_image_files", "pil_pixel_limit"]

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")

_GLOB_CHARS = set("*?[")


def files_under(folder: Path, suffixes: Sequence[str] = ()) -> list[Path]:
    """Every file under ``folder`` (sorted), symlinked subfolders followed (each real folder once, so
    a link cycle ends), ending in one of ``suffixes`` (any case; all files when empty). A folder named
    like an image (``s3.png/``) is not a file and is not listed; a link to nothing is."""
    wanted = tuple(s.lower() for s in suffixes)
    found, seen = [], set()
    for here, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(here)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        found += [Path(here) / f for f in files if not wanted or f.lower().endswith(wanted)]
    # a broken link stays listed: it is a file the user put there, named by the checks, not dropped unseen
    return sorted(p for p in found if p.is_file() or (p.is_symlink() and not p.exists()))


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
                matches = files_under(path, exts)
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
    """Input files and their output names: the path relative to the inputs' common folder without
    the suffix (``a/b/img001``), or with it where two inputs would otherwise share a name
    (``a.jpg`` and ``a.png`` give ``a.jpg`` and ``a.png``), so that no output overwrites another."""

    def __init__(self, files: Sequence[Path]) -> None:
        self.files = [Path(f) for f in files]
        parents = [str(f.parent) for f in self.files]
        self.base = Path(os.path.commonpath(parents)) if parents else Path(".")
        relative = [f.relative_to(self.base) for f in self.files]
        stems = [str(r.with_suffix("")) for r in relative]
        shared = {s for s in stems if stems.count(s) > 1}
        self.names = [str(r) if s in shared else s for r, s in zip(relative, stems)]


class Unreadable(NamedTuple):
    """A predict input that could not be read: its index and why (listed in ``summary.json``)."""

    index: int
    reason: str


class ImageFiles(SkipPolicy, Dataset):
    """Image files -> ``(image (3, H, W) uint8, index)`` at their own size, EXIF-upright, RGB.

    Unreadable files are named in the log, skipped and counted (``skipped``), and come out as
    :class:`Unreadable` with the reason; uint8 keeps a large image small until the model normalises
    the window it is looking at. ``max_image_pixels``: PIL's decompression-bomb limit for these
    files (None: PIL's own, about 179 megapixels; a larger image is refused with its size named).
    """

    def __init__(self, files: Sequence[Path], max_image_pixels: Optional[int] = None) -> None:
        self.inputs = PredictInputs(files)
        self.files = self.inputs.files
        self.max_image_pixels = max_image_pixels
        self.init_skipping(skip_bad=True)

    def __len__(self) -> int:
        return len(self.files)

    def load(self, i: int) -> torch.Tensor:
        limit = int(self.max_image_pixels) if self.max_image_pixels else Image.MAX_IMAGE_PIXELS
        try:
            with pil_pixel_limit(limit):
                array = read_image(self.files[i])
        except Image.DecompressionBombError as err:
            raise OSError(f"image {self.files[i]} is larger than PIL reads by default ({err}); set "
                          f"data.init_args.max_image_pixels to read it") from err
        except Exception as err:  # noqa: BLE001 - any failure to decode is an unreadable file
            raise OSError(f"cannot read image {self.files[i]}: {err}") from err
        return torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1)

    def __getitem__(self, i: int):
        try:
            return self.load(i), i
        except OSError as err:
            self.count_skip(i, err)
            return Unreadable(i, str(err))


def collate_image_files(batch) -> dict:
    """``[(image, index) | Unreadable]`` -> ``{"images": [(3, H_i, W_i) uint8], "index": (B,),
    "unreadable": [Unreadable]}``."""
    read = [b for b in batch if b is not None and not isinstance(b, Unreadable)]
    return {"images": [b[0] for b in read], "index": torch.tensor([b[1] for b in read], dtype=torch.long),
            "unreadable": [b for b in batch if isinstance(b, Unreadable)]}


SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I")
# what read_image turns into RGB (16-bit grey scaled by 255 / 65535), for training and predict alike;
# others (32-bit float "F", "LAB", "HSV") have no one scale or colour meaning to assume
IMAGE_MODES = {"1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", *SIXTEEN_BIT_MODES}


class ImageModeError(ValueError):
    """An image stored in a mode the readers do not convert to RGB."""


def mode_problem(path, mode: str) -> Optional[str]:
    """Why an image of ``mode`` cannot be read as RGB, naming ``path``; None when it can."""
    if mode in IMAGE_MODES:
        return None
    hint = " (32-bit float: scale it to 8 or 16 bits first)" if mode == "F" else ""
    return (f"image {path} has mode {mode}, not one the readers convert to RGB{hint}; accepted: "
            f"{', '.join(sorted(IMAGE_MODES))}")


@contextmanager
def pil_pixel_limit(limit: Optional[int]) -> Iterator[None]:
    """PIL's decompression-bomb limit set to ``limit`` pixels (None: no limit) inside the block and
    restored after it: the limit is one value for the whole process, and every other reader keeps
    its protection."""
    previous = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = limit
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = previous


def read_image(path, mode: Optional[str] = "RGB") -> np.ndarray:
    """An image file as an array, turned upright by its EXIF orientation (phone photos are stored
    sideways with a tag saying so), converted to ``mode`` (None keeps it: label maps).

    A 16-bit grey image (microscopy, depth) becomes RGB scaled by 255 / 65535 (PIL's own conversion
    would clip every value above 255 to white). Other modes than :data:`IMAGE_MODES` raise
    :class:`ImageModeError` naming the mode, in training and predict alike."""
    with Image.open(path) as im:
        if mode == "RGB" and (problem := mode_problem(path, im.mode)):
            raise ImageModeError(problem)
        im = ImageOps.exif_transpose(im)
        if mode == "RGB" and im.mode in SIXTEEN_BIT_MODES:
            grey = (np.asarray(im).astype(np.float32) * (255.0 / 65535.0)).round().clip(0, 255).astype(np.uint8)
            return np.repeat(grey[..., None], 3, axis=2)
        return np.array(im.convert(mode) if mode else im)  # a copy: writable, so torch.from_numpy takes it
