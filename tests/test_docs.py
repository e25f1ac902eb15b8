"""The README and docs/ name only files that exist, and every shipped YAML builds."""
import glob
import re
from typing import Optional

import pytest

from tests.helpers.results_csv import claimed, mean_gap, mean_std_shown, read_results, recipe_claim, selected_runs
from tests.helpers.tiny_runs import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a repository path: configs/..., tools/..., docs/..., hydra_dense/... (globs allowed)
PATH = re.compile(r"(?<![\w/.~-])((?:configs|tools|docs|hydra_dense)/[\w*./-]*[\w*/])")


def test_readme_is_a_front_page_linking_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    assert "./run.sh demo" in text and "./run.sh test" in text
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in text, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page):
    named = {m.group(1) for m in PATH.finditer(page.read_text())}
    assert named, f"{page.name} names no repository path"
    missing = sorted(p for p in named if not glob.glob(str(ROOT / p)))
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


def test_relative_links_resolve():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: link {target} is broken"


def _heading_anchors(page) -> set:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # a shell comment is no heading
    headings = re.findall(r"^#+ (.*)$", prose, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_link_anchors_name_a_heading():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text()):
            linked = page.parent / target if target else page
            if linked.suffix == ".md" and anchor not in _heading_anchors(linked):
                broken.append(f"{page.name}: {target}#{anchor}")
    assert not broken, f"links to headings that do not exist: {broken}"





def _recipe_scores(table: str, recipe: str, column: str = "score") -> list[float]:
    """Every run's ``column`` of one recipe in a per-run results CSV."""
    return [float(r[column]) for r in read_results(table) if r["recipe"] == recipe]

# README's accuracy table: a row (by its first cell), its per-run CSV, the score column, and the runs
# (column -> value, or a tuple of accepted values) whose mean ± std the row shows
HEADLINE_ROWS = [
    ("segmentation, DINOv2 ViT-S/14", "seg_recipes_runs.csv", "val_mIoU",
     [{"recipe": "msa"}, {"recipe": "hydra+mean+dwc7@converted"}]),
    ("segmentation, large-token track", "seg_large_runs.csv", "score",
     [{"recipe": "msa"}, {"recipe": "hydra+mean+dwc7@converted"}, {"recipe": "local+dwc7@converted"}]),
    ("video, motion direction", "video_recipes_runs.csv", "score",
     [{"recipe": "msa"}, {"recipe": "hydra"}, {"recipe": "hydra@converted"}]),
    ("detection, digits", "det_digits_runs.csv", "val_AP50",
     [{"recipe": "msa", "steps": "600"}, {"recipe": "hydra+mean+dwc7@converted", "steps": "600"},
      {"recipe": "local+dwc7@converted", "steps": "600"},
      {"recipe": "hydra", "steps": "300"}, {"recipe": "msa", "steps": "300", "seed": ("0", "1", "2")}]),
]


@pytest.mark.parametrize("first_cell, runs_csv, column, selections", HEADLINE_ROWS, ids=[r[0] for r in HEADLINE_ROWS])
def test_headline_accuracy_is_the_mean_of_its_runs(first_cell, runs_csv, column, selections):
    """The listed means ± std in README's accuracy table are computed from their per-run CSV, over
    as many seeds as the row says (3 unless it states another count). Not listed, for want of a
    per-run CSV: the small demo's unconverted `hydra` (15.8 ± 2.7)."""
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith(f"| {first_cell}")]
    assert len(rows) == 1, f"README has {len(rows)} accuracy rows starting {first_cell!r}"
    stated = re.search(r"(\d+) seeds \|", rows[0])
    seeds = int(stated.group(1)) if stated else 3
    for selection in selections:
        scores = [float(r[column]) for r in selected_runs(runs_csv, selection)]
        assert len(scores) == seeds, f"{runs_csv} has {len(scores)} runs of {selection}, the README row says {seeds}"
        shown = mean_std_shown(scores)
        assert shown in rows[0], f"README's {first_cell!r} row does not show {shown} ({selection} in {runs_csv})"


PRESENCE_WHOLE_UPER, PRESENCE_WHOLE_UPER_POOL236, RELATION, RELATION_WHOLE_UPER, RELATION_WHOLE_UPER_POOL236 = (
    f"context_{track}_cpu_runs.csv"
    for track in ("presence_whole_uper", "presence_whole_uper_pool236", "relation", "relation_whole_uper",
                  "relation_whole_uper_pool236"))


