"""What the comparison prints: progress a person can follow, no known noise, options named when bad."""
import json

import pytest

from tests.helpers.compare_runs import compare_seg_config, run_compare


def test_the_job_says_how_far_it_is_and_none_of_the_known_noise(tmp_path, capfd):
    """Run k of N with elapsed time and an ETA, the step of each run, each score when known, the
    recipe's mean ± std; none of Lightning's advice, tips or warnings the job causes itself."""
    config = compare_seg_config(tmp_path, steps=4, lr=3e-3)
    run_compare(tmp_path, config, "progress", "--plans", "hydra", "--seeds", "0,1")
    out = "".join(capfd.readouterr())
    assert "=== [hydra] seed 0: run 1/2 | elapsed " in out and "2 run(s) left ===" in out
    assert "=== [hydra] seed 1: run 2/2 | elapsed " in out and "1 run(s) left, ETA " in out
    assert "[hydra seed 0] step 4/4 | " in out and "[compare] hydra seed 1: val_mIoU " in out
    assert "[compare] hydra: val_mIoU " in out and " over 2 seed(s)" in out
    for noise in ("args parameter is intended", "Tip: For seamless", "exists and is not empty", "LeafSpec",
                  "Total Flops"):
        assert noise not in out, noise


def test_a_bad_seed_list_names_the_option(capsys):
    from hydra_dense.comparison.command import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--seeds", "0,x"])
    assert "--seeds: expected comma-separated integers such as 0,1,2, got '0,x' ('x' is not an integer)" in \
        capsys.readouterr().err


def test_the_reading_tolerance_reaches_the_job_and_a_negative_one_names_the_option(capsys):
    from hydra_dense.comparison.command import parse_args

    assert parse_args([])[0].reading_tolerance == 1.0
    assert parse_args(["--reading-tolerance", "2.5"])[0].reading_tolerance == 2.5
    with pytest.raises(SystemExit):
        parse_args(["--reading-tolerance=-1"])
    assert "--reading-tolerance: expected points >= 0" in capsys.readouterr().err


def test_a_second_request_into_the_same_folder_keeps_the_first_and_says_what_differs(tmp_path):
    """A run is reused only for exactly its request: another request's finished run is refused naming
    the difference (nothing retrained in place), and a table that lists fewer recipes than the folder
    holds names the others."""
    import json

    from hydra_dense.comparison.runs import RunClash

    config = compare_seg_config(tmp_path, steps=2)
    run_compare(tmp_path, config, "out", "--plans", "msa,hydra", "--seeds", "0")
    first = tmp_path / "out" / "msa" / "seed0" / "result.json"
    before = first.read_text()
    with pytest.raises(RunClash, match=r"out/msa/seed0 holds a finished run of another request \(max_steps: 0 -> 3\); "
                                       r"use another --out, or --rerun to replace it"):
        run_compare(tmp_path, config, "out", "--plans", "msa,hybrid1", "--seeds", "0", "--max-steps", "3")
    assert first.read_text() == before
    run_compare(tmp_path, config, "out", "--plans", "msa,hybrid1", "--seeds", "0")  # msa reused, hybrid1 trained
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| hybrid1 |" in table and "| hydra |" not in table
    assert "Also finished in" in table and "hydra (seed 0)" in table
    assert json.loads(first.read_text()) == json.loads(before)


def test_a_comment_or_reordered_config_reuses_the_finished_run_and_another_value_is_refused(tmp_path):
    import yaml

    from hydra_dense.comparison.command import main as compare_main
    from hydra_dense.comparison.runs import RunClash

    config = compare_seg_config(tmp_path, steps=2)
    task = tmp_path / "task.yaml"
    args = ["--config", str(task), "--pretrained", "none", "--out", str(tmp_path / "out"), "--speed-size", "0",
            "--plans", "msa", "--seeds", "0"]
    task.write_text(yaml.safe_dump(config))
    assert compare_main(args) == 0
    done = tmp_path / "out" / "msa" / "seed0" / "result.json"
    before = done.read_text()
    task.write_text("# the same task, commented and in another key order\n" +
                    yaml.safe_dump(dict(reversed(list(config.items()))), sort_keys=False))
    assert compare_main(args) == 0
    assert done.read_text() == before  # reused, not trained again
    config["trainer"]["max_steps"] = 3
    task.write_text(yaml.safe_dump(config))
    with pytest.raises(RunClash, match=r"holds a finished run of another request \(the content of .*task.yaml changed\)"):
        compare_main(args)
    assert done.read_text() == before


