"""What ``predict`` on files writes: per-file images, one table for the run, and a summary.

Every rank writes the files of its own inputs; the table rows (detections, video scores) and the
list of finished inputs are gathered to rank 0, which writes the table and ``summary.json``
(which inputs were predicted, which were skipped as unreadable).
"""
from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image

from ..data.files import PredictInputs
from ..drawing import colorize, palette
from ..runtime.atomic_file import atomic_save_image, atomic_write_text

log = logging.getLogger(__name__)

__all__ = ["PredictionOutputs", "save_label_png", "save_overlay", "top_k_row", "write_csv"]


def _gather(items: list) -> list:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        parts: list = [None] * dist.get_world_size()
        dist.all_gather_object(parts, items)
        return [x for part in parts for x in part]
    return list(items)


class PredictionOutputs:
    """The ``predictions/`` folder of one predict run over :class:`PredictInputs`."""

    def __init__(self, folder: Path, inputs: PredictInputs) -> None:
        self.folder, self.inputs = Path(folder), inputs
        self.rows: list = []
        self.done: list[int] = []
        self.failed: list[tuple[int, str]] = []

    def path(self, index: int, suffix: str) -> Path:
        """``<folder>/<input's name><suffix>``, its folder created."""
        out = self.folder / f"{self.inputs.names[index]}{suffix}"
        out.parent.mkdir(parents=True, exist_ok=True)
        return out

    def add(self, index: int, rows: Sequence = ()) -> None:
        """Input ``index`` is done; ``rows`` go into the run's table."""
        self.done.append(int(index))
        self.rows.extend(rows)

    def fail(self, index: int, reason: str) -> None:
        """Input ``index`` was read but could not be predicted: named in the log now, skipped,
        and listed with ``reason`` in ``summary.json``."""
        log.warning("skipping %s: %s", self.inputs.files[index], reason)
        self.failed.append((int(index), reason))

    def finish(self, is_rank_zero: bool, write_table: Optional[Callable[[list, Path], Path]] = None) -> Optional[dict]:
        """Gather every rank's rows (all ranks call this); rank 0 writes the table and
        ``summary.json`` and returns the summary."""
        rows, done, failed = _gather(self.rows), set(_gather(self.done)), dict(_gather(self.failed))
        self.rows, self.done, self.failed = [], [], []
        if not is_rank_zero:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        skipped = [str(self.inputs.files[i]) for i in range(len(self.inputs.files)) if i not in done]
        reasons = {str(self.inputs.files[i]): why for i, why in sorted(failed.items())}
        summary = dict(inputs=len(self.inputs.files), predicted=len(done), skipped=len(skipped),
                       skipped_files=skipped, skipped_reasons=reasons, folder=str(self.folder))
        table = write_table(rows, self.folder) if write_table is not None else None
        if table is not None:
            summary["table"] = str(table)
        atomic_write_text(self.folder / "summary.json", json.dumps(summary, indent=1))
        log.warning("predicted %d of %d inputs into %s%s", len(done), len(self.inputs.files), self.folder,
                    f"; skipped {len(skipped)} (unreadable, or named above): {', '.join(skipped[:5])}"
                    f"{' …' if len(skipped) > 5 else ''}" if skipped else "")
        return summary


def save_label_png(labels: torch.Tensor, path: Path, num_classes: int) -> None:
    """``(H, W)`` labels as a palette PNG: pixel values are the class indices, the palette the
    overlays' colours (class indices above 255 are written as 16-bit grey)."""
    array = labels.cpu().numpy()
    if num_classes > 256:
        atomic_save_image(Image.fromarray(array.astype(np.uint16)), path)
        return
    image = Image.fromarray(array.astype(np.uint8), mode="P")
    image.putpalette(palette(num_classes).reshape(-1).tolist())
    atomic_save_image(image, path)


def save_overlay(image: torch.Tensor, labels: torch.Tensor, path: Path, num_classes: int, alpha: float = 0.5) -> None:
    """The labels' colours blended over ``image`` ``(3, H, W)`` uint8, saved as JPEG or PNG."""
    # blended in uint8 by PIL: float copies of a 4096² image would cost 200 MB each
    photo = Image.fromarray(image.permute(1, 2, 0).cpu().numpy())
    atomic_save_image(Image.blend(photo, Image.fromarray(colorize(labels, num_classes)), alpha), path, quality=90)


def top_k_row(name: str, scores: torch.Tensor, class_names: Sequence[str], k: int = 5) -> dict:
    """One input's ``k`` best classes with their scores, as a CSV row."""
    values, classes = scores.float().topk(min(k, scores.numel()))
    row: dict = {"file": name}
    for rank, (value, label) in enumerate(zip(values.tolist(), classes.tolist()), 1):
        row[f"class_{rank}"] = class_names[label] if label < len(class_names) else str(label)
        row[f"score_{rank}"] = round(value, 5)
    return row


def write_csv(rows: list[dict], path: Path) -> Path:
    """Rows (sorted by their first column) as a CSV with the union of their keys as header."""
    header: list[str] = []
    for row in rows:
        header.extend(k for k in row if k not in header)
    rows = sorted(rows, key=lambda r: str(r.get(header[0], ""))) if header else rows
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header or ["file"])
        writer.writeheader()
        writer.writerows(rows)
    return path
