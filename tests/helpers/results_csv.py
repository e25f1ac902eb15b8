"""The measured results under docs/results/ read and shown as the docs show them, a claim's text with
its number filled in from them, and a docs table line split into cells, for the tests that keep
README and docs/ true to them."""
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


def selected_runs(table: str, selection: dict) -> list[dict[str, str]]:
    """The rows of ``docs/results/<table>`` matching ``selection``: column -> its value, or a tuple of
    the values a row may have (a column the CSV lacks reads as empty)."""
    return [r for r in read_results(table)
            if all(r.get(k, "") in (v if isinstance(v, tuple) else (v,)) for k, v in selection.items())]


# a claim's ``shown``: the runs' mean ± sample std, one decimal each (else a format of their mean)
MEAN_STD = "mean ± std"


def claimed(text: str, table: str, selection: dict, column: str, shown: str, runs: int = 1) -> str:
    """``text`` with its ``{}`` filled in from ``docs/results/<table>``: the ``runs`` rows matching
    ``selection`` (column -> value, or a tuple of accepted values), their ``column`` shown as ``shown``
    (a format of their mean, e.g. ``"{:.1f}"``, or :data:`MEAN_STD`)."""
    rows = selected_runs(table, selection)
    assert len(rows) == runs, f"{table}: {len(rows)} rows match {selection}, the claim is over {runs}"
    values = [float(r[column]) for r in rows]
    return text.format(mean_std_shown(values) if shown == MEAN_STD else shown.format(statistics.mean(values)))


def recipe_claim(text: str, table: str, recipe: str, runs: int, column: str = "score",
                 shown: str = MEAN_STD) -> tuple:
    """A claim (:func:`claimed`'s arguments) about every run of one recipe in ``table``."""
    return text, table, {"recipe": recipe}, column, shown, runs


def mean_gap(table: str, above: str, below: str, column: str = "score") -> float:
    """Recipe ``above``'s mean ``column`` over its runs in ``table`` minus recipe ``below``'s."""
    runs = read_results(table)
    return (statistics.mean(float(r[column]) for r in runs if r["recipe"] == above)
            - statistics.mean(float(r[column]) for r in runs if r["recipe"] == below))


def table_cells(line: str) -> list[str]:
    """The cells of one Markdown table line, stripped."""
    return [c.strip() for c in line.strip().strip("|").split("|")]
