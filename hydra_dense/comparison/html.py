"""``report.html``: the comparison as one self-contained page to share (images inlined).

It holds the table (mean ± std over seeds), the accuracy-vs-speed plot, every run's curves and,
per recipe side by side, the last validation overlays of its first seed.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Optional, Sequence

from ..runtime.atomic_file import atomic_write_text
from ..tables import format_cell
from .runs import run_folder

__all__ = ["write_html_report", "last_overlays"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; } .plans { display: flex; gap: 1em; overflow-x: auto; }
.plan { flex: 0 0 auto; max-width: 420px; } .plan h3 { margin: 0.3em 0; font-size: 1em; }
.legend { font-size: 0.85em; color: #555; white-space: pre-wrap; }
"""


def _image_tag(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def last_overlays(run_dir: Path, limit: int = 2) -> list[Path]:
    """The PNG overlays of a run's last validation (newest log folder, highest step)."""
    files = sorted(run_dir.rglob("overlays/*.png"))
    if not files:
        return []
    step = max(_step(f) for f in files)
    return [f for f in files if _step(f) == step][:limit]


def _step(path: Path) -> int:
    for part in path.stem.split("_"):
        if part.startswith("step") and part[4:].isdigit():
            return int(part[4:])
    return -1


def _table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(format_cell(r.get(c, '')))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_html_report(rows: Sequence[dict], runs: Sequence[dict], out: Path, header: str, legend: str,
                      columns: Sequence[str], path: Optional[Path] = None) -> Path:
    """Write ``out/report.html`` from the rows (already formatted for display) and the files the
    comparison wrote next to it."""
    path = path or out / "report.html"
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(header)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(header)}</h1>",
             _table(rows, columns), f"<p class='legend'>{html.escape(legend)}</p>"]
    for name, title in (("accuracy_vs_speed.png", "Accuracy vs speed"), ("curves.png", "Training curves")):
        if (out / name).is_file():
            parts.append(f"<h2>{title}</h2>{_image_tag(out / name, title)}")
    panels = []
    for recipe in dict.fromkeys(r["recipe"] for r in runs):
        seed = min(r["seed"] for r in runs if r["recipe"] == recipe)
        images = last_overlays(run_folder(out, recipe, seed))
        if images:
            tags = "".join(_image_tag(f, f"{recipe} {f.stem}") for f in images)
            panels.append(f"<div class='plan'><h3>{html.escape(recipe)} (seed {seed}, last validation)</h3>{tags}</div>")
    if panels:
        parts.append("<h2>Validation overlays</h2><p class='legend'>segmentation: image | ground truth | "
                     "prediction; detection: predicted boxes (and masks)</p>"
                     f"<div class='plans'>{''.join(panels)}</div>")
    parts.append("</body></html>")
    return atomic_write_text(path, "\n".join(parts))
