"""Muting one path of a Hydra block (tools/hydra_paths.py): checked by linearity of the output
projection against modules built without that path, not against the muting code itself."""
import torch

from hydra_dense.attention import TokenLayout
from hydra_dense.attention.modules import HydraAttention
from hydra_dense.backbones import ViT
from hydra_dense.convert.paths import muted


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
