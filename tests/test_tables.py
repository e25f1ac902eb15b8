"""tables: Markdown for people, CSV for machines."""
import csv
import math

from hydra_dense.tables import format_cell, markdown_table, write_csv


def test_cells_show_as_many_digits_as_their_size_needs_and_nan_as_a_dash():
    assert [format_cell(v) for v in (math.nan, 0.0, 1234.5, 12.345, 0.012345, "msa", 3)] == \
        ["–", "0", "1,234", "12.35", "0.0123", "msa", "3"]


def test_a_markdown_table_has_a_header_a_rule_and_one_line_per_row():
    rows = [{"plan": "msa", "score": 63.326, "note": "x"}, {"plan": "hydra", "score": math.nan}]
    assert markdown_table(rows, ["plan", "score"]).splitlines() == [
        "| plan | score |", "|---|---|", "| msa | 63.33 |", "| hydra | – |"]
    assert markdown_table([]) == "(no rows)"


def test_csv_keeps_full_precision_and_ignores_columns_not_asked_for(tmp_path):
    rows = [{"plan": "msa", "score": 63.32682967185974, "extra": 1}, {"plan": "hydra, mean", "score": 41.5}]
    path = write_csv(rows, tmp_path / "sub" / "t.csv", ["plan", "score"])
    read = list(csv.DictReader(path.open(newline="")))
    assert read == [{"plan": "msa", "score": "63.32682967185974"}, {"plan": "hydra, mean", "score": "41.5"}]
    assert not list(path.parent.glob(".t.csv.tmp-*"))
