"""The accuracy columns of docs/comparison.md (and the segmentation, video and detection per-seed tables
of docs/results/accuracy.md) are their per-run CSVs under docs/results/.

A score cell shows its runs rounded as shown (where a CSV keeps fewer decimals, within that rounding
too): ``a ± b`` their mean ± sample std (over 3 seeds unless the row or header says ``(N seeds)``, or
the row's selection names its seeds), ``a (seed N)`` one seed's, ``a / b / c`` each seed's in order
(``–`` for a seed not run; a cell of ``–`` alone claims nothing), and a note in brackets that is a
list of numbers is each seed's too. A row naming several plans (``hybrid4 / hybrid4+dwc3``) shows one
value each, or one for all (``each``).
Every row of a listed table is read off its CSV or named in ``no_runs_csv``. The speed, FLOP and
memory columns of the tables that come from one comparison's ``table.csv`` are checked against it;
the conversion columns are not checked here."""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

import pytest

from tests.helpers.results_csv import read_results, selected_runs, table_cells
from tests.helpers.tiny_runs import ROOT

DOC = ROOT / "docs" / "comparison.md"
ACCURACY_DOC = ROOT / "docs" / "results" / "accuracy.md"

Row = dict[str, str]
# the runs a table row shows: CSV column -> its value, or the values any of which a run may have
Selection = dict[str, Union[str, tuple[str, ...]]]
FIRST_THREE = ("0", "1", "2")
# a column's value of one run: a CSV column's name, or a function of the run's row
Value = Union[str, Callable[[Row], float]]


def _carried(row: Row) -> float:
    """What a global term carries: the score minus the score with the term zeroed."""
    return float(row["score"]) - float(row["score_global_zeroed"])


@dataclass(frozen=True)
class AccuracyTable:
    """One table: its header line as the doc writes it, its per-run CSV, the checked columns (header
    cell -> the value the cell shows and, where the cell adds one in brackets, the bracket's value),
    and each row's runs (its first cell -> one CSV selection per plan the row names); ``csv_decimals``:
    the decimals the CSV keeps, where fewer than the doc's numbers were computed from."""

    header: str
    csv_name: str
    columns: dict[str, tuple[Value, Optional[Value]]]
    rows: dict[str, list[Selection]]
    no_runs_csv: tuple[str, ...] = ()
    doc: Path = DOC
    csv_decimals: Optional[int] = None


def _plans(*recipes: str, **fixed: Union[str, tuple[str, ...]]) -> list[Selection]:
    return [{"recipe": r, **fixed} for r in recipes]


