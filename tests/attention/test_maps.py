"""Attention maps: Hydra token shares add up to the op's output; MSA maps are softmax rows."""
import torch

from hydra_dense.attention import hydra_attention
from hydra_dense.attention.maps import attention_maps, hydra_token_contributions
from hydra_dense.backbones import ViT


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
