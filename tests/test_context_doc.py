"""docs/context.md's per-seed tables (those headed ``| plan | seed | ...``) are their CSVs: every
number a row shows is its run's in the runs CSV the paragraph above the table names, rounded as
shown, a row that sums up seeds shows their mean (± sample std), and every run of such a CSV has its
row in one of the tables that name it. Tables with the seeds in one row (``| plan | seeds | mIoU |``)
show their runs' mIoU as ``mean ± std (each seed's)``. The opening summary's numbers are their CSVs'
too."""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Optional

import pytest

from tests.helpers.results_csv import (RESULTS, claimed, mean_gap, mean_std_shown, read_results, recipe_claim,
                                       table_cells)
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


def _runs_csv(track: str) -> str:
    return f"context_{track}_cpu_runs.csv"


def _mean_std(text: str, track: str, recipe: str, seeds: int, column: str = "score") -> tuple:
    return recipe_claim(text, _runs_csv(track), recipe, seeds, column)


def _mean(text: str, track: str, recipe: str, seeds: int, column: str) -> tuple:
    return recipe_claim(text, _runs_csv(track), recipe, seeds, column, shown="{:.1f}")


# the numbers of the doc's opening summary (the tables below it are checked above), each read off its
# runs CSV: (the text around it, the CSV, the runs, the column, how it is shown, the runs' count);
# the doc's line breaks read as spaces
SUMMARY_NUMBERS = [
    _mean_std("({} over 3 seeds against 93.4 ± 0.1, 3 seeds)", "presence_whole_uper", "vitdet8_windows", 3),
    _mean_std("(92.6 ± 0.1 over 3 seeds against {}, 3 seeds)", "presence_whole_uper", "msa", 3),
    _mean("the cue near it and lost it far from it ({} / 72.7 mIoU, 3 seeds)", "presence_whole_uper_pool236",
          "vitdet8_windows", 3, "score_near"),
    _mean("the cue near it and lost it far from it (91.4 / {} mIoU, 3 seeds)", "presence_whole_uper_pool236",
          "vitdet8_windows", 3, "score_far"),
    _mean_std("across the whole scene ({} mIoU, zeroed 48.0 ± 0.7; 3 seeds of 3)", "presence_whole_uper_pool236",
              "vitdet8_hydra+mean@converted", 3),
    _mean_std("across the whole scene (92.8 ± 0.6 mIoU, zeroed {}; 3 seeds of 3)", "presence_whole_uper_pool236",
              "vitdet8_hydra+mean@converted", 3, "score_global_zeroed"),
    _mean_std("level with ViTDet's MSA global blocks ({}, 3 seeds)", "presence_whole_uper_pool236", "vitdet8_msa", 3),
    _mean("its term carrying nothing ({}, 1 seed)", "presence_whole_uper_pool236", "hydra+mean+dwc7@converted", 1,
          "score"),
    _mean_std("windows alone under UPerNet reached {} over 3 seeds", "relation_whole_uper", "vitdet8_windows", 3),
    _mean_std("trained the same way ({}, 3 seeds), whose backbone carries", "relation_whole_uper", "msa", 3),
    _mean_std("trained without that bin, {} (3 seeds)", "relation_whole_uper_pool236", "vitdet8_windows", 3),
    _mean("There ViTDet's MSA global blocks reached {} (1 seed)", "relation_whole_uper_pool236", "vitdet8_msa", 1,
          "score"),
    _mean_std("the same blocks converted to Hydra {} (3 seeds:", "relation_whole_uper_pool236",
              "vitdet8_hydra+mean@converted", 3),
]


def _opening() -> str:
    """The doc's opening summary (the paragraph "What they say ..."), line breaks as spaces."""
    summary = [p for p in DOC.read_text().split("\n\n") if p.startswith("What they say")]
    assert len(summary) == 1, f"{DOC} has {len(summary)} paragraphs starting 'What they say'"
    return " ".join(summary[0].split())


@pytest.mark.parametrize("claim", SUMMARY_NUMBERS, ids=[c[0][:40] for c in SUMMARY_NUMBERS])
def test_the_opening_summary_numbers_are_their_csvs(claim: tuple):
    expected = claimed(*claim)
    assert expected in _opening(), f"{DOC}'s opening does not say {expected!r} ({claim[1]} {claim[3]})"


@pytest.mark.parametrize("track, below", [("presence_whole_uper", "0.8 below MSA"),
                                          ("relation_whole_uper", "3.3 below")])
def test_the_opening_summary_gaps_to_msa_are_their_csvs(track: str, below: str):
    """Windows alone's gap to MSA, both trained whole under UPerNet: the means' difference."""
    gap = f"{mean_gap(_runs_csv(track), 'msa', 'vitdet8_windows'):.1f} below"
    assert below.startswith(gap) and below in _opening(), (
        f"{DOC}'s opening says {below!r}, {_runs_csv(track)} gives {gap}")
