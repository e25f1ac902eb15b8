"""Tables: Markdown for people, CSV for machines (every tool's and job's tables go through these)."""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Optional, Sequence

from .runtime.atomic_file import atomic_write_text

__all__ = ["format_cell", "markdown_table", "write_csv"]


def format_cell(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    return str(v)


def markdown_table(rows: Sequence[dict], columns: Optional[Sequence[str]] = None) -> str:
    """A GitHub-flavoured Markdown table of ``rows`` (dicts) over ``columns``."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(format_cell(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def write_csv(rows: Sequence[dict], path: str | Path, columns: Optional[Sequence[str]] = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(columns or (rows[0].keys() if rows else []))
    text = io.StringIO(newline="")
    w = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return atomic_write_text(path, text.getvalue())
