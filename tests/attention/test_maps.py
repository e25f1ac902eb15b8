"""Attention maps: Hydra token shares add up to the op's output; MSA maps are softmax rows."""
import subprocess
import sys

import numpy as np
import torch
from PIL import Image

from hydra_dense.attention import hydra_attention
from hydra_dense.attention.maps import attention_maps, hydra_token_contributions
from hydra_dense.backbones import ViT
from tests.helpers.tiny_runs import ROOT
from tests.helpers.images import assert_drawn


def test_hydra_shares_sum_to_one_and_rebuild_the_output():
    q, k, v = (torch.randn(10, 6, dtype=torch.float64) for _ in range(3))
    shares = hydra_token_contributions(q, k, v, index=3)
    assert abs(shares.sum().item() - 1) < 1e-9
    out = hydra_attention(q[None], k[None], v[None])[0, 3]
    qn, kn = q / q.norm(dim=-1, keepdim=True), k / k.norm(dim=-1, keepdim=True)
    torch.testing.assert_close((qn[3] * kn * v).sum(0), out, rtol=1e-6, atol=1e-9)
    # a token whose value is zeroed contributes nothing
    v2 = v.clone()
    v2[7] = 0
    assert hydra_token_contributions(q, k, v2, 3)[7] == 0


def test_maps_per_block_match_the_plan():
    torch.manual_seed(0)
    m = ViT("tiny", depth=4, patch_size=8, plan={"default": "msa", "hydra_last": 2}).eval()
    maps = attention_maps(m, torch.randn(3, 40, 48), (2, 3))
    assert [d["kind"] for d in maps] == ["msa", "msa", "hydra", "hydra"]
    for d in maps:
        assert d["map"].shape == (5, 6)
    # softmax maps are non-negative and sum to <= 1 over the grid (the cls token takes the rest)
    assert all((d["map"] >= 0).all() and d["map"].sum() <= 1 + 1e-5 for d in maps if d["kind"] == "msa")


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