TABLES = [
    AccuracyTable(
        "| recipe | attention | val mIoU (%) | conversion: mean block error |", "seg_recipes_runs.csv",
        {"val mIoU (%)": ("val_mIoU", None)},
        {"msa": _plans("msa"), "hydra+dwc3 (no conversion)": _plans("hydra+dwc3"),
         "hybrid4 (no conversion)": _plans("hybrid4"), "hydra@converted": _plans("hydra@converted"),
         "hydra+dwc3@converted": _plans("hydra+dwc3@converted"), "hydra+dwc5@converted": _plans("hydra+dwc5@converted"),
         "hydra+dwc7@converted": _plans("hydra+dwc7@converted"),
         "hydra_at0.1.2.3.4.6.7.11+dwc3@converted": _plans("hydra_at0.1.2.3.4.6.7.11+dwc3@converted"),
         "hybrid6+mean+dwc7@converted": _plans("hybrid6+mean+dwc7@converted"),
         "hydra_at0.1.2.8.9.10.11+mean+dwc7@converted": _plans("hydra_at0.1.2.8.9.10.11+mean+dwc7@converted")},
        no_runs_csv=("hydra+mean+dwc7@aligned", "hydra_norm+dwc7@converted (norm-aware global term)")),
    AccuracyTable(
        "| recipe | val mIoU (%), seeds 0 / 1 / 2 | mean ± std | global term zeroed (what it carries) |",
        "seg_large_runs.csv",
        {"val mIoU (%), seeds 0 / 1 / 2": ("score", None), "mean ± std": ("score", None),
         "global term zeroed (what it carries)": ("score_global_zeroed", _carried)},
        {"msa": _plans("msa"), "hydra+mean+dwc7@converted": _plans("hydra+mean+dwc7@converted"),
         "local+dwc7@converted (no global term)": _plans("local+dwc7@converted"),
         "vitdet8_msa (windows + 4 global MSA blocks)": _plans("vitdet8_msa"),
         "vitdet8_hydra+mean (windows + 4 global Hydra blocks)": _plans("vitdet8_hydra+mean"),
         "vitdet8_hydra+mean@converted (the same, converted first)": _plans("vitdet8_hydra+mean@converted")}),
    AccuracyTable(
        "| recipe | val top-1 (%), mean ± std (seeds) | conversion |", "video_recipes_runs.csv",
        {"val top-1 (%), mean ± std (seeds)": ("score", "score")},
        {"msa": _plans("msa"),
         "hydra, hydra+dwc3, hydra+dwc3_2d (from scratch)": _plans("hydra", "hydra+dwc3", "hydra+dwc3_2d"),
         "hybrid2": _plans("hybrid2"), "hybrid4 / hybrid4+dwc3": _plans("hybrid4", "hybrid4+dwc3"),
         "hydra@converted": _plans("hydra@converted"), "hydra+dwc3@converted": _plans("hydra+dwc3@converted"),
         "hybrid2@converted / hybrid4@converted": _plans("hybrid2@converted", "hybrid4@converted")}),
    AccuracyTable(
        "| plan (600 steps, 3 seeds) | val AP50 (%) | box mAP (%) |", "det_digits_runs.csv",
        {"val AP50 (%)": ("val_AP50", None), "box mAP (%)": ("val_mAP", None)},
        {"msa": _plans("msa", steps="600", conversion_crops=""),
         "hydra+mean+dwc7@converted (224² crops)": _plans("hydra+mean+dwc7@converted", steps="600",
                                                         conversion_crops="224px crops"),
         "local+dwc7@converted (224² crops; the same branch, no global term)": _plans(
             "local+dwc7@converted", steps="600", conversion_crops="224px crops")}),
    AccuracyTable(
        "| plan | val AP50 (%) | box mAP (%) | speedup @1024² (whole detector) |", "det_digits_runs.csv",
        {"val AP50 (%)": ("val_AP50", None), "box mAP (%)": ("val_mAP", None)},
        {"msa (5 seeds)": _plans("msa", steps="300", conversion_crops=""),
         "hydra": _plans("hydra", steps="300"), "hybrid2": _plans("hybrid2", steps="300"),
         "hydra+mean+dwc7@converted (224² crops, 5 seeds)": _plans("hydra+mean+dwc7@converted", steps="300",
                                                                  conversion_crops="224px crops"),
         "the same, converted on 112² crops (49 tokens)": _plans("hydra+mean+dwc7@converted", steps="300",
                                                                conversion_crops="112px crops")}),
    AccuracyTable(
        "| recipe | val mIoU (%) per seed 0 / 1 / 2 | mean ± std | conversion: mean block error, minutes |",
        "seg_recipes_runs.csv",
        {"val mIoU (%) per seed 0 / 1 / 2": ("val_mIoU", None), "mean ± std": ("val_mIoU", None)},
        {"msa": _plans("msa"), "hydra+dwc3 (no conversion)": _plans("hydra+dwc3"),
         "hydra@converted (no local mixing)": _plans("hydra@converted"),
         "hydra+dwc3@converted": _plans("hydra+dwc3@converted"), "hydra+dwc5@converted": _plans("hydra+dwc5@converted"),
         "hydra+dwc7@converted": _plans("hydra+dwc7@converted"),
         "hybrid4 (Hydra in blocks 8–11; no conversion)": _plans("hybrid4"),
         "hydra_at0.1.2.3.4.6.7.11+dwc3@converted (MSA in blocks 5, 8, 9, 10)": _plans(
             "hydra_at0.1.2.3.4.6.7.11+dwc3@converted"),
         "hydra_at0.1.2.3.4.11+dwc7@converted (MSA in blocks 5–10)": _plans("hydra_at0.1.2.3.4.11+dwc7@converted"),
         "hybrid6+mean+dwc7@converted (Hydra + 7x7, `kv` averaged, in blocks 6–11)": _plans(
             "hybrid6+mean+dwc7@converted"),
         "hydra_at0.1.2.8.9.10.11+mean+dwc7@converted (MSA in blocks 3–7)": _plans(
             "hydra_at0.1.2.8.9.10.11+mean+dwc7@converted"),
         "hydra+dwc7@converted on the demo's own 800 training scenes (labels unused)": _plans(
             "hydra+dwc7@converted (conversion on the demo's training scenes)")},
        no_runs_csv=("hydra (no conversion; README table)",), doc=ACCURACY_DOC, csv_decimals=2),
    AccuracyTable(
        "| recipe | val top-1 (%) per seed 0 / 1 / 2 | mean ± std | conversion: mean block error, minutes |",
        "video_recipes_runs.csv",
        {"val top-1 (%) per seed 0 / 1 / 2": ("score", None), "mean ± std": ("score", None)},
        {"msa": _plans("msa"), "hydra": _plans("hydra"), "hydra+dwc3 (3×3×3 over t, h, w)": _plans("hydra+dwc3"),
         "hydra+dwc3_2d (3×3 per frame)": _plans("hydra+dwc3_2d"), "hybrid2 (Hydra in blocks 4, 5)": _plans("hybrid2"),
         "hybrid4 (Hydra in blocks 2–5)": _plans("hybrid4"), "hybrid4+dwc3": _plans("hybrid4+dwc3"),
         "hydra@converted": _plans("hydra@converted"), "hydra+dwc3@converted": _plans("hydra+dwc3@converted"),
         "hydra+dwc3_2d@converted": _plans("hydra+dwc3_2d@converted"),
         "hybrid2@converted (Hydra in blocks 4, 5)": _plans("hybrid2@converted"),
         "hybrid4@converted (Hydra in blocks 2–5)": _plans("hybrid4@converted")}, doc=ACCURACY_DOC),
    AccuracyTable(
        "| recipe | val AP50 (%) per seed 0 / 1 / 2 | AP50 mean ± std | box mAP (%) per seed |", "det_digits_runs.csv",
        {"val AP50 (%) per seed 0 / 1 / 2": ("val_AP50", None), "AP50 mean ± std": ("val_AP50", None),
         "box mAP (%) per seed": ("val_mAP", None), "box mAP mean ± std": ("val_mAP", None)},
        {"msa": _plans("msa", steps="600", conversion_crops=""),
         "hydra+mean+dwc7@converted (224² crops)": _plans("hydra+mean+dwc7@converted", steps="600",
                                                         conversion_crops="224px crops"),
         "local+dwc7@converted (224² crops; no global term)": _plans("local+dwc7@converted", steps="600",
                                                                    conversion_crops="224px crops")},
        doc=ACCURACY_DOC, csv_decimals=2),
    AccuracyTable(
        "| recipe | val AP50 (%) per seed 0 / 1 / 2 (/ 3 / 4) | AP50 mean ± std | box mAP (%) mean ± std |",
        "det_digits_runs.csv",
        {"val AP50 (%) per seed 0 / 1 / 2 (/ 3 / 4)": ("val_AP50", None), "AP50 mean ± std": ("val_AP50", None),
         "box mAP (%) mean ± std": ("val_mAP", "val_mAP")},
        {"msa, 5 seeds": _plans("msa", steps="300", conversion_crops=""),
         "msa, seeds 0–2": _plans("msa", steps="300", conversion_crops="", seed=FIRST_THREE),
         "hydra (no conversion)": _plans("hydra", steps="300"),
         "hybrid2 (Hydra in blocks 10, 11; no conversion)": _plans("hybrid2", steps="300"),
         "hydra+mean+dwc7@converted, conversion on 112² crops (49 tokens)": _plans(
             "hydra+mean+dwc7@converted", steps="300", conversion_crops="112px crops"),
         "hydra+mean+dwc7@converted, conversion on 224² crops (196 tokens, the task's), 5 seeds": _plans(
             "hydra+mean+dwc7@converted", steps="300", conversion_crops="224px crops"),
         "the same, seeds 0–2": _plans("hydra+mean+dwc7@converted", steps="300", conversion_crops="224px crops",
                                       seed=FIRST_THREE)},
        doc=ACCURACY_DOC, csv_decimals=2),
]

