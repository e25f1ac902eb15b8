"""Muting one path of a Hydra block or a ViTDet backbone (tools/hydra_paths.py, the comparison's
global_zeroed column): checked by linearity of the output projection against modules built without
that path, not against the muting code itself."""
import pytest
import torch

from hydra_dense.attention import TokenLayout, plan_from_name
from hydra_dense.attention.modules import HydraAttention
from hydra_dense.attention.muting import global_term_blocks, muted
from hydra_dense.backbones import ViT


def test_muting_the_global_term_or_the_local_branch_removes_exactly_that_path():
    torch.manual_seed(0)
    vit = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=4, img_size=16,
              plan={"default": "hydra", "local": "dwc3", "token_mean": True})
    with torch.no_grad():  # a local branch that is not zero (it starts at zero)
        for blk in vit.blocks:
            blk.attn.local.conv.weight.normal_(0, 0.3)
            blk.attn.local.conv.bias.normal_(0, 0.3)
    attn = vit.blocks[1].attn
    plain = HydraAttention(16, num_heads=2, token_mean=True)  # the same weights without a local branch
    plain.load_state_dict({k: v for k, v in attn.state_dict().items() if not k.startswith("local.")})
    x, layout = torch.randn(2, 17, 16), TokenLayout((4, 4), 1, None)
    full, without_local = attn(x, layout), plain(x, layout)
    bias = attn.proj.bias
    with muted(vit, [1], "local"):
        torch.testing.assert_close(attn(x, layout), without_local)
    with muted(vit, [1], "global"):  # proj is affine: P(g + l) + b - (P(g) + b) + b = P(l) + b
        torch.testing.assert_close(attn(x, layout), full - without_local + bias)
    with muted(vit, [1], "global"), muted(vit, [1], "local"):
        torch.testing.assert_close(attn(x, layout), bias.expand_as(full))
    torch.testing.assert_close(attn(x, layout), full)  # restored
    assert vit.blocks[0].attn.local is not None


@pytest.mark.parametrize("plan, blocks", [
    ("msa", []), ("hydra", []),  # global mixing only: zeroing it leaves no mixing, nothing to compare
    ("local+dwc3", []),  # no global term
    ("hydra+dwc3", [0, 1, 2, 3, 4, 5, 6, 7]), ("hydra+mean+gain+dwc3", [0, 1, 2, 3, 4, 5, 6, 7]),
    ("vitdet2_msa", [1, 3, 5, 7]), ("vitdet2_hydra", [1, 3, 5, 7]), ("hybrid2+dwc3", [6, 7]),
])
def test_the_blocks_whose_global_term_the_comparison_zeroes(plan, blocks):
    vit = ViT(None, embed_dim=16, depth=8, num_heads=2, patch_size=4, img_size=16, plan=plan_from_name(plan, 8))
    assert global_term_blocks(vit) == blocks


def test_a_vitdet_global_softmax_block_muted_gives_its_projection_of_zero_and_comes_back():
    torch.manual_seed(0)
    vit = ViT(None, embed_dim=16, depth=8, num_heads=2, patch_size=4, img_size=32,
              plan=plan_from_name("vitdet2_msa", 8))  # global blocks 1, 3, 5, 7
    x = torch.randn(1, 3, 32, 32)
    before = vit(x)[-1]
    attn = vit.blocks[1].attn
    tokens, layout = torch.randn(2, 1 + 64, 16), TokenLayout((8, 8), 1, None)
    with muted(vit, global_term_blocks(vit), "global"):
        torch.testing.assert_close(attn(tokens, layout), attn.proj.bias.expand(2, 65, 16))
        assert not torch.allclose(vit(x)[-1], before)
    torch.testing.assert_close(vit(x)[-1], before)