def _score(text: str, table: str, recipe: str, seed: Optional[int] = None, column: str = "score") -> tuple:
    """A README accuracy claim read off a context track's per-run CSV (one seed's row where it has several)."""
    selection = {"recipe": recipe} if seed is None else {"recipe": recipe, "seed": str(seed)}
    return text, table, selection, column, "{:.1f}", 1


def _speed(text: str, table: str, attention: str, mode: str) -> tuple:
    """A README speed claim read off a benchmark CSV's speedup_vs_msa column."""
    return text, table, {"attention": attention, "mode": mode}, "speedup_vs_msa", "{:.2f}"


def _speedups(table: str) -> dict[tuple[str, str], float]:
    """A benchmark CSV's speedup_vs_msa by (attention, mode)."""
    return {(r["attention"], r["mode"]): float(r["speedup_vs_msa"]) for r in read_results(table)}


def _speed_pair(text: str, table: str, attention: str) -> list[tuple]:
    """Both halves of an inference / training README speed claim (``text`` has a slot for each), each
    checked on its own with the other half filled in from the CSV."""
    speed = _speedups(table)
    return [_speed(text.format("{}", f"{speed[attention, 'train']:.2f}"), table, attention, "infer"),
            _speed(text.format(f"{speed[attention, 'infer']:.2f}", "{}"), table, attention, "train")]


# README claims read off a results CSV: (the README text around the number, the CSV, the row's
# selection, the column, how it is shown, the runs; see ``claimed``). The number shown must be the
# CSV's, rounded as shown.
README_NUMBERS = [
    ("| 2 CPU cores, fp32, batch 1 | 1024² | {}x", "vitb.csv", {"attention": "hydra", "height": "1024"},
     "speedup_vs_msa", "{:.2f}"),
    ("| 2.03x (one run, `docs/results/vitb.csv`) | – | {} |", "vitb.csv", {"attention": "hydra", "height": "1024"},
     "flop_ideal_vs_msa", "{:.2f}"),
    ("`kv` averaged) | {}x @1024² (this model)", "seg_demo_table.csv", {"plan": "hydra+mean+dwc7@converted"},
     "speedup_big", "{:.2f}"),
    ("the conversion {} minutes more on its first run", "seg_demo_table.csv", {"plan": "hydra+mean+dwc7@converted"},
     "convert_min", "{:.1f}"),
    ("no global term: 47.7 ± 0.5) | {}x @1024²", "seg_large_table.csv", {"plan": "hydra+mean+dwc7@converted"},
     "speedup_big", "{:.2f}"),
    ("(local branch alone: {}x)", "seg_large_table.csv", {"plan": "local+dwc7@converted"}, "speedup_big", "{:.2f}"),
    ("| 92.1 ± 1.9 | {}x @32x224²", "video_demo_table.csv", {"plan": "hydra@converted"}, "speedup_big", "{:.2f}"),
    # which backbone for which task: a row's accuracy cell and its speed cell
    recipe_claim("| {} vs 48.0 ± 2.5 (large-token track, 3 seeds)", "seg_large_runs.csv", "local+dwc7@converted", 3),
    recipe_claim("47.7 ± 0.5 vs {} (large-token track, 3 seeds)", "seg_large_runs.csv", "msa", 3),
    ("| {}x (CPU); H200: 1.52x", "seg_large_table.csv", {"plan": "local+dwc7@converted"}, "speedup_big", "{:.2f}"),
    *_speed_pair("2.20x (CPU); H200: {}x / {}x |", "context_speed_h200.csv", "local+dwc7"),
    *_speed_pair("| {}x / {}x (CPU); H200: 1.05x", "context_speed_cpu.csv", "vitdet8_msa"),
    *_speed_pair("1.88x (CPU); H200: {}x / {}x |", "context_speed_h200.csv", "vitdet8_msa"),
    recipe_claim("| {} vs 93.4 ± 0.1 (3 seeds each)", PRESENCE_WHOLE_UPER, "vitdet8_windows", 3),
    recipe_claim("92.6 ± 0.1 vs {} (3 seeds each)", PRESENCE_WHOLE_UPER, "msa", 3),
    recipe_claim("| {} vs ViTDet-MSA 93.1 ± 0.1 (3 seeds each)", PRESENCE_WHOLE_UPER_POOL236,
                 "vitdet8_hydra+mean@converted", 3),
    recipe_claim("92.8 ± 0.6 vs ViTDet-MSA {} (3 seeds each)", PRESENCE_WHOLE_UPER_POOL236, "vitdet8_msa", 3),
    recipe_claim("; windows alone {} (3 seeds) |", PRESENCE_WHOLE_UPER_POOL236, "vitdet8_windows", 3),
    *_speed_pair("| {}x / {}x (CPU); H200: 1.23x", "context_speed_cpu.csv", "vitdet8_hydra+mean"),
    *_speed_pair("3.40x (CPU); H200: {}x / {}x |", "context_speed_h200.csv", "vitdet8_hydra+mean"),
    *_speed_pair("| {}x / {}x (CPU); H200: 1.07x", "context_speed_cpu.csv", "vitdet8_windows"),
    *_speed_pair("3.19x (CPU); H200: {}x / {}x |", "context_speed_h200.csv", "vitdet8_windows"),
    _score("linear head: ViTDet-MSA {} vs MSA 62.3 (seed 0)", RELATION, "vitdet8_msa"),
    _score("linear head: ViTDet-MSA 62.9 vs MSA {} (seed 0)", RELATION, "msa", seed=0),
    recipe_claim("| {} vs 91.8 ± 0.1 (3 seeds each)", RELATION_WHOLE_UPER, "vitdet8_windows", 3),
    recipe_claim("88.5 ± 0.7 vs {} (3 seeds each)", RELATION_WHOLE_UPER, "msa", 3),
    recipe_claim("trained without the bin {} (3 seeds)", RELATION_WHOLE_UPER_POOL236, "vitdet8_windows", 3),
    _score("(3 seeds), ViTDet-MSA {} (1 seed), its global blocks", RELATION_WHOLE_UPER_POOL236, "vitdet8_msa"),
    recipe_claim("converted to Hydra {} (3 seeds) |", RELATION_WHOLE_UPER_POOL236, "vitdet8_hydra+mean@converted", 3),
]