NUMBER = r"-?\d+(?:\.\d+)?"
MEAN_STD = re.compile(rf"^({NUMBER}) ± ({NUMBER})$")
EACH_SEED = re.compile(rf"^(?:{NUMBER}|–)(?: / (?:{NUMBER}|–))+$")
ONE = re.compile(rf"^{NUMBER}$")


def _table(header: str, doc: Path = DOC) -> tuple[list[str], list[list[str]]]:
    """The header cells and body rows (cells) of the one table of ``doc`` headed ``header``."""
    lines = doc.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert len(starts) == 1, f"{doc} has {len(starts)} tables headed {header!r}"
    rows = []
    for line in lines[starts[0] + 2:]:
        if not line.startswith("|"):
            break
        rows.append(table_cells(line))
    return table_cells(lines[starts[0]]), rows


def _value(run: Row, value: Value) -> Optional[float]:
    if callable(value):
        return value(run)
    return float(run[value]) if run[value] not in ("", "nan") else None


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def _raw(shown: str, values: list[Optional[float]], seeds: list[str]) -> list[Optional[float]]:
    """The numbers ``shown`` writes, unrounded, from ``values`` (one per run, runs in seed order):
    mean and std, each seed's (None for a seed not run), or the one run's."""
    present = [v for v in values if v is not None]
    if MEAN_STD.match(shown):
        return [statistics.mean(present), statistics.stdev(present)]
    if EACH_SEED.match(shown):
        by_seed = dict(zip(seeds, values))
        return [by_seed.get(str(i)) for i in range(len(shown.split(" / ")))]
    assert ONE.match(shown) and len(values) == 1, f"{shown!r}: not one number for one run ({len(values)} runs)"
    return [values[0]]


