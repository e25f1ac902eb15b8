"""A checkpoint never silently becomes another model: its task class and attention plan are checked
before it is resumed, validated, predicted with or exported; the config and command line decide the
settings; an unreadable checkpoint is named."""
import pytest
import torch
import yaml

from hydra_dense.checkpoints.identity import IDENTITY_KEY
from tests.helpers.tiny_runs import ok, train, write_config


def with_plan(config, plan, tmp_path):
    cfg = yaml.safe_load(config.read_text())
    cfg["model"]["init_args"]["backbone"]["init_args"]["plan"] = plan
    path = tmp_path / f"plan_{plan}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_checkpoint_records_task_and_plan(seg_run):
    _, ckpt = seg_run
    identity = torch.load(ckpt, map_location="cpu", weights_only=True)[IDENTITY_KEY]
    assert identity["task"] == "hydra_dense.tasks.segmentation.SegmentationTask"
    assert identity["attention"] == ["hydra", "hydra"] and identity["plan"] == "hydra x2"
    assert identity["backbone"].endswith(".ViT") and identity["depth"] == 2 and identity["embed_dim"] == 32


@pytest.mark.parametrize("subcommand", ["fit", "predict"])
def test_another_attention_plan_is_refused_naming_both(seg_run, tmp_path, subcommand):
    config, ckpt = seg_run
    proc = train(subcommand, with_plan(config, "msa", tmp_path), tmp_path / "other", f"--ckpt_path={ckpt}")
    assert proc.returncode != 0
    err = proc.stderr
    assert f"{ckpt} does not match the configured SegmentationTask" in err, err[-2000:]
    assert "attention plan [hydra x2]" in err and "runs [msa x2]" in err
    assert "Restored all states" not in proc.stdout + err


def test_a_config_for_another_task_is_refused_before_anything_is_written(seg_run, tmp_path):
    _, ckpt = seg_run
    det = write_config("detection", tmp_path, steps=2)
    proc = train("predict", det, tmp_path / "det", f"--ckpt_path={ckpt}")
    assert proc.returncode != 0
    assert "it holds a SegmentationTask (hydra_dense.tasks.segmentation.SegmentationTask), but the config builds " \
           "a DetectionTask" in proc.stderr, proc.stderr[-2000:]
    assert not list((tmp_path / "det").rglob("detections.json"))


def test_a_truncated_checkpoint_is_named(seg_run, tmp_path):
    config, ckpt = seg_run
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(ckpt.read_bytes()[:4096])
    proc = train("validate", config, tmp_path / "v", f"--ckpt_path={cut}")
    assert proc.returncode != 0
    assert f"--ckpt_path: {cut} is not a readable checkpoint (truncated" in proc.stderr, proc.stderr[-2000:]


def test_settings_given_now_win_over_the_checkpoints_and_are_listed(seg_run, tmp_path):
    config, ckpt = seg_run
    proc = ok(train("validate", config, tmp_path / "v", f"--ckpt_path={ckpt}", "--model.init_args.inference=slide",
                    "--model.init_args.slide_crop=[16,16]", "--model.init_args.slide_stride=[8,8]"))
    log = proc.stdout + proc.stderr
    assert "every setting from the config and command line" in log
    assert "inference: 'whole' -> 'slide'" in log, log[-3000:]
    saved = yaml.safe_load(next((tmp_path / "v").rglob("config.yaml")).read_text())
    assert saved["model"]["init_args"]["inference"] == "slide"


@pytest.mark.parametrize("line, message", [
    ("  plan: {default: hydar}", r"init_args.plan: attention plan: unknown attention 'hydar'; choose from \['msa', 'hydra'"),
    ("  embed_dm: 32", r"init_args.embed_dm is not an argument of ViT \(did you mean embed_dim\?\)"),
    ("  patch_size: 6.4e1x", r"init_args.patch_size is '6.4e1x', but ViT takes an int there"),
    ("  qkv_bias: maybe", r"init_args.qkv_bias is 'maybe', but ViT takes true or false there"),
    ("  depth: four\n  plan: {hydra_last: 1}", r"init_args.depth is 'four', but ViT takes an int \(or null\) there"),
])
def test_a_bad_backbone_file_is_named_with_its_key_and_allowed_values(tmp_path, line, message):
    import re

    backbone = tmp_path / "backbone.yaml"
    backbone.write_text("class_path: hydra_dense.backbones.ViT\ninit_args:\n  embed_dim: 32\n  depth: 2\n"
                        "  num_heads: 2\n" + line + "\n")
    config = write_config("segmentation", tmp_path)
    nested = yaml.safe_load(config.read_text())
    nested["model"]["init_args"]["backbone"] = "backbone.yaml"  # nested, relative to the config, as shipped
    nested_config = tmp_path / "nested.yaml"
    nested_config.write_text(yaml.safe_dump(nested))
    for args in ([nested_config], [config, f"--model.init_args.backbone={backbone}"]):
        proc = train("fit", args[0], tmp_path / "run", *args[1:])
        assert proc.returncode != 0
        assert re.search(f"{re.escape(str(backbone))}: {message}", proc.stderr), proc.stderr[-1500:]
        assert "Config file loop detected" not in proc.stderr


def test_export_checks_the_plan_too(seg_run, tmp_path):
    from hydra_dense.deploy.__main__ import build_task
    from hydra_dense.checkpoints import CheckpointMismatchError

    config, ckpt = seg_run
    with pytest.raises(CheckpointMismatchError, match=r"attention plan \[hydra x2\], the config's backbone runs "
                                                      r"\[msa x2\]"):
        build_task(str(with_plan(config, "msa", tmp_path)), str(ckpt), [])
    task = build_task(str(config), str(ckpt), [])
    assert task.backbone.attention_kinds == ["hydra", "hydra"]
    saved = torch.load(ckpt, weights_only=False)["state_dict"]
    torch.testing.assert_close(task.state_dict()["backbone.blocks.0.attn.qkv.weight"],
                               saved["backbone.blocks.0.attn.qkv.weight"])
