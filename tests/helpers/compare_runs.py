"""The main job on a tiny segmentation config, called in-process."""
import csv

import yaml

from hydra_dense.comparison.command import main as compare_main

from .images import make_ade

TRAINER = {"max_steps": 3, "val_check_interval": 3, "check_val_every_n_epoch": None, "accelerator": "cpu",
           "devices": 1, "enable_progress_bar": False, "log_every_n_steps": 1}


def compare_seg_config(tmp_path, steps=3, lr=1e-4):
    root = tmp_path / "data"
    if not root.is_dir():
        make_ade(root, n_train=8, n_val=2)
    return {"seed_everything": 0, "trainer": dict(TRAINER, max_steps=steps, val_check_interval=steps), "model": {
        "class_path": "hydra_dense.tasks.SegmentationTask", "init_args": {
            "backbone": {"class_path": "hydra_dense.backbones.ViT", "init_args": {
                "size": None, "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 4, "img_size": 32,
                "out_indices": [0, 1]}},
            "num_classes": 4, "decode_head": "linear", "warmup_steps": 1, "lr": lr, "head_lr_mult": 10.0}},
        "data": {"class_path": "hydra_dense.data.SegmentationDataModule", "init_args": {
            "root": str(root), "num_classes": 4, "crop_size": [32, 32], "batch_size": 4, "val_batch_size": 2,
            "num_workers": 0}}}


def run_compare(tmp_path, config: dict, out: str, *args) -> list[dict]:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(config))
    assert compare_main(["--config", str(cfg), "--pretrained", "none", "--out", str(tmp_path / out),
                         "--speed-repeats", "2", "--speed-size", "0", *args]) == 0
    return list(csv.DictReader((tmp_path / out / "runs.csv").open()))