@pytest.mark.parametrize("claim", README_NUMBERS, ids=[r[0][:40] for r in README_NUMBERS])
def test_readme_numbers_are_their_csvs(claim: tuple):
    expected = claimed(*claim)
    assert expected in (ROOT / "README.md").read_text(), f"README does not say {expected!r} ({claim[1]} {claim[3]})"


def test_readme_headline_speed_of_vitdet_hydra_over_vitdet_msa_is_the_cpu_csvs_ratio():
    """The headline's "at 1.8x its speed": ViTDet-Hydra's speedup over ViTDet-MSA's, both modes."""
    speed = _speedups("context_speed_cpu.csv")
    ratios = {f"{speed['vitdet8_hydra+mean', m] / speed['vitdet8_msa', m]:.1f}" for m in ("infer", "train")}
    assert len(ratios) == 1, f"inference and training give {ratios}: the headline names one ratio"
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"at {ratios.pop()}x its speed at 1024² on the CPU" in text


def test_readme_presence_linear_head_cell_is_the_mean_and_std_of_three_seeds():
    shown = {}
    for recipe in ("local+dwc7@converted", "msa", "vitdet8_msa", "vitdet8_windows"):
        scores = _recipe_scores("context_presence_cpu_runs.csv", recipe)
        assert len(scores) == 3, recipe
        shown[recipe] = mean_std_shown(scores)
    text = (f"head with no global pool (linear), 3 seeds: {shown['vitdet8_msa']} vs {shown['msa']}; without global "
            f"attention (`local+dwc7`, windows alone) {shown['local+dwc7@converted']}, {shown['vitdet8_windows']} |")
    assert text in (ROOT / "README.md").read_text(), text


def test_readme_relation_linear_head_gaps_of_local_dwc7_to_msa_are_per_seed():
    msa = {r["seed"]: float(r["score"]) for r in read_results(RELATION) if r["recipe"] == "msa"}
    local = {r["seed"]: float(r["score"]) for r in read_results(RELATION) if r["recipe"] == "local+dwc7@converted"}
    seeds = sorted(set(msa) & set(local))
    assert seeds == ["0", "1"], f"{RELATION}: MSA and `local+dwc7` share seeds {seeds}"
    gaps = " and ".join(f"{msa[s] - local[s]:.1f}" for s in seeds)
    text = f"`local+dwc7` {gaps} below MSA (seeds {', '.join(seeds)})"
    assert text in (ROOT / "README.md").read_text(), text