def _numbers(shown: str) -> list[Optional[float]]:
    return [None if n == "–" else float(n) for n in re.findall(rf"{NUMBER}|–", shown)]


def _expected(shown: str, values: list[Optional[float]], seeds: list[str]) -> str:
    """``values`` written as ``shown`` writes them, at its decimals (``–`` where none has a value)."""
    if shown == "–" or all(v is None for v in values):
        return "–" if all(v is None for v in values) else f"{sum(v is not None for v in values)} runs with a value"
    raw = _raw(shown, values, seeds)
    written = [None if n is None else f"{r:.{_decimals(n)}f}" if r is not None else "–"
               for n, r in zip(re.findall(rf"{NUMBER}|–", shown), raw)]
    if MEAN_STD.match(shown):
        return " ± ".join(written)
    return " / ".join(written)


def _agrees(shown: str, values: list[Optional[float]], seeds: list[str], csv_decimals: Optional[int]) -> bool:
    """Whether ``shown`` is ``values`` rounded as shown; where the CSV keeps ``csv_decimals``, each
    number may also be off by that rounding (39.95 in the CSV may have been 39.949, shown 39.9)."""
    if csv_decimals is None:
        return shown == _expected(shown, values, seeds)
    pairs = list(zip(_numbers(shown), _raw(shown, values, seeds)))
    return all((s is None) == (r is None) and (s is None or abs(s - r) <= 0.5 * 10 ** -_decimals(str(s))
                                                + 0.5 * 10 ** -csv_decimals + 1e-9) for s, r in pairs)


def _split(cell: str) -> tuple[str, Optional[str]]:
    """A cell as its shown value and its note in brackets (None without one), bold and ``each`` dropped."""
    cell = cell.replace("*", "").replace("−", "-").replace(" each", "")
    m = re.match(r"^(.*?)(?: \((.*)\))?$", cell)
    return m.group(1).strip(), m.group(2)


def _runs(table: AccuracyTable, selection: Selection, row: list[str], shown: str, note: Optional[str]) -> list[Row]:
    """The runs a cell shows, in seed order: the seed its note names (``seed N``); each seed it lists
    (``a / b / –``); else every run of the selection, as many as the row or header says (3 unless
    ``N seeds``)."""
    runs = selected_runs(table.csv_name, selection)
    seed = re.match(r"seed (\d+)", note or "")
    if seed:
        runs = [r for r in runs if r["seed"] == seed.group(1)]
        expected = 1
    elif EACH_SEED.match(shown):
        expected = sum(part != "–" for part in shown.split(" / "))
    else:
        counted = re.search(r"(\d+) seeds", " ".join(row) + " " + table.header)
        expected = int(counted.group(1)) if counted else 3
    assert len(runs) == expected, (
        f"{table.csv_name} has {len(runs)} runs of {selection}, {table.doc.name} shows {expected}")
    return sorted(runs, key=lambda r: int(r["seed"]))


def _is_numbers(note: Optional[str]) -> bool:
    return note is not None and bool(MEAN_STD.match(note) or EACH_SEED.match(note) or ONE.match(note))


@pytest.mark.parametrize("table", TABLES, ids=[f"{t.doc.name}:{t.csv_name}:{' | '.join(table_cells(t.header)[:2])}"
                                               for t in TABLES])
