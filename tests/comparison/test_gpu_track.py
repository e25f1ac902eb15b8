"""The GPU track's command (its CPU dry run, ``python tools/gpu_track.py --dry-run``, takes about 8
minutes on 2 cores: run by hand, not in the suite)."""
import json
from dataclasses import asdict

from hydra_dense.comparison.gpu_track import (GPU_TRACK_PLANS, finished_score, ready_runs,
                                        track_options, track_runs, worker_options)
from hydra_dense.comparison.options import ComparisonOptions


def test_the_full_scale_comparison_is_three_seeds_of_1000_steps_in_bf16_with_the_user_s_settings_last():
    whole = track_options(False, "runs/x", ["--trainer.gradient_clip_val=1.0", "--speed-repeats", "3"])
    assert (whole.seeds, whole.max_steps, whole.plans, whole.speed_repeats) == ([0, 1, 2], 1000, GPU_TRACK_PLANS, 3)
    assert whole.overrides == ["--trainer.val_check_interval=500", "--trainer.precision=bf16-mixed",
                               "--data.init_args.num_workers=4", "--trainer.gradient_clip_val=1.0"]
    toy = track_options(True, "runs/x", [])
    assert (toy.seeds, toy.max_steps, toy.convert_steps, toy.speed_size) == ([0], 2, 2, "0")


def test_a_comparison_option_the_track_sets_itself_is_refused_rather_than_dropped():
    import pytest

    for extra in (["--plans", "msa"], ["--max-steps=5"], ["--seeds", "3"]):
        with pytest.raises(ValueError, match=extra[0].split("=")[0] + ": the GPU track sets"):
            track_options(False, "runs/x", extra)


def test_a_worker_asks_for_its_run_exactly_as_the_last_pass_does(tmp_path):
    """The last pass reuses a worker's run only if every training setting matches; a mismatch
    would silently train all nine runs again. The worker reads its options from a file, as written."""
    whole = track_options(False, "runs/x", ["--trainer.gradient_clip_val=1.0"])
    one = worker_options(whole, "local+dwc7@converted", 2)
    assert (one.plans, one.seeds, one.speed_size) == ("local+dwc7@converted", [2], "0")
    assert whole.speed_size == "1024"
    differ = {k for k, v in asdict(one).items() if asdict(whole)[k] != v}
    assert differ == {"plans", "seeds", "speed_size"}
    assert "--trainer.gradient_clip_val=1.0" in one.overrides
    request = tmp_path / "options.json"
    request.write_text(json.dumps(one.as_json()))
    assert ComparisonOptions.read(request) == one
    request.write_text(json.dumps(dict(one.as_json(), plan="msa")))
    import pytest

    with pytest.raises(ValueError, match="not a comparison request"):
        ComparisonOptions.read(request)


def test_a_recipe_s_other_seeds_wait_for_its_first_so_each_conversion_runs_once():
    hydra, local = "hydra+mean+dwc7@converted", "local+dwc7@converted"
    runs = track_runs(f"msa,{hydra},{local}")
    assert len(runs) == 9 and len(set(runs)) == 9
    assert ready_runs(runs, set()) == [("msa", 0), (hydra, 0), (local, 0), ("msa", 1), ("msa", 2)]
    after_hydra = [r for r in runs if r not in {("msa", 0), (hydra, 0), (local, 0), ("msa", 1), ("msa", 2)}]
    assert ready_runs(after_hydra, {(hydra, 0)}) == [(hydra, 1), (hydra, 2)]


def test_a_finished_run_s_score_is_read_from_where_the_comparison_writes_it(tmp_path):
    """Each score reaches the job's output when its run ends, so a job cut off before the table
    still shows it; a run without its result says so instead of failing the job."""
    run = tmp_path / "hydra+mean+dwc7@converted" / "seed1"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"metric": "val_mIoU", "score": 66.912}))
    assert finished_score(tmp_path, "hydra+mean+dwc7@converted", 1).startswith("val_mIoU 66.91 (")
    assert finished_score(tmp_path, "msa", 0).startswith("no score (")


def test_with_conversions_run_apart_a_recipe_waits_for_its_conversion_and_nothing_else():
    waiting = track_runs(GPU_TRACK_PLANS) + [("vitdet8_windows", 0)]
    ready = ready_runs(waiting, set(), prepared=set())
    assert ("msa", 2) in ready and ("vitdet8_windows", 0) in ready
    assert not [r for r in ready if "@converted" in r[0]]
    ready = ready_runs(waiting, set(), prepared={"local+dwc7@converted"})
    assert {s for p, s in ready if p == "local+dwc7@converted"} == {0, 1, 2}
    assert not [r for r in ready if r[0] == "hydra+mean+dwc7@converted"]


def test_the_controls_are_msa_and_each_control_at_the_first_seed_of_the_same_request():
    from hydra_dense.comparison.gpu_track import controls_options

    whole = track_options(False, "runs/x", [], "configs/segmentation/demo_context_presence.yaml", 600)
    controls = controls_options(whole, "vitdet8_msa,vitdet8_windows")
    assert (controls.plans, controls.seeds) == ("msa,vitdet8_msa,vitdet8_windows", [0])
    assert {k for k, v in asdict(controls).items() if asdict(whole)[k] != v} == {"plans", "seeds"}
    assert whole.max_steps == 600 and str(whole.config).endswith("demo_context_presence.yaml")


def test_workers_run_from_their_options_files_and_the_last_pass_reuses_their_runs(tmp_path, monkeypatch):
    """Two runs side by side, each a comparison process reading the options file beside its log
    (the one way the track hands work to a process); the last pass trains nothing again."""
    import yaml

    from hydra_dense.comparison import gpu_track
    from hydra_dense.comparison.job import run_comparison
    from hydra_dense.comparison.command import parse_args
    from tests.helpers.compare_runs import compare_seg_config

    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(compare_seg_config(tmp_path, steps=2)))
    out = tmp_path / "out"
    full, _ = parse_args(["--config", str(config), "--plans", "msa,hydra", "--pretrained", "none", "--out", str(out),
                          "--seeds", "0", "--speed-size", "0", "--speed-repeats", "1"])
    monkeypatch.setattr(gpu_track, "START_FOLDER", tmp_path)
    gpu_track._run_together([("msa", 0), ("hydra", 0)], full, out, at_once=2)
    requests = sorted((out / "logs").glob("*.options.json"))
    assert [r.name for r in requests] == ["hydra_seed0.options.json", "msa_seed0.options.json"]
    assert ComparisonOptions.read(requests[1]) == worker_options(full, "msa", 0)
    trained = {p: (out / p / "seed0" / "result.json").stat().st_mtime for p in ("msa", "hydra")}
    rows = run_comparison(full)
    assert [r["plan"] for r in rows] == ["msa", "hydra"]
    assert trained == {p: (out / p / "seed0" / "result.json").stat().st_mtime for p in ("msa", "hydra")}
