"""tools/visualize.py (hydra_dense.visualize): its two figures, drawn by the command as a user runs it."""
import subprocess
import sys

import numpy as np
import torch
from PIL import Image

from hydra_dense.backbones import ViT
from hydra_dense.data.demo_instances import prepare as prepare_instances
from tests.helpers.images import assert_drawn
from tests.helpers.tiny_runs import ROOT


def test_visualize_attention_tool_draws_msa_over_hydra_for_every_block(tmp_path):
    """The figure a user opens: two rows (MSA weights over Hydra token shares) and one column per
    Hydra block, 12 for the ViT-S/14 layout the tool builds (2.2 x 4.8 inches a column at 110 dpi)."""
    img = tmp_path / "x.png"
    Image.fromarray((np.random.default_rng(0).random((56, 56, 3)) * 255).astype(np.uint8)).save(img)
    out = tmp_path / "attn.png"
    weights = tmp_path / "w.pth"
    torch.save(ViT("small", patch_size=14, img_size=518, init_values=1e-5).state_dict(), weights)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "visualize.py"), "attention", "--image", str(img),
                           "--query", "1,2", "--size", "56", "--msa", str(weights), "--hydra", str(weights),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert Image.open(out).size == (round(2.2 * 12 * 110), round(4.8 * 110))
    assert_drawn(out)


def test_visualize_det_draws_the_detections_beside_the_image(tmp_path):
    digits = prepare_instances(tmp_path / "inst", n_train=4, n_val=2, size=80)
    img = digits / "val" / "scene_00000.jpg"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "visualize.py"), "det", "--config",
                           str(ROOT / "configs" / "detection" / "demo_digits_mask_rcnn.yaml"), "--images", str(img),
                           "--score", "0", "--out", str(tmp_path), f"--data.init_args.root={digits}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "scene_00000_det.png"
    panel = np.asarray(Image.open(out).convert("RGB")).astype(int)
    assert panel.shape == (80, 160, 3)  # the image | the same image with its detections drawn over it
    assert (panel[:, :80] != panel[:, 80:]).any(axis=-1).mean() > 0.01  # boxes drawn (score 0 keeps them all)