def test_readme_headline_gaps_to_msa_for_windows_alone_are_their_csvs():
    """The headline's "(X and Y mIoU below MSA on the two tracks)": on each track MSA's mean against
    windows alone's, both trained whole under UPerNet (the table's cells pin their seed counts); the
    windows-only backbone YAML's comment says the same with its seed counts."""
    gaps = [mean_gap(table, "msa", "vitdet8_windows") for table in (PRESENCE_WHOLE_UPER, RELATION_WHOLE_UPER)]
    claim = (f"ViTDet's windows alone, its head's global pool carrying the scene ({gaps[0]:.1f} and {gaps[1]:.1f} "
             f"mIoU below MSA on the two tracks)")
    assert claim in " ".join((ROOT / "README.md").read_text().split()), claim
    seeds = [len(_recipe_scores(table, recipe)) for recipe in ("vitdet8_windows", "msa")
             for table in (PRESENCE_WHOLE_UPER, RELATION_WHOLE_UPER)]
    assert seeds[0] == seeds[1], f"windows alone has {seeds[0]} and {seeds[1]} seeds on the two tracks"
    msa_seeds = " and ".join(dict.fromkeys(map(str, seeds[2:])))  # "3" when both tracks have 3, else "2 and 3"
    yaml_comment = (ROOT / "configs" / "backbones" / "vit_s14_dinov2_window8_only.yaml").read_text()
    yaml_comment = " ".join(line.lstrip("# ") for line in yaml_comment.splitlines() if line.startswith("#"))
    for said in (f"(presence track, {gaps[0]:.1f} mIoU below MSA)", f"(relation track, {gaps[1]:.1f} below MSA)",
                 f"{seeds[0]} seeds of windows, {msa_seeds} of MSA"):
        assert said in yaml_comment, f"vit_s14_dinov2_window8_only.yaml does not say {said!r}"


def test_development_md_names_only_paths_that_exist_and_every_package():
    """docs/development.md's layers and file list stay true: every path it names exists, every
    package of hydra_dense is in its layers, and each worker module it names runs as a module."""
    import re

    text = (ROOT / "docs" / "development.md").read_text()
    named = set(re.findall(r"\b((?:hydra_dense|tools|configs|tests)/[\w/.-]*\w)", text))
    missing = sorted(p for p in named if "<" not in p and not (ROOT / p).exists())
    assert not missing, f"docs/development.md names paths that do not exist: {missing}"
    packages = sorted(p.name for p in (ROOT / "hydra_dense").iterdir() if (p / "__init__.py").is_file())
    layers = text.split("## ", 2)[1]
    assert not [p for p in packages if f"{p}/" not in layers], f"packages missing from the layers: {packages}"
    for module in re.findall(r"``(hydra_dense\.[\w.]+)``", text):
        path = ROOT / (module.replace(".", "/") + ".py")
        assert path.is_file() or (ROOT / module.replace(".", "/") / "__main__.py").is_file(), module


def test_development_md_lists_every_command_with_the_module_it_runs():
    """The Commands table: every script in tools/ and every console script in setup.cfg, each
    running the module the table names."""
    import configparser
    import re

    text = (ROOT / "docs" / "development.md").read_text()
    rows = re.findall(r"^\| (`tools/\w+\.py`|–) \| (`[\w-]+`|–) \| `(hydra_dense/[\w/]+)\.py` \|$", text, re.M)
    assert rows, "docs/development.md has no Commands table"
    listed_tools = {tool.strip("`") for tool, _, _ in rows if tool != "–"}
    assert listed_tools == {f"tools/{p.name}" for p in (ROOT / "tools").glob("*.py")}
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    scripts = dict(line.split(" = ") for line in cfg["options.entry_points"]["console_scripts"].split("\n") if line)
    listed_scripts = {script.strip("`"): module for _, script, module in rows if script != "–"}
    assert set(listed_scripts) == set(scripts)
    for script, module in listed_scripts.items():
        assert scripts[script].split(":")[0] == module.replace("/", "."), script
    for tool, _, module in rows:
        if tool != "–":
            source = (ROOT / tool.strip("`")).read_text()
            assert f"from {module.replace('/', '.')} import" in source, f"{tool} does not run {module}"


def test_every_module_that_runs_as_a_program_is_listed():
    """A module with a ``__main__`` block is a command (the Commands table) or a ``python -m``
    module (the table after it): nothing runs that docs/development.md does not list."""
    import re

    text = (ROOT / "docs" / "development.md").read_text()
    listed = set(re.findall(r"^\|[^|\n]*\| (?:[^|\n]*\| )?`(hydra_dense/[\w/]+\.py)` \|", text, re.M))
    listed |= set(re.findall(r"^\| `(hydra_dense/[\w/]+\.py)` \|", text, re.M))
    runnable = {str(p.relative_to(ROOT)) for p in (ROOT / "hydra_dense").rglob("*.py")
                if 'if __name__ == "__main__"' in p.read_text()}
    assert runnable - listed == set(), f"runnable modules docs/development.md does not list: {runnable - listed}"
