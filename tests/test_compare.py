"""The main job end to end on tiny configs: every plan trained the same way, one table out."""
import csv

import pytest
import yaml

from hydra_dense.compare import main as compare_main

from .test_segmentation import make_ade

TRAINER = {"max_steps": 3, "val_check_interval": 3, "check_val_every_n_epoch": None, "accelerator": "cpu",
           "devices": 1, "enable_progress_bar": False, "log_every_n_steps": 1}


def _run(tmp_path, config: dict, extra=()):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    assert compare_main(["--config", str(cfg), "--plans", "msa,hybrid1,hydra", "--pretrained", "none",
                         "--out", str(out), "--speed-repeats", "2", *extra]) == 0
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert [r["plan"] for r in rows] == ["msa", "hybrid1", "hydra"]
    assert rows[1]["attention"] == "msa@[0], hydra@[1]"
    for r in rows:
        assert 0 <= float(r["score"]) <= 100 and float(r["train_img_s"]) > 0 and float(r["infer_img_s"]) > 0
    assert (out / "accuracy_vs_speed.png").stat().st_size > 5000 and (out / "table.md").read_text().count("|") > 20
    return rows


def test_compare_segmentation(tmp_path):
    root = make_ade(tmp_path / "data", n_train=8, n_val=2)
    config = {"seed_everything": 0, "trainer": TRAINER, "model": {
        "class_path": "hydra_dense.tasks.SegmentationTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {
                "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 4, "img_size": 32,
                "out_indices": [0, 1]}},
            "num_classes": 4, "decode_head": "uper", "head_channels": 16, "warmup_steps": 1}},
        "data": {"class_path": "hydra_dense.data.SegmentationDataModule", "init_args": {
            "root": str(root), "num_classes": 4, "crop_size": [32, 32], "batch_size": 4, "val_batch_size": 2,
            "num_workers": 0}}}
    rows = _run(tmp_path, config, ["--speed-size", "64"])
    assert rows[0]["metric"] == "val_mIoU" and rows[0]["metric2"] == "val_pixel_acc"
    assert float(rows[0]["flop_ideal_big"]) == 1.0 and float(rows[2]["flop_ideal_big"]) > 1.0
    assert "| class_0 |" in (tmp_path / "out" / "per_class.md").read_text()


def test_compare_video(tmp_path):
    pytest.importorskip("av")
    from hydra_dense.data.demo_video import prepare

    root = prepare(tmp_path / "clips", n_train=8, n_val=4, n_frames=8, size=32)
    config = {"seed_everything": 0, "trainer": TRAINER, "model": {
        "class_path": "hydra_dense.tasks.VideoClassificationTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.VideoViT", "init_args": {
                "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 8, "num_frames": 8,
                "img_size": 32}},
            "num_classes": 4, "warmup_steps": 1}},
        "data": {"class_path": "hydra_dense.data.VideoDataModule", "init_args": {
            "root": str(root), "num_classes": 4, "num_frames": 8, "frame_stride": 1, "size": 32, "short_side": 32,
            "batch_size": 4, "val_batch_size": 4, "num_workers": 0}}}
    rows = _run(tmp_path, config, ["--speed-size", "8x64x64"])
    assert rows[0]["metric"] == "val_top1" and rows[0]["metric2"] == "val_top4"


def test_compare_detection(tmp_path):
    from hydra_dense.data.demo_instances import prepare

    root = prepare(tmp_path / "inst", n_train=8, n_val=4, size=80)
    config = {"seed_everything": 0, "trainer": TRAINER, "model": {
        "class_path": "hydra_dense.tasks.DetectionTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {
                "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 16, "img_size": 64,
                "class_token": False, "out_indices": [1]}},
            "num_classes": 10, "detector": "mask_rcnn", "pyramid_channels": 16, "min_size": 64, "max_size": 64,
            "resize_train": True, "warmup_steps": 1, "score_thresh": 0.0}},
        "data": {"class_path": "hydra_dense.data.DetectionDataModule", "init_args": {
            "root": str(root), "train_json": "annotations/instances_train.json",
            "val_json": "annotations/instances_val.json", "train_images": "train", "val_images": "val",
            "masks": True, "batch_size": 4, "val_batch_size": 2, "num_workers": 0}}}
    rows = _run(tmp_path, config, ["--speed-size", "128"])
    assert rows[0]["metric"] == "val_mAP" and rows[0]["metric2"] == "val_mAP_50"
    # the big input is timed at its own size (not resized to the 64-px evaluation size): Hydra's FLOPs differ
    assert float(rows[2]["flop_ideal_big"]) > 1.0
    assert "| digit_0 |" in (tmp_path / "out" / "per_class.md").read_text()
