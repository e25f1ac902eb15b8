#!/usr/bin/env python
"""Train / validate / test / predict any hydra_dense task from YAML (LightningCLI).

    python tools/train.py fit --config configs/segmentation/demo_digits.yaml
    python tools/train.py fit --config configs/segmentation/ade20k_upernet_vit_b16.yaml \
        --model.init_args.backbone=configs/backbones/vit_b16_hydra.yaml --data.init_args.root=/data/ADEChallengeData2016
    python tools/train.py validate --config ... --ckpt_path runs/.../last.ckpt
    python tools/train.py fit --config ... --ckpt_path last          # resume the newest last.ckpt under default_root_dir
    python tools/train.py fit --config ... --config configs/cluster/gpu_ddp.yaml --trainer.devices=8   # DDP
"""


import sys

from hydra_dense.cli import entry

if __name__ == "__main__":
    sys.exit(entry())
