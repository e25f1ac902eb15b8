"""Comparison recipes with a stage after the conversion: @aligned (whole-network alignment) and
@distilled (the MSA weights as a teacher while fine-tuning)."""
import json

import pytest
import yaml

from hydra_dense.comparison.command import main as compare_main
from tests.helpers.compare_runs import compare_seg_config


def test_aligned_recipe_runs_stage_two_from_stage_one_with_the_task_images(tmp_path, monkeypatch):
    """``@aligned``: stage 2 starts its student from stage 1's checkpoint, reads the task's training
    images besides its own, is cached under its own key, and its table row names both stages."""
    import subprocess

    import torch

    from hydra_dense.conversion import cache as conversion
    from hydra_dense.comparison.recipes import parse_recipes
    from hydra_dense.comparison.report import aggregate

    (recipe,) = parse_recipes("hydra+mean+dwc7@aligned")
    assert recipe.converted and recipe.aligned and recipe.plan_name == "hydra+mean+dwc7"
    with pytest.raises(ValueError, match="conversion needs a plan with non-MSA blocks"):
        parse_recipes("msa@aligned")
    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    commands = []

    def fake_conversion(worker, **_):
        from hydra_dense.conversion.request import ConversionRequest

        cmd = ConversionRequest.read(worker[-1]).cli_arguments()  # what the worker would run
        output = next(a.split("=", 1)[1] for a in cmd if a.startswith("--model.init_args.output="))
        stage2 = any(a.startswith("--model.init_args.student_init=") for a in cmd)
        torch.save({"hydra_dense": dict(converted_blocks=[0], steps=4, data="images", error_before=[0.8],
                                        error_after=[0.6 if stage2 else 0.3], level_error_before=[0.5, 0.7],
                                        level_error_after=[0.2, 0.2] if stage2 else [0.5, 0.7])}, output)
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(conversion.subprocess, "run", fake_conversion)
    source = tmp_path / "msa.pth"
    source.write_bytes(b"weights")
    conv = tmp_path / "convert.yaml"
    conv.write_text(yaml.safe_dump({"trainer": {"max_steps": 4}}))
    task = tmp_path / "task.yaml"
    task.write_text("data: {}\n")
    backbone = {"class_path": "hydra_dense.backbones.ViT", "init_args": {"size": "tiny"}}
    stage1 = conversion.converted_checkpoint(backbone, {"default": "hydra"}, str(source), str(conv), None)
    ckpt, info = conversion.aligned_checkpoint(backbone, {"default": "hydra"}, str(source), stage1, str(conv),
                                               task, ["--data.init_args.batch_size=2"])
    assert ckpt != stage1[0] and len(commands) == 2
    assert f"--model.init_args.student_init={stage1[0]}" in commands[1]
    assert f"--data.init_args.task_config={task.resolve()}" in commands[1]
    assert '--data.init_args.task_overrides=["--data.init_args.batch_size=2"]' in commands[1]
    assert info["error_before"] == pytest.approx(0.8) and info["stage1"]["error_after"] == pytest.approx(0.3)
    assert info["error_text"] == "blocks 0.800 -> 0.300 -> 0.600; features 0.600 -> 0.200"
    again = conversion.aligned_checkpoint(backbone, {"default": "hydra"}, str(source), stage1, str(conv), task,
                                          ["--data.init_args.batch_size=2"])
    assert again[0] == ckpt and again[1]["cached"] and len(commands) == 2
    runs = [dict(recipe="hydra@aligned", seed=0, attention="hydra x12", metric="val_mIoU", metric2="", score=40.0,
                 score2=0.0, train_img_s=1.0, peak_train_mem_mb=1.0, params_m=1.0, gflops_img=1.0, steps=3,
                 train_min=0.1)]
    (row,) = aggregate(runs, {"hydra@aligned": info})
    assert row["convert_error"] == info["error_text"]


def test_distilled_recipe_fine_tunes_the_conversion_with_the_msa_weights_as_teacher(tmp_path, monkeypatch):
    import torch

    from hydra_dense.backbones import ViT

    monkeypatch.setenv("HYDRA_DENSE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "msa.pth"
    torch.manual_seed(0)
    torch.save(ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=4, img_size=32).state_dict(), source)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(compare_seg_config(tmp_path, steps=2)))
    images = tmp_path / "images"
    from tests.helpers.images import make_images

    make_images(images, n=8)
    conv = tmp_path / "convert.yaml"
    conv.write_text(yaml.safe_dump({
        "trainer": {"accelerator": "cpu", "enable_progress_bar": False, "num_sanity_val_steps": 0,
                    "val_check_interval": 2, "check_val_every_n_epoch": None},
        "model": {"class_path": "hydra_dense.conversion.ConversionTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {"size": "tiny"}}}},
        "data": {"class_path": "hydra_dense.conversion.ConversionImages", "init_args": {
            "root": str(images), "val_every": 4, "crop_size": 32, "batch_size": 4, "num_workers": 0}}}))
    out = tmp_path / "out"
    assert compare_main(["--config", str(cfg), "--pretrained", str(source), "--plans", "msa,hydra+dwc3@distilled",
                         "--convert-config", str(conv), "--convert-steps", "2", "--speed-size", "0",
                         "--speed-repeats", "2", "--out", str(out)]) == 0
    req = json.loads((out / "hydra+dwc3@distilled" / "seed0" / "request.json").read_text())
    assert req["distill_teacher"] == str(source) and req["converted"]
    metrics = next((out / "hydra+dwc3@distilled" / "seed0").rglob("metrics.csv")).read_text()
    assert "train_distill" in metrics.splitlines()[0]
    with pytest.raises(ValueError, match="@distilled needs pretrained MSA image weights"):
        compare_main(["--config", str(cfg), "--pretrained", "none", "--plans", "msa,hydra@distilled", "--out",
                      str(tmp_path / "none")])
