"""The measured results under docs/results/ read and shown as the docs show them, and a docs table
line split into cells, for the tests that keep README and docs/ true to them."""
from __future__ import annotations

import csv
import statistics

from tests.helpers.tiny_runs import ROOT

RESULTS = ROOT / "docs" / "results"


def read_results(name: str) -> list[dict[str, str]]:
    """Every row of the CSV ``docs/results/<name>``."""
    with open(RESULTS / name, newline="") as f:
        return list(csv.DictReader(f))


def mean_std_shown(values: list[float]) -> str:
    """``mean ± std`` (sample std) as the docs show it, one decimal each."""
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def table_cells(line: str) -> list[str]:
    """The cells of one Markdown table line, stripped."""
    return [c.strip() for c in line.strip().strip("|").split("|")]
