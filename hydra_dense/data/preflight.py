"""Checks every file of a split before training starts: each file exists, its header reads, its mode
is one the readers take, and an image agrees in size with its label map or annotation. Headers only (no pixel
is decoded), so the check stays cheap for ADE20K's 20k images; every problem is reported at once."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable, Optional, Sequence

from PIL import Image, UnidentifiedImageError

from .files import IMAGE_MODES, mode_problem

log = logging.getLogger(__name__)

__all__ = ["image_header", "pair_problems", "sized_image_problems", "file_problems", "report_problems",
           "DataFilesError", "IMAGE_MODES", "MASK_MODES"]

# what a label map may be (images: what read_image converts to RGB, files.IMAGE_MODES)
MASK_MODES = {"1", "L", "P", "I", "I;16", "I;16L", "I;16B"}
_EXIF_ORIENTATION = 0x0112
_EXIF_IN_HEADER = ("JPEG", "MPO", "TIFF", "WEBP")


class DataFilesError(ValueError):
    """Files of a dataset that cannot be read as they are, found before training."""


def image_header(path: Path) -> tuple[int, int, str]:
    """``(width, height, mode)`` of an image file, upright as :func:`~hydra_dense.data.files.read_image`
    turns it (EXIF orientations 5-8 swap the sides); raises ``OSError`` / ``ValueError`` when unreadable."""
    w, h, mode, _ = _header(path)
    return w, h, mode


def _header(path: Path) -> tuple[int, int, str, bool]:
    """:func:`image_header` and whether its EXIF orientation swapped the stored sides."""
    with Image.open(path) as im:
        w, h = im.size
        # EXIF sits in the header of these formats; a PNG's may follow the pixels, and asking for it
        # decodes the whole file (label maps are PNGs): 20x slower for nothing a camera wrote
        turned = im.format in _EXIF_IN_HEADER and im.getexif().get(_EXIF_ORIENTATION, 1) in (5, 6, 7, 8)
        return (h, w, im.mode, True) if turned else (w, h, im.mode, False)


def missing(path: Path, what: str) -> str:
    """``<what> <path> does not exist``; for a link, where it points."""
    if path.is_symlink():
        return f"{what} {path} is a link to {os.readlink(path)}, which does not exist"
    return f"{what} {path} does not exist"


def _header_or_problem(path: Path, what: str, modes: set[str]) -> tuple[Optional[tuple[int, int, bool]], Optional[str]]:
    """``((width, height, turned by EXIF), None)`` or ``(None, the problem)``."""
    if not path.is_file():
        return None, missing(path, what)
    try:
        w, h, mode, turned = _header(path)
    except Image.DecompressionBombError as err:  # a header claiming billions of pixels: damaged, or far too big
        return None, f"{what} {path} is too large to read: {err}"
    except (OSError, ValueError, UnidentifiedImageError) as err:
        return None, f"{what} {path} cannot be read ({type(err).__name__}: {err})"
    if what != "mask" and modes is IMAGE_MODES:
        problem = mode_problem(path, mode)
        if problem:
            return None, problem
    elif mode not in modes:
        return None, f"{what} {path} has mode {mode}, not a single-channel label map ({', '.join(sorted(modes))})"
    return (w, h, turned), None


def pair_problems(pairs: Iterable[tuple[Path, Path]]) -> list[str]:
    """Segmentation ``(image, mask)`` pairs: both readable, the mask single-channel, the sizes equal
    (the image upright by its EXIF tag, as it is read; a mask is never turned)."""
    problems = []
    for image, mask in pairs:
        size_i, problem_i = _header_or_problem(Path(image), "image", IMAGE_MODES)
        size_m, problem_m = _header_or_problem(Path(mask), "mask", MASK_MODES)
        problems += [p for p in (problem_i, problem_m) if p]
        if size_i and size_m and size_i[:2] != size_m[:2]:
            (wi, hi, turned), (wm, hm, _) = size_i, size_m
            if turned and (hi, wi) == (wm, hm):
                problems.append(f"image {image} is stored {hi}x{wi} like its mask {mask}, but its EXIF orientation tag "
                                f"turns it to {wi}x{hi} when read, and masks are not turned: save the image upright "
                                f"(or turn the mask to match)")
            else:
                problems.append(f"image {image} is {wi}x{hi} but mask {mask} is {wm}x{hm}")
    return problems


def sized_image_problems(images: Iterable[tuple[Path, int, int]], source: str) -> list[str]:
    """Images an annotation file lists with their size: readable, and the size it says."""
    problems = []
    for path, width, height in images:
        size, problem = _header_or_problem(Path(path), "image", IMAGE_MODES)
        if problem:
            problems.append(f"{problem} (listed in {source})")
        elif size[:2] != (width, height):
            problems.append(f"image {path} is {size[0]}x{size[1]} but {source} says {width}x{height}")
    return problems


def file_problems(paths: Iterable[Path], what: str) -> list[str]:
    """Files that must exist and not be empty (videos are then opened: data.video_decode.video_problem)."""
    problems = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            problems.append(missing(path, what))
        elif path.is_file() and path.stat().st_size == 0:
            problems.append(f"{what} {path} is empty (0 bytes)")
    return problems


def report_problems(problems: Sequence[tuple[str, str]], checked: int, seconds: float, skip_bad: bool) -> None:
    """``problems``: ``(split, text)``. Raise :class:`DataFilesError` listing them (the first 20 in
    full), or with ``skip_bad`` log them: those samples are skipped and counted when they come up."""
    if not problems:
        log.info("[data] %d files checked in %.1f s: all readable", checked, seconds)
        return
    shown = "\n".join(f"  {split}: {text}" for split, text in problems[:20])
    more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
    text = (f"data: {len(problems)} problem(s) in the dataset's files, found before training (of {checked} files "
            f"checked in {seconds:.1f} s):\n{shown}{more}")
    if skip_bad:
        log.warning("%s\nskip_bad is on: these samples are skipped and counted when they come up", text)
        return
    raise DataFilesError(text + "\nFix or remove them, or set data.init_args.skip_bad=true to skip them")
