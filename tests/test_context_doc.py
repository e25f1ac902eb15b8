"""docs/context.md's per-seed tables (those headed ``| plan | seed | ...``) are their CSVs: every
number a row shows is its run's in the runs CSV the paragraph above the table names, rounded as
shown, a row that sums up seeds shows their mean (± sample std), and every run of such a CSV has its
row in one of the tables that name it. Tables with the seeds in one row (``| plan | seeds | mIoU |``)
show their runs' mIoU as ``mean ± std (each seed's)``."""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Optional

import pytest

from tests.helpers.results_csv import RESULTS, mean_std_shown, read_results, table_cells
from tests.helpers.tiny_runs import ROOT

DOC = ROOT / "docs" / "context.md"

# a per-seed table's column -> the CSV columns its cell shows ("a / b" for two); None: a number no
# CSV keeps (the score at step 150 is read from the run's own metrics log)
COLUMNS: dict[str, Optional[tuple[str, ...]]] = {
    "mIoU": ("score",),
    "global blocks zeroed": ("score_global_zeroed",),
    "its global term zeroed": ("score_global_zeroed",),
    "its global term / global blocks zeroed": ("score_global_zeroed",),
    "its head's global (1x1) bin zeroed": ("score_head_pool_zeroed",),
    "near / far mIoU": ("score_near", "score_far"),
    "left_of_cue / right_of_cue IoU": ("iou_left_of_cue", "iou_right_of_cue"),
    "digit_plain / digit_cued IoU": ("iou_digit_plain", "iou_digit_cued"),
    "digit_plain near / far": ("iou_digit_plain_near", "iou_digit_plain_far"),
    "digit_cued near / far": ("iou_digit_cued_near", "iou_digit_cued_far"),
    "left / right near the cue": ("iou_left_near", "iou_right_near"),
    "left / right far from it": ("iou_left_far", "iou_right_far"),
    "train min": ("train_min",),
    "step 150": None,
    "speed vs MSA at 448² / 1024² (CPU)": None,  # the comparison's table CSV, not its runs
}


@dataclass
class SeedTable:
    """One ``| plan | seed | ...`` table of the doc: the CSV named above it, its header and rows (cells)."""

    csv_name: str
    line: int
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)


def seed_tables(text: str, header: str = "| plan | seed |") -> list[SeedTable]:
    """Every table of ``text`` whose header starts with ``header``, each with the last
    ``docs/results/*_runs.csv`` (one row a run) named before it."""
    tables, csv_name, current = [], "", None
    for number, line in enumerate(text.splitlines(), start=1):
        if current is not None and line.startswith("|"):
            if not line.startswith("|---"):
                current.rows.append(table_cells(line))
            continue
        current = None
        if line.startswith(header):
            current = SeedTable(csv_name, number, table_cells(line))
            tables.append(current)
        named = re.findall(r"docs/results/(\w+_runs\.csv)", line)
        csv_name = named[-1] if named else csv_name
    return tables


def _recipe(cells: list[str]) -> str:
    """The plan a row is about: the first name in backticks of its first cell."""
    return re.search(r"`([^`]+)`", cells[0]).group(1)


def _number(text: str) -> str:
    """A cell's number without its bold or a note in brackets ("41.6 (shared)")."""
    return re.sub(r"\s*\([^)]*\)", "", text.replace("*", "")).strip()


def _shown(value: str) -> str:
    """A CSV value as the doc shows it: one decimal, ``–`` where the run has none."""
    return "–" if value in ("", "nan") or math.isnan(float(value)) else f"{float(value):.1f}"


def _mean_shown(values: list[str], with_std: bool) -> str:
    """The mean (± sample std) of runs' CSV values as the doc shows it; ``–`` where no run has one."""
    if all(_shown(v) == "–" for v in values):
        return "–"
    numbers = [float(v) for v in values]
    return mean_std_shown(numbers) if with_std else f"{statistics.mean(numbers):.1f}"


TABLES = seed_tables(DOC.read_text())
# tables of seeds summed up in a row (``| plan | seeds | mIoU | ...``: "63.3 ± 0.5 (63.3 / 63.8 / 62.8)")
SEEDS_TABLES = seed_tables(DOC.read_text(), header="| plan | seeds | mIoU |")


def _ids(tables: list[SeedTable]) -> list[str]:
    """A table's test id: its CSV and its place among that CSV's tables (stable when lines move)."""
    seen: dict[str, int] = {}
    ids = []
    for table in tables:
        seen[table.csv_name] = seen.get(table.csv_name, 0) + 1
        ids.append(f"{table.csv_name}#{seen[table.csv_name]}")
    return ids


