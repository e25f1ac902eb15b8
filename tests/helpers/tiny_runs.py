"""Tiny data + YAML configs for the three tasks, and running tools/train.py in a subprocess (the way
users and clusters run it: DDP re-launches the same command line per rank)."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]  # the repository
TRAIN = ROOT / "tools" / "train.py"

COMMON_TRAINER = dict(accelerator="cpu", devices=1, check_val_every_n_epoch=None, log_every_n_steps=1,
                      enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                      deterministic=True)


def seg_config(data: Path, steps: int = 12, val_every: int = 6) -> dict:
    from tests.helpers.images import make_ade

    if not (data / "images").is_dir():
        make_ade(data, n_train=20, n_val=5, size=32)  # 5 val images: uneven over 2 ranks
    backbone = dict(class_path="hydra_dense.backbones.ViT",
                    init_args=dict(embed_dim=32, depth=2, num_heads=2, patch_size=4, img_size=32,
                                   out_indices=[0, 1], drop_path_rate=0.1, plan="hydra"))
    return dict(
        seed_everything=0,
        trainer=dict(COMMON_TRAINER, max_steps=steps, val_check_interval=val_every),
        model=dict(class_path="hydra_dense.tasks.SegmentationTask",
                   init_args=dict(backbone=backbone, num_classes=4, decode_head="uper", head_channels=16,
                                  aux_head=True, lr=1e-3, warmup_steps=2, num_overlays=1)),
        data=dict(class_path="hydra_dense.data.SegmentationDataModule",
                  init_args=dict(root=str(data), layout="ade20k", num_classes=4, crop_size=[32, 32],
                                 base_size=[32, 32], batch_size=2, val_batch_size=1, num_workers=0)))


def det_config(data: Path, steps: int = 8, val_every: int = 4) -> dict:
    from hydra_dense.data.demo_instances import prepare

    prepare(data, n_train=12, n_val=5, size=80)
    backbone = dict(class_path="hydra_dense.backbones.ViT",
                    init_args=dict(embed_dim=32, depth=2, num_heads=2, patch_size=16, img_size=64,
                                   class_token=False, plan={"default": "msa", "hydra_last": 1}, out_indices=[1], drop_path_rate=0.1))
    return dict(
        seed_everything=0,
        trainer=dict(COMMON_TRAINER, max_steps=steps, val_check_interval=val_every),
        model=dict(class_path="hydra_dense.tasks.DetectionTask",
                   init_args=dict(backbone=backbone, num_classes=10, detector="mask_rcnn", pyramid_channels=32,
                                  anchor_sizes=[16, 32, 64, 128, 256], min_size=64, max_size=64,
                                  resize_train=True, warmup_steps=2, lr=1e-3, num_overlays=1,
                                  score_thresh=0.0)),
        data=dict(class_path="hydra_dense.data.DetectionDataModule",
                  init_args=dict(root=str(data), format="coco", train_json="annotations/instances_train.json",
                                 val_json="annotations/instances_val.json", train_images="train",
                                 val_images="val", masks=True, num_classes=10, batch_size=2, val_batch_size=1,
                                 num_workers=0)))


def video_config(data: Path, steps: int = 8, val_every: int = 4) -> dict:
    from hydra_dense.data.demo_video import prepare

    prepare(data, n_train=16, n_val=5, n_frames=8, size=32)
    backbone = dict(class_path="hydra_dense.backbones.VideoViT",
                    init_args=dict(size=None, embed_dim=32, depth=2, num_heads=2, patch_size=8, tubelet_size=2,
                                   num_frames=4, img_size=32, layout="joint", plan="hydra", drop_path_rate=0.1))
    return dict(
        seed_everything=0,
        trainer=dict(COMMON_TRAINER, max_steps=steps, val_check_interval=val_every),
        model=dict(class_path="hydra_dense.tasks.VideoClassificationTask",
                   init_args=dict(backbone=backbone, num_classes=4, lr=1e-3, warmup_steps=2, layer_decay=1.0,
                                  mixup_alpha=0.8)),
        data=dict(class_path="hydra_dense.data.VideoDataModule",
                  init_args=dict(root=str(data), layout="kinetics", num_classes=4, num_frames=4, frame_stride=2,
                                 size=32, short_side=32, batch_size=2, val_batch_size=1, num_workers=0)))


CONFIGS = {"segmentation": seg_config, "detection": det_config, "video": video_config}


def write_config(task: str, tmp: Path, **kw) -> Path:
    path = tmp / f"{task}.yaml"
    path.write_text(yaml.safe_dump(CONFIGS[task](tmp / f"{task}_data", **kw)))
    return path


def train(subcommand: str, config: Path, root_dir: Path, *args: str, procs: int = 1, timeout: float = 300,
          env: dict | None = None, cluster: str | None = None) -> subprocess.CompletedProcess:
    """``tools/train.py <subcommand> --config <config>`` with ``procs`` CPU processes (gloo DDP),
    or with the trainer settings of ``configs/cluster/<cluster>.yaml`` added."""
    cmd = [sys.executable, str(TRAIN), subcommand, "--config", str(config),
           f"--trainer.default_root_dir={root_dir}", *args]
    if cluster:
        cmd += ["--config", str(ROOT / "configs" / "cluster" / f"{cluster}.yaml")]
        procs = yaml.safe_load(Path(cmd[-1]).read_text())["trainer"]["devices"]
    elif procs > 1:
        cmd += ["--trainer.strategy=ddp", f"--trainer.devices={procs}"]
    extra_env, env = env, dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1" if procs > 1 else os.environ.get(
        "OMP_NUM_THREADS", "2"), HYDRA_DENSE_FUSED=os.environ.get("HYDRA_DENSE_FUSED", "1"))
    env.update(extra_env or {})
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def last_val_metrics(root_dir: Path) -> dict[str, float]:
    """The last row with validation metrics of the newest run's metrics.csv."""
    files = sorted(root_dir.rglob("metrics.csv"), key=lambda p: p.stat().st_mtime)
    assert files, f"no metrics.csv under {root_dir}"
    rows = list(csv.DictReader(files[-1].open()))
    val = [r for r in rows if any(k.startswith("val_") and r[k] for k in r)]
    assert val, f"no validation row in {files[-1]}"
    return {k: float(v) for k, v in val[-1].items() if k.startswith("val_") and v}


def newest_checkpoint(root_dir: Path) -> Path:
    files = sorted(root_dir.rglob("last.ckpt"), key=lambda p: p.stat().st_mtime)
    assert files, f"no last.ckpt under {root_dir}"
    return files[-1]


def weights(ckpt: Path) -> dict[str, torch.Tensor]:
    return torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
