"""tools/hydra_paths.py: a finished run evaluated intact and with each Hydra path zeroed, per class, on
its own validation split or on another folder's."""
import json
import shutil

import pytest

from hydra_dense.comparison.path_diagnostic import main
from tests.helpers.compare_runs import compare_seg_config, run_compare
from tests.helpers.images import make_ade


def _rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[4:] if line.startswith("|")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("paths")
    run_compare(tmp, compare_seg_config(tmp), "out", "--plans", "msa,hydra+dwc3", "--seeds", "0")
    other = make_ade(tmp / "other", n_train=1, n_val=3)  # other validation scenes, the same 4 classes
    return tmp / "out", tmp / "data", other


def test_the_runs_own_data_given_as_data_root_reproduces_its_score_and_each_path_is_a_row(runs):
    out, own, _ = runs
    run = out / "hydra+dwc3" / "seed0"
    assert main(["--run", str(run), "--data-root", str(own)]) == 0
    table = (run / "paths_data.md").read_text()
    header, rows = table.splitlines()[2], _rows(table)
    assert header.count(" IoU |") == 4, header  # one column per class
    assert [r[0].split(" in ")[0] for r in rows] == ["intact", "global term zero", "local branch zero"]
    score = json.loads((run / "result.json").read_text())["score"]
    assert rows[0][1] == f"{score:.1f}"  # the same weights on the same scenes: the run's own validation score
    assert all(len(r) == 1 + 1 + 4 + 1 for r in rows)


def test_another_folder_is_evaluated_and_named_and_an_msa_run_gets_its_intact_row(runs):
    out, _, other = runs
    run = out / "msa" / "seed0"
    assert main(["--run", str(run), "--data-root", str(other)]) == 0
    table = (run / "paths_other.md").read_text()
    assert f"{other}'s validation split" in table.splitlines()[0]
    rows = _rows(table)
    assert len(rows) == 1 and rows[0][0].startswith("intact (no Hydra / linear block")
    own_score = json.loads((run / "result.json").read_text())["score"]
    assert float(rows[0][1]) != round(own_score, 1)  # other scenes, another score (6.5 against 9.6 here)


def test_a_data_root_that_is_not_a_folder_is_refused_by_name(runs, tmp_path, capsys):
    out, _, _ = runs
    with pytest.raises(SystemExit):
        main(["--run", str(out / "msa" / "seed0"), "--data-root", str(tmp_path / "missing")])
    assert f"--data-root: {tmp_path / 'missing'} is not a folder" in capsys.readouterr().err


def test_a_run_whose_config_has_moved_away_is_refused_naming_its_request(runs, tmp_path, capsys):
    out, _, _ = runs
    run = tmp_path / "copied_run"
    shutil.copytree(out / "msa" / "seed0", run)
    request = json.loads((run / "request.json").read_text())
    request["config"] = str(tmp_path / "gone.yaml")
    (run / "request.json").write_text(json.dumps(request))
    with pytest.raises(SystemExit):
        main(["--run", str(run)])
    assert f"names the config {tmp_path / 'gone.yaml'}, which no longer exists" in capsys.readouterr().err
