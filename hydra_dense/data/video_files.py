"""Which videos a split has, in the three layouts the video data module reads: class folders of
video files (``kinetics``) or of frame folders (``frames``), and list files (``list``: ``path
label`` lines or CSV)."""
from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Optional

from .video_decode import VideoError

log = logging.getLogger(__name__)

__all__ = ["VIDEO_EXTS", "find_videos"]

VIDEO_EXTS = (".mp4", ".avi", ".mkv", ".webm", ".mov", ".m4v")


def _folder_videos(root: Path, layout: str, split: str, classes: Optional[list[str]],
                   ignored: Optional[list[Path]]) -> tuple[list[tuple[Path, int]], list[str]]:
    """``kinetics`` / ``frames``: ``<root>/<split>/<class>/<video file or frame folder>``."""
    split_dir = root / split
    if not split_dir.is_dir():
        raise FileNotFoundError(f"{layout} {split} split: folder {split_dir} does not exist")
    if classes is None:
        train_dir = root / "train"
        classes = sorted(p.name for p in (train_dir if train_dir.is_dir() else split_dir).iterdir() if p.is_dir())
    samples, skipped = [], []
    for class_dir in sorted(p for p in split_dir.iterdir() if p.is_dir()):
        if class_dir.name not in classes:
            raise VideoError(f"{split_dir}: class folder {class_dir.name!r} is not one of the "
                             f"{len(classes)} training classes")
        label = classes.index(class_dir.name)
        for item in sorted(class_dir.iterdir()):
            if (layout == "kinetics" and item.suffix.lower() in VIDEO_EXTS) or (layout == "frames" and item.is_dir()):
                samples.append((item, label))
            elif not item.name.startswith("."):
                skipped.append(item)
    if skipped:  # e.g. .mpg / .flv containers, or stray files: say so instead of training on fewer
        log.warning("%s: %d file(s) ignored (not a %s), e.g. %s", split_dir, len(skipped),
                    "video: " + ", ".join(sorted(VIDEO_EXTS)) if layout == "kinetics" else "frame folder",
                    ", ".join(str(p.relative_to(split_dir)) for p in skipped[:3]))
        if ignored is not None:
            ignored.extend(skipped)
    return samples, classes


def _list_rows(path: Path) -> list[tuple[str, str, int]]:
    """``(path, label, line number)`` of a list file (``path label`` lines, or CSV with an optional
    header); ``#`` comments and blank lines skipped."""
    text = path.read_text()
    dialect = "," if path.suffix == ".csv" or ("," in text.splitlines()[0] if text.strip() else False) else None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = next(csv.reader([line])) if dialect else line.rsplit(maxsplit=1)
        parts = [p.strip() for p in parts if p.strip() != ""]
        if len(parts) < 2:
            raise VideoError(f"{path}:{n}: expected 'path label', got {line!r}")
        if n == 1 and dialect and not parts[-1].lstrip("-").isdigit() and parts[0].lower() in ("path", "video", "file"):
            continue  # CSV header
        rows.append((parts[0], parts[-1], n))
    if not rows:
        raise VideoError(f"list file {path} lists no videos")
    return rows


def _listed_videos(root: Path, split: str, list_file: str, video_dir: str,
                   classes: Optional[list[str]]) -> tuple[list[tuple[Path, int]], list[str]]:
    """``list``: ``<root>/<list_file>`` lines of a video path (under ``video_dir``) and a label
    (an index, or a class name)."""
    path = root / list_file.format(split=split)
    if not path.is_file():
        raise FileNotFoundError(f"list file {path} does not exist")
    rows = _list_rows(path)
    names = [lab for _, lab, _ in rows if not lab.lstrip("-").isdigit()]
    if classes is None:
        classes = sorted(set(names)) if names else [str(i) for i in range(max(int(lab) for _, lab, _ in rows) + 1)]
    samples = []
    for rel, lab, n in rows:
        if lab.lstrip("-").isdigit():
            label = int(lab)
            if not 0 <= label < len(classes):
                raise VideoError(f"{path}:{n}: label {label} outside [0, {len(classes)})")
        elif lab in classes:
            label = classes.index(lab)
        else:
            raise VideoError(f"{path}:{n}: unknown class {lab!r} (known: {', '.join(classes[:10])}"
                             f"{'…' if len(classes) > 10 else ''})")
        samples.append((root / video_dir / rel, label))
    return samples, classes


def find_videos(root: Path, layout: str, split: str, list_file: str = "{split}.txt", video_dir: str = "",
                classes: Optional[list[str]] = None,
                ignored: Optional[list[Path]] = None) -> tuple[list[tuple[Path, int]], list[str]]:
    """(path, label) pairs of a split and the class names; ``ignored``, when given, receives the
    files in class folders that the layout does not read (they are also logged)."""
    if layout in ("kinetics", "frames"):
        samples, classes = _folder_videos(root, layout, split, classes, ignored)
    elif layout == "list":
        samples, classes = _listed_videos(root, split, list_file, video_dir, classes)
    else:
        raise ValueError(f"data.layout: unknown layout {layout!r}; choose from kinetics, list, frames")
    if not samples:
        raise ValueError(f"{layout} {split} split under {root} is empty")
    return samples, list(classes)
