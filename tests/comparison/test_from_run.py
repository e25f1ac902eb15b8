"""``hydra-dense-convert --from-run``: a finished ``hydra-dense-train fit`` MSA run converted on its own
training images, fine-tuned with its head, and reported next to the run's own model."""
import csv
import json

import pytest
import torch
import yaml

from hydra_dense.comparison.convert_command import main as convert_main
from hydra_dense.comparison.from_run import find_run
from tests.helpers.tiny_runs import last_val_metrics, ok, train, write_config

CONVERSION = {
    "trainer": {"accelerator": "cpu", "enable_progress_bar": False, "num_sanity_val_steps": 0, "val_check_interval": 2,
                "check_val_every_n_epoch": None},
    "model": {"class_path": "hydra_dense.conversion.ConversionTask", "init_args": {
        "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {"size": "tiny"}}, "lr": 3e-3,
        "warmup_steps": 1}},
    "data": {"class_path": "hydra_dense.conversion.ConversionImages", "init_args": {
        "task_config": "placeholder.yaml", "val_every": 4, "crop_size": 32, "batch_size": 4, "val_batch_size": 4,
        "num_workers": 0}}}


# task -> (its score's metric, fit steps, training images of the tiny data, conversion crop)
TASKS = {"segmentation": ("val_mIoU", 12, 20, 32), "detection": ("val_mAP", 8, 12, 64)}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_finished_msa_run_is_converted_fine_tuned_and_reported(task, tmp_path, monkeypatch):
    metric, fit_steps, n_train, crop = TASKS[task]
    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    config = write_config(task, tmp_path)
    run_dir = tmp_path / "run"
    ok(train("fit", config, run_dir, "--model.init_args.backbone.init_args.plan=msa"))
    found = find_run(run_dir)
    assert found.weights.name == "last.ckpt" and found.steps == fit_steps and found.seed == 0
    conv = tmp_path / "convert.yaml"
    conversion = json.loads(json.dumps(CONVERSION))
    conversion["data"]["init_args"]["crop_size"] = crop
    conv.write_text(yaml.safe_dump(conversion))
    out = tmp_path / "fast"
    assert convert_main(["--from-run", str(run_dir), "--plan", "hydra+dwc3", "--steps", "2", "--convert-config",
                         str(conv), "--convert-steps", "2", "--speed-size", "0", "--out", str(out)]) == 0

    rows = {r["plan"]: r for r in csv.DictReader((out / "table.csv").open())}
    # the run's own model, evaluated as it is: the score its own last validation logged
    assert float(rows["msa"]["score"]) == pytest.approx(100 * last_val_metrics(run_dir)[metric], abs=1e-3)
    assert rows["msa"]["steps"] == str(fit_steps)
    fast = rows["hydra+dwc3@from_msa"]
    assert fast["attention"] == "hydra+dwc3 x2" and fast["steps"] == "2" and float(fast["convert_min"]) > 0
    assert "train split, labels unused" in fast["convert_data"]
    # converted from the run's weights, on its training images, the run's head loaded before the fine-tune
    req = json.loads((out / "hydra+dwc3@from_msa" / "seed0" / "request.json").read_text())
    msa_weights = out / "msa" / "seed0" / "msa_weights.pt"
    assert req["head_from"] == str(msa_weights)
    meta = torch.load(req["converted"], map_location="cpu", weights_only=True)["hydra_dense"]
    assert meta["source"] == str(msa_weights) and f"{n_train - n_train // 4} train / {n_train // 4} val images" in meta["data"]
    run_state = torch.load(found.weights, map_location="cpu", weights_only=False)["state_dict"]
    saved = torch.load(msa_weights, map_location="cpu", weights_only=True)
    assert saved.keys() == run_state.keys() and all(torch.equal(saved[k], run_state[k]) for k in saved)
    assert (out / "report.html").is_file()
    # the control: the run itself fine-tuned again for the same steps, without conversion
    control = rows["msa@continued"]
    assert control["attention"] == "msa x2" and control["steps"] == "2"
    assert json.loads((out / "msa@continued" / "seed0" / "request.json").read_text())["converted"] == str(msa_weights)
    header = (out / "table.md").read_text().splitlines()[0]
    assert "pretrained: none" not in header and f"the run itself: {found.weights}" in header


