"""Known refusals at the entry points: one ``error:`` line, exit 2, no traceback (``--debug`` brings it
back), nothing left behind; and the inputs that used to be refused with the wrong cause or a
traceback: a weights-only checkpoint, a checkpoint folder, a task on another task's data, a zero batch."""

import pytest
import torch
import yaml

from hydra_dense.runtime.refusal import plain_refusals
from tests.helpers.tiny_runs import ok, train, write_config


def _refused(proc) -> str:
    """The stderr of a refused run: exit 2, an ``error:`` line, no traceback."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    return proc.stderr


def test_an_entry_point_refuses_in_one_line_and_debug_shows_the_traceback(capsys, monkeypatch):
    def main(argv):
        raise FileNotFoundError("--config: x.yaml does not exist")

    monkeypatch.setenv("HYDRA_DENSE_DEBUG", "0")  # undone after the test, with what --debug sets
    assert plain_refusals(main)([]) == 2
    assert capsys.readouterr().err == "error: --config: x.yaml does not exist\n"
    with pytest.raises(FileNotFoundError):
        plain_refusals(main)(["--debug"])

    def bug(argv):
        raise ZeroDivisionError("a bug keeps its traceback")

    with pytest.raises(ZeroDivisionError):
        plain_refusals(bug)([])


def test_a_refused_fit_prints_one_line_and_leaves_no_log_folder(tmp_path):
    config = write_config("segmentation", tmp_path, steps=2, val_every=2)
    masks = sorted((tmp_path / "segmentation_data" / "annotations" / "training").glob("*.png"))
    masks[0].unlink(), masks[3].unlink()
    err = _refused(train("fit", config, tmp_path / "run"))
    assert f"mask {masks[0]} does not exist" in err and f"mask {masks[3]} does not exist" in err
    assert not (tmp_path / "run").exists()  # Lightning's loggers had made a version folder and an events file


def test_a_checkpoint_of_weights_alone_validates_naming_its_assumed_plan_and_fit_refuses_it(seg_run, tmp_path):
    config, ckpt = seg_run
    bare = tmp_path / "weights_only.ckpt"
    torch.save({"state_dict": torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]}, bare)
    proc = ok(train("validate", config, tmp_path / "v", f"--ckpt_path={bare}"))
    warnings = [line for line in proc.stderr.splitlines() if "records no attention plan" in line]
    assert warnings == [f"warning: --ckpt_path: {bare} records no attention plan (not written by hydra_dense); it is "
                        f"assumed to be the config's [hydra x2]"]
    err = _refused(train("fit", config, tmp_path / "f", f"--ckpt_path={bare}"))
    assert "holds weights only (no optimizer or loop state), so fit cannot resume from it" in err


def test_a_checkpoint_folder_and_a_task_class_saved_under_its_package_name(seg_run, tmp_path):
    config, ckpt = seg_run
    err = _refused(train("validate", config, tmp_path / "v", f"--ckpt_path={ckpt.parent}"))
    assert f"--ckpt_path: {ckpt.parent} is a folder, not a checkpoint file; it holds last.ckpt" in err
    # another script saved the task under the package's re-exported name, without hydra_dense's identity
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)
    saved.pop("hydra_dense_model")
    saved["hyper_parameters"]["_class_path"] = "hydra_dense.tasks.SegmentationTask"
    other = tmp_path / "other.ckpt"
    torch.save(saved, other)
    ok(train("validate", config, tmp_path / "v2", f"--ckpt_path={other}"))


def test_a_task_on_another_tasks_data_and_a_zero_batch_are_refused_before_anything_runs(tmp_path):
    seg = write_config("segmentation", tmp_path, steps=2, val_every=2)
    det = yaml.safe_load(write_config("detection", tmp_path).read_text())
    mixed = yaml.safe_load(seg.read_text())
    mixed["data"] = det["data"]
    mixed_path = tmp_path / "mixed.yaml"
    mixed_path.write_text(yaml.safe_dump(mixed))
    err = _refused(train("fit", mixed_path, tmp_path / "m"))
    assert ("model.class_path SegmentationTask trains on segmentation data, but data.class_path DetectionDataModule "
            "gives detection data") in err
    err = _refused(train("fit", seg, tmp_path / "z", "--data.init_args.batch_size=0"))
    assert "data.batch_size must be an integer >= 1, got 0" in err
    assert "| Name" not in err and not (tmp_path / "z").exists()  # before the model summary


def test_an_empty_config_a_key_given_twice_and_a_tab_are_refused_naming_the_file(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    twice = tmp_path / "twice.yaml"
    twice.write_text("trainer:\n  max_steps: 3\n  log_every_n_steps: 1\n  max_steps: 5\n")
    tab = tmp_path / "tab.yaml"
    tab.write_text("trainer:\n\tmax_steps: 3\n")
    for path, words in ((empty, f"{empty} is empty"),
                        (twice, f"{twice}: key 'max_steps' is given twice in one mapping (lines 2 and 4)"),
                        (tab, f"{tab}: not valid YAML: line 2, column 1: found character '\\t' that cannot start "
                              "any token (a tab: YAML indents with spaces only)")):
        stderr = _refused(train("fit", path, tmp_path / "run"))
        assert words in stderr
        assert len(stderr.strip().splitlines()) <= 3  # no usage dump


def test_ctrl_c_stops_an_entry_point_in_one_line_saying_how_to_go_on(capsys, monkeypatch):
    """Ctrl-C on compare: no traceback, and the hint names what that command does next time (not a
    --ckpt_path flag it has not got)."""
    from hydra_dense.comparison import command as compare

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setenv("HYDRA_DENSE_DEBUG", "0")
    monkeypatch.setattr(compare, "run_comparison", interrupted)
    assert compare.entry(["--plans", "msa", "--speed-size", "0"]) == 130
    err = capsys.readouterr().err
    assert "[stopped] interrupted; the same command goes on" in err and "--ckpt_path" not in err
    assert "Traceback" not in err


def test_a_gpu_run_on_a_machine_without_one_is_refused_in_one_line_leaving_no_log_folder(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    config = write_config("segmentation", tmp_path)
    stderr = _refused(train("fit", config, tmp_path / "run", "--trainer.accelerator=gpu", "--trainer.devices=2"))
    assert "this machine has 0 CUDA device(s)" in stderr
    assert not (tmp_path / "run" / "lightning_logs").exists()


def test_an_unwritable_place_is_one_line_naming_it(capsys, monkeypatch):
    """A read-only file system (EROFS is no PermissionError), and a temporary file the atomic writer
    could not make, are refused in one line naming the path the user gave; other OSErrors keep
    their traceback."""
    import errno

    from hydra_dense.runtime.atomic_file import atomic_write_text

    monkeypatch.setenv("HYDRA_DENSE_DEBUG", "0")

    def read_only(argv):
        raise OSError(errno.EROFS, "Read-only file system", "/mnt/results/run")

    assert plain_refusals(read_only)([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: /mnt/results/run: cannot be written (Read-only file system); give a folder") \
        and err.count("\n") == 1

    def make_no_temp_file(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", "/mnt/results/.table.md.tmp-x1y2")

    monkeypatch.setattr("tempfile.mkstemp", make_no_temp_file)
    with pytest.raises(OSError) as raised:
        atomic_write_text("/mnt/results/table.md", "x")
    assert raised.value.errno == errno.EROFS and raised.value.filename == "/mnt/results/table.md"

    def other(argv):
        raise OSError(errno.EIO, "Input/output error", "/mnt/results/run")

    with pytest.raises(OSError):
        plain_refusals(other)([])


def test_a_read_only_default_root_dir_is_refused_in_one_line(tmp_path):
    """Through the real entry point, on a read-only mount (root may mount one; skipped otherwise)."""
    import subprocess

    folder = tmp_path / "read_only"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1M", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("this process cannot mount a read-only file system")
    try:
        config = write_config("segmentation", tmp_path, steps=2, val_every=2)
        err = _refused(train("fit", config, folder / "run"))
        assert f"error: {folder / 'run'}: cannot be written (Read-only file system)" in err
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)