def test_accuracy_columns_are_their_runs(table: AccuracyTable):
    header, rows = _table(table.header, table.doc)
    named = set(table.rows) | set(table.no_runs_csv)
    assert {r[0].replace("*", "") for r in rows} == named, (
        f"{table.doc}: the table headed {table.header!r} has rows {[r[0] for r in rows]}, "
        f"the test knows {sorted(named)}")
    for row in rows:
        selections = table.rows.get(row[0].replace("*", ""))
        for column, (value, note_value) in table.columns.items() if selections else ():
            cell = row[header.index(column)]
            parts = cell.split(" / ") if len(selections) > 1 and " / " in cell else [cell] * len(selections)
            for selection, part in zip(selections, parts):
                shown, note = _split(part)
                if shown == "–":
                    continue
                runs = _runs(table, selection, row, shown, note)
                seeds = [r["seed"] for r in runs]
                values = [_value(r, value) for r in runs]
                assert _agrees(shown, values, seeds, table.csv_decimals), (
                    f"{table.doc}: {row[0]!r} {column!r} shows {shown!r}, {table.csv_name}'s {selection} gives "
                    f"{_expected(shown, values, seeds)!r}")
                if note_value is not None and _is_numbers(note):
                    values = [_value(r, note_value) for r in runs]
                    assert _agrees(note, values, seeds, table.csv_decimals), (
                        f"{table.doc}: {row[0]!r} {column!r} notes ({note}), {table.csv_name}'s {selection} gives "
                        f"({_expected(note, values, seeds)})")


@dataclass(frozen=True)
class PlanTable:
    """A table of one run (or seed 0) a plan, read off the comparison's ``table.csv`` (one row a plan):
    its header line, the CSV, each checked column (header cell -> the CSV columns it shows, ``a / b``
    for two), and the plans whose rows come from a run of their own, not in the CSV. A row's plan is
    the first word of its first cell."""

    header: str
    csv_name: str
    columns: dict[str, tuple[str, ...]]
    not_in_csv: tuple[str, ...] = ()


PLAN_TABLES = [
    PlanTable("| plan | attention | val mIoU (%) | pixel acc (%) |", "seg_demo_table.csv",
              {"val mIoU (%)": ("score",), "pixel acc (%)": ("score2",), "global term zeroed": ("global_zeroed",),
               "head's global bin zeroed": ("head_pool_zeroed",), "infer img/s @112²": ("infer_img_s",),
               "infer img/s @1024²": ("infer_img_s_big",), "speedup @1024²": ("speedup_big",),
               "FLOP-ideal @1024²": ("flop_ideal_big",), "peak train MiB": ("peak_train_mem_mb",)}),
    PlanTable("| recipe | val mIoU (%), seeds 0 / 1 / 2 | mean ± std | global term zeroed (what it carries) |",
              "seg_large_table.csv",
              {"speedup @448² (1,024 tokens)": ("speedup",), "speedup @1024² (5,329 tokens)": ("speedup_big",),
               "FLOP-ideal @448² / @1024²": ("flop_ideal", "flop_ideal_big")},
              not_in_csv=("vitdet8_hydra+mean@converted",)),
]


@pytest.mark.parametrize("table", PLAN_TABLES, ids=[t.csv_name for t in PLAN_TABLES])
def test_per_plan_columns_are_the_comparison_table(table: PlanTable):
    """Each checked cell is its plan's value, at the cell's decimals (``–`` where the CSV has none);
    ``as the row above`` repeats a timing shared with the row above and is left alone."""
    header, rows = _table(table.header)
    plans = {r["plan"]: r for r in read_results(table.csv_name)}
    checked = 0
    for row in rows:
        name = row[0].replace("*", "").split(" ")[0]
        if name in table.not_in_csv:
            continue
        plan = plans.get(name)
        assert plan is not None, f"{DOC}: {row[0]!r} is no plan of {table.csv_name}"
        for column, csv_columns in table.columns.items():
            cell = row[header.index(column)].replace("*", "")
            if cell == "as the row above":
                continue
            parts = cell.split(" / ")
            assert len(parts) == len(csv_columns), f"{DOC}: {row[0]!r} {column!r} should show {csv_columns}"
            for part, csv_column in zip(parts, csv_columns):
                expected = _expected(part, [_value(plan, csv_column)], [plan["seeds"]])
                assert part == expected, (
                    f"{DOC}: {row[0]!r} {column!r} shows {part!r}, {table.csv_name}'s {csv_column} gives {expected!r}")
                checked += 1
    assert checked >= len(rows) * len(table.columns) // 2, f"{DOC}: only {checked} cells of {table.header!r} checked"