def test_a_finished_video_run_is_converted_on_its_own_clips(tmp_path, monkeypatch):
    """Without --convert-config a video run converts with the video conversion schedule on the run's own
    data section (its training clips, labels unused), not the demo's clips."""
    pytest.importorskip("av")
    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    config = write_config("video", tmp_path)
    run_dir = tmp_path / "run"
    ok(train("fit", config, run_dir, "--model.init_args.backbone.init_args.plan=msa"))
    out = tmp_path / "fast"
    assert convert_main(["--from-run", str(run_dir), "--plan", "hydra+dwc3", "--steps", "2", "--convert-steps", "2",
                         "--speed-size", "0", "--out", str(out)]) == 0
    run_data = yaml.safe_load(config.read_text())["data"]
    written = yaml.safe_load((out / "convert_config.yaml").read_text())
    assert written["data"]["class_path"] == run_data["class_path"]
    assert written["data"]["init_args"]["root"] == run_data["init_args"]["root"]
    rows = {r["plan"]: r for r in csv.DictReader((out / "table.csv").open())}
    assert float(rows["msa"]["score"]) == pytest.approx(100 * last_val_metrics(run_dir)["val_top1"], abs=1e-3)
    fast = rows["hydra+dwc3@from_msa"]
    assert fast["attention"] == "hydra+dwc3 x2" and "16 train / 5 val clips" in fast["convert_data"]


def test_from_run_names_what_is_missing_or_already_hydra(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        convert_main(["--from-run", str(tmp_path / "nowhere")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.yaml under"):
        convert_main(["--from-run", str(tmp_path / "empty")])
    logs = tmp_path / "no_ckpt" / "lightning_logs" / "version_0"
    logs.mkdir(parents=True)
    (logs / "config.yaml").write_text("seed_everything: 0\n")
    with pytest.raises(FileNotFoundError, match=r"no checkpoint \(\*.ckpt\) under"):
        convert_main(["--from-run", str(tmp_path / "no_ckpt")])
    second = tmp_path / "no_ckpt" / "lightning_logs" / "version_1"
    second.mkdir()
    (second / "config.yaml").write_text("seed_everything: 1\n")
    with pytest.raises(ValueError, match=r"holds 2 runs \(a config.yaml in each of lightning_logs/version_0, "
                                         r"lightning_logs/version_1\); give the folder of the one to convert"):
        convert_main(["--from-run", str(tmp_path / "no_ckpt")])


def test_from_run_refuses_a_run_that_is_not_softmax(tmp_path, monkeypatch):
    from hydra_dense.comparison.from_run import FinishedRun, FromRunOptions, convert_run

    config = write_config("segmentation", tmp_path)  # the tiny config's backbone runs Hydra
    run = FinishedRun(config, [], tmp_path / "unused.ckpt", 0, 0)
    with pytest.raises(ValueError, match="already runs hydra x2"):
        convert_run(run, FromRunOptions(tmp_path / "out", "hydra", speed_size="0"))
    assert not (tmp_path / "out").exists()  # a refused run leaves nothing behind


def test_convert_help_shows_its_two_modes_and_from_run_help_works(capsys):
    assert convert_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "hydra-dense-convert --from-run RUN_DIR" in out and "fit --help" in out
    assert "--trainer.max_epochs" not in out  # the trainer's ~50 options only with `fit --help`
    with pytest.raises(SystemExit) as exc:
        convert_main(["--from-run", "--help"])
    assert exc.value.code == 0 and "--from-run RUN_DIR" in capsys.readouterr().out


def test_from_run_refuses_a_run_that_has_not_finished(tmp_path):
    """A checkpoint short of the run's max_steps (still training, or stopped) is not converted as if done."""
    logs = tmp_path / "fit" / "lightning_logs" / "version_0"
    (logs / "checkpoints").mkdir(parents=True)
    (logs / "config.yaml").write_text("seed_everything: 0\ntrainer:\n  max_steps: 400\n")
    torch.save({"global_step": 107, "state_dict": {}}, logs / "checkpoints" / "last.ckpt")
    with pytest.raises(ValueError, match="is unfinished: its newest checkpoint last.ckpt is at step 107 of "
                                         "trainer.max_steps 400"):
        find_run(tmp_path / "fit")
    torch.save({"global_step": 400, "state_dict": {}}, logs / "checkpoints" / "last.ckpt")
    assert find_run(tmp_path / "fit").steps == 400
    run = tmp_path / "compare" / "msa" / "seed0"
    run.mkdir(parents=True)
    (run / "request.json").write_text("{}")
    (run / "final_weights.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="is unfinished: it has no result.json yet"):
        find_run(run)


def test_a_misspelt_plan_is_refused_before_anything_is_written(tmp_path):
    from hydra_dense.comparison.from_run import FinishedRun, FromRunOptions, convert_run

    config = tmp_path / "msa.yaml"
    loaded = yaml.safe_load(write_config("segmentation", tmp_path).read_text())
    loaded["model"]["init_args"]["backbone"]["init_args"]["plan"] = "msa"
    config.write_text(yaml.safe_dump(loaded))
    run = FinishedRun(config, [], tmp_path / "unused.ckpt", 0, 0)
    with pytest.raises(ValueError, match="unknown plan 'hydar'"):
        convert_run(run, FromRunOptions(tmp_path / "out", "hydar", speed_size="0"))
    assert not (tmp_path / "out").exists()  # no run_config.yaml left behind