def test_the_doc_has_per_seed_tables_each_under_its_csv():
    assert len(TABLES) >= 3 and len(SEEDS_TABLES) >= 2, f"{DOC} has {len(TABLES)} + {len(SEEDS_TABLES)} tables"
    for table in TABLES + SEEDS_TABLES:
        assert table.csv_name, f"{DOC}:{table.line}: no docs/results/*_runs.csv is named above this table"
        assert (RESULTS / table.csv_name).is_file(), f"{DOC}:{table.line}: {table.csv_name} does not exist"
    for table in TABLES:
        unknown = [h for h in table.header[2:] if h not in COLUMNS]
        assert not unknown, f"{DOC}:{table.line}: columns {unknown} have no CSV columns in COLUMNS"


@pytest.mark.parametrize("table", TABLES, ids=_ids(TABLES))
def test_per_seed_table_shows_its_csv(table: SeedTable):
    runs = read_results(table.csv_name)
    for cells in table.rows:
        recipe = _recipe(cells)
        mine = [r for r in runs if r["recipe"] == recipe]
        if cells[1].isdigit():
            picked = [r for r in mine if r["seed"] == cells[1]]
            assert len(picked) == 1, (
                f"{DOC}:{table.line}: {table.csv_name} has {len(picked)} runs of {recipe} seed {cells[1]}")
        else:
            counted = re.search(r"(\d+) seeds", cells[0] + " " + cells[1])
            assert counted, f"{DOC}:{table.line}: row {cells[0]!r} names neither a seed nor a count of seeds"
            picked = mine
            assert len(picked) == int(counted.group(1)), (
                f"{DOC}:{table.line}: the row sums up {counted.group(1)} seeds of {recipe}, "
                f"{table.csv_name} has {len(picked)}")
        for name, cell in zip(table.header[2:], cells[2:]):
            columns = COLUMNS[name]
            if columns is None or (len(picked) > 1 and cell == ""):
                continue
            parts = [_number(p) for p in cell.split(" / ")]
            parts = parts * len(columns) if parts == ["–"] else parts  # one dash: none of the columns has a value
            assert len(parts) == len(columns), f"{DOC}:{table.line}: {cell!r} in {name!r} should show {columns}"
            for part, column in zip(parts, columns):
                if len(picked) == 1:
                    expected = _shown(picked[0][column])
                else:
                    expected = _mean_shown([r[column] for r in picked], with_std="±" in part)
                assert part == expected, (
                    f"{DOC}:{table.line}: {recipe} {cells[1] or cells[0]} {name!r} shows {part}, "
                    f"{table.csv_name}'s {column} gives {expected}")


def test_every_run_of_a_tabled_csv_has_its_row():
    shown: dict[str, set[tuple[str, str]]] = {}
    for table in TABLES:
        shown.setdefault(table.csv_name, set()).update(
            (_recipe(cells), cells[1]) for cells in table.rows if cells[1].isdigit())
    for csv_name, rows in shown.items():
        missing = {(r["recipe"], r["seed"]) for r in read_results(csv_name)} - rows
        assert not missing, f"{DOC}: runs of {csv_name} with no row in its tables: {sorted(missing)}"


@pytest.mark.parametrize("table", SEEDS_TABLES, ids=_ids(SEEDS_TABLES))
def test_seeds_table_mious_are_their_csvs(table: SeedTable):
    """The mIoU cell of a row over seeds: one seed's score, or ``mean ± std (each seed's, in order)``."""
    runs = read_results(table.csv_name)
    assert table.rows, f"{DOC}:{table.line}: an empty table"
    for cells in table.rows:
        recipe = _recipe(cells)
        seeds = [s.strip() for s in cells[1].split(",")]
        scores = []
        for seed in seeds:
            picked = [r["score"] for r in runs if r["recipe"] == recipe and r["seed"] == seed]
            assert len(picked) == 1, (
                f"{DOC}:{table.line}: {table.csv_name} has {len(picked)} runs of {recipe} seed {seed}")
            scores += picked
        shown = _number(cells[2].split(";")[0]) if len(seeds) == 1 else cells[2].split(";")[0].strip()
        each = " / ".join(_shown(v) for v in scores)
        expected = _shown(scores[0]) if len(seeds) == 1 else f"{_mean_shown(scores, with_std=True)} ({each})"
        assert shown == expected, (
            f"{DOC}:{table.line}: {recipe} seeds {cells[1]} show {shown!r}, {table.csv_name} gives {expected!r}")