def test_repeated_seeds_and_a_file_as_out_are_refused(tmp_path):
    config = compare_seg_config(tmp_path, steps=2)
    with pytest.raises(ValueError, match=r"--seeds 0,0: seed 0 is listed twice"):
        run_compare(tmp_path, config, "a", "--plans", "msa", "--seeds", "0,0")
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ValueError, match=r"--out .*file is a file; give a folder"):
        run_compare(tmp_path, config, "file", "--plans", "msa")


def test_one_seed_shows_the_score_alone():
    from hydra_dense.comparison.report import _fmt_pm

    one = _fmt_pm(dict(seeds="0", score=15.7, score_std=0.0, global_zeroed=15.0, global_zeroed_std=0.0))
    assert one["score"] == "15.7 (1 seed)" and one["global_zeroed"] == "15.0 (1 seed)"
    assert _fmt_pm(dict(seeds="0,1,2", score=15.7, score_std=1.25))["score"] == "15.7 ± 1.2"


def test_a_half_written_result_reads_as_not_finished_and_the_run_trains_again(tmp_path, capfd):
    config = compare_seg_config(tmp_path, steps=2)
    run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0")
    result = tmp_path / "out" / "msa" / "seed0" / "result.json"
    result.write_text(result.read_text()[:40])  # a writer killed half-way (the atomic writer prevents it)
    capfd.readouterr()
    run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0")
    assert f"{result} is not complete (a run killed while writing it): running it again" in capfd.readouterr().out
    assert result.read_text().rstrip().endswith("}")


def test_a_killed_run_goes_on_from_its_last_checkpoint_and_rerun_starts_over(tmp_path, capfd):
    config = compare_seg_config(tmp_path, steps=2)
    run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0")
    run_dir = tmp_path / "out" / "msa" / "seed0"
    (run_dir / "result.json").unlink()  # killed after its last checkpoint, before its result
    left = next(run_dir.glob("lightning_logs/version_*/checkpoints/last.ckpt"))
    capfd.readouterr()
    run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0")
    assert f"resuming from {left}" in capfd.readouterr().out
    assert json.loads((run_dir / "result.json").read_text())["steps"] == 2
    run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0", "--rerun")
    assert "resuming" not in capfd.readouterr().out


def test_a_killed_rerun_keeps_the_finished_result_and_a_busy_run_folder_is_refused(tmp_path, monkeypatch):
    """--rerun replaces a result only with a finished one; a run folder that another comparison is
    writing is refused at once (two jobs into one --out would mix their runs)."""
    import subprocess

    from hydra_dense.comparison import runs
    from hydra_dense.runtime.folder_lock import FolderBusy, folder_lock

    config = compare_seg_config(tmp_path, steps=2)
    run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0")
    result = tmp_path / "out" / "msa" / "seed0" / "result.json"
    before = result.read_text()
    killed = subprocess.CompletedProcess([], -15)
    monkeypatch.setattr(runs.subprocess, "run", lambda *a, **k: killed)  # the worker is killed at once
    with pytest.raises(Exception, match="run msa seed 0 failed \\(exit -15"):
        run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0", "--rerun")
    assert result.read_text() == before
    monkeypatch.undo()
    with folder_lock(result.parent, "the first comparison"):
        with pytest.raises(FolderBusy, match="is being written by another comparison right now"):
            run_compare(tmp_path, config, "out", "--plans", "msa", "--seeds", "0")
