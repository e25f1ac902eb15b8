"""Local mixing beside Hydra: against F.conv2d / F.conv3d on a grid reshaped by hand, zero-init = plain
Hydra, padding invariance, gradients, plans from YAML, checkpoints."""
import pytest
import torch
import torch.nn.functional as F
import yaml
from jsonargparse import ArgumentParser

from hydra_dense.attention import AttentionPlan, HydraAttention, TokenLayout, build_attention
from hydra_dense.backbones import ViT, VideoViT
from hydra_dense.checkpoints import load_pretrained
from hydra_dense.checkpoints.pretrained import CheckpointError
from hydra_dense.attention.local_mixing import LocalMixing, parse_local
from tests.helpers.mixing import assert_padding_invariant, randomise


@pytest.mark.parametrize("name,k", [("dwc3", 3), ("dwc5", 5)])
def test_matches_conv2d_on_the_grid_by_hand(name, k):
    B, P, h, w, D = 2, 1, 5, 7, 6
    mix = randomise(LocalMixing(D, parse_local(name), grid_dims=2))
    tokens = torch.randn(B, P + h * w, D, dtype=torch.float64)
    mix = mix.double()
    out = mix(tokens, TokenLayout((h, w), P))
    # reference: the grid tokens laid out as an image by explicit indexing, one filter per channel
    image = torch.zeros(B, D, h, w, dtype=torch.float64)
    for y in range(h):
        for x in range(w):
            image[:, :, y, x] = tokens[:, P + y * w + x]
    ref = F.conv2d(image, mix.conv.weight, mix.conv.bias, padding=k // 2, groups=D)
    assert torch.all(out[:, :P] == 0), "prefix tokens get nothing"
    for y in range(h):
        for x in range(w):
            torch.testing.assert_close(out[:, P + y * w + x], ref[:, :, y, x])


def test_matches_conv3d_on_a_video_grid_and_per_frame_variant():
    B, t, h, w, D = 1, 3, 4, 5, 4
    tokens = torch.randn(B, t * h * w, D, dtype=torch.float64)
    clip = tokens.reshape(B, t, h, w, D).permute(0, 4, 1, 2, 3)
    mix3 = randomise(LocalMixing(D, parse_local("dwc3"), grid_dims=3)).double()
    ref3 = F.conv3d(clip, mix3.conv.weight, mix3.conv.bias, padding=1, groups=D)
    torch.testing.assert_close(mix3(tokens, TokenLayout((t, h, w))), ref3.permute(0, 2, 3, 4, 1).reshape(B, -1, D))
    mix2 = randomise(LocalMixing(D, parse_local("dwc3_2d"), grid_dims=3)).double()
    assert tuple(mix2.conv.weight.shape[-3:]) == (1, 3, 3)
    frames = clip.permute(0, 2, 1, 3, 4).reshape(B * t, D, h, w)
    ref2 = F.conv2d(frames, mix2.conv.weight[:, :, 0], mix2.conv.bias, padding=1, groups=D)
    ref2 = ref2.reshape(B, t, D, h, w).permute(0, 1, 3, 4, 2).reshape(B, -1, D)
    torch.testing.assert_close(mix2(tokens, TokenLayout((t, h, w))), ref2)


def test_zero_initialised_branch_gives_exactly_plain_hydra():
    torch.manual_seed(0)
    plain = build_attention("hydra", 16, 2)
    local = build_attention("hydra", 16, 2, local="dwc5")
    local.load_state_dict(plain.state_dict(), strict=False)
    assert torch.count_nonzero(local.local.conv.weight) == 0
    x = torch.randn(2, 1 + 12, 16)
    layout = TokenLayout((3, 4), 1)
    assert torch.equal(local(x, layout), plain(x, layout))
    randomise(local)
    assert (local(x, layout) - plain(x, layout)).abs().max() > 1e-3


def test_input_source_variant_uses_the_block_input():
    attn = randomise(build_attention("hydra", 8, 2, local="dwc3_x"))
    x = torch.randn(1, 9, 8)
    layout = TokenLayout((3, 3), 0)
    D = 8
    q, k, v = attn.qkv(x).unflatten(-1, (3, D)).unbind(-2)
    from hydra_dense.attention import hydra_attention

    ref = attn.proj(hydra_attention(q, k, v) + attn.local(x, layout))
    torch.testing.assert_close(attn(x, layout), ref)


def test_local_hydra_variant_matches_its_formula_by_hand():
    """dwc3_kv: out = proj(hydra(q, k, v) + D * phi(q) * conv(phi(k) * v)) with phi the cosine kernel."""
    from hydra_dense.attention import hydra_attention

    torch.manual_seed(0)
    attn = randomise(build_attention("hydra", 8, 2, local="dwc3_kv")).double()
    h, w, D = 3, 4, 8
    x = torch.randn(2, 1 + h * w, D, dtype=torch.float64)
    q, k, v = attn.qkv(x).unflatten(-1, (3, D)).unbind(-2)
    phi = lambda t: t / t.norm(dim=-1, keepdim=True)  # noqa: E731
    grid = (phi(k) * v)[:, 1:].reshape(2, h, w, D).permute(0, 3, 1, 2)
    local = F.conv2d(grid, attn.local.conv.weight, attn.local.conv.bias, padding=1, groups=D)
    local = torch.cat([torch.zeros(2, 1, D, dtype=x.dtype), local.permute(0, 2, 3, 1).reshape(2, h * w, D)], 1)
    ref = attn.proj(hydra_attention(q, k, v) + D * phi(q) * local)
    torch.testing.assert_close(attn(x, TokenLayout((h, w), 1)), ref)


def test_padded_tokens_contribute_nothing():
    mix = randomise(LocalMixing(4, parse_local("dwc3")))
    tokens = torch.randn(1, 1 + 16, 4)
    pad = torch.zeros(1, 17, dtype=torch.bool)
    pad[0, 1:].view(4, 4)[:, 3] = True  # last column is padding
    out = mix(tokens, TokenLayout((4, 4), 1, pad))
    changed = tokens.clone()
    changed[pad] = 1e3
    torch.testing.assert_close(mix(changed, TokenLayout((4, 4), 1, pad)), out)
    assert torch.all(out[pad] == 0)
    # the valid 4x3 region equals the conv of that region alone (zero padding outside)
    alone = mix(torch.cat([tokens[:, :1], tokens[:, 1:].view(1, 4, 4, 4)[:, :, :3].reshape(1, 12, 4)], 1),
                TokenLayout((4, 3), 1))
    torch.testing.assert_close(out[:, 1:].view(1, 4, 4, 4)[:, :, :3].reshape(1, 12, 4), alone[:, 1:])


@pytest.mark.parametrize("plan", [{"default": "hydra", "local": "dwc3"}, {"default": "hydra", "local": "dwc3_kv"},
                                  {"window_size": 2, "global_blocks": [1], "global_attention": "hydra", "local": "dwc5"}])
def test_vit_padding_invariance_with_local_mixing(plan):
    assert_padding_invariant(randomise(ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=16, img_size=64,
                                           plan=plan, out_indices=[1], class_token="window_size" not in plan)))


def test_gradients_reach_the_branch_from_zero_init():
    m = ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=8, img_size=32, plan={"default": "hydra",
                                                                                          "local": "dwc3"})
    m(torch.randn(2, 3, 32, 32))[0].square().mean().backward()
    for blk in m.blocks:
        assert blk.attn.local.conv.weight.grad.abs().sum() > 0
        assert blk.attn.local.conv.bias.grad.abs().sum() > 0


def test_plan_from_yaml_describe_and_composition():
    text = """
class_path: hydra_dense.backbones.ViT
init_args: {size: null, embed_dim: 32, depth: 4, num_heads: 2, patch_size: 8, img_size: 32,
            plan: {default: msa, hydra_last: 2, local: dwc5}}
"""
    parser = ArgumentParser()
    parser.add_argument("--backbone", type=torch.nn.Module)
    cfg = parser.parse_object({"backbone": yaml.safe_load(text)})
    m = parser.instantiate(cfg).backbone
    assert m.plan.describe(4) == "msa@[0, 1], hydra+dwc5@[2, 3]"
    assert m.blocks[0].attn.kind == "msa" and not hasattr(m.blocks[0].attn, "local")
    assert m.blocks[3].attn.local.conv.kernel_size == (5, 5)
    assert AttentionPlan(default="hydra", local="dwc3").describe(12) == "hydra+dwc3 x12"
    video = VideoViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=8, num_frames=4, img_size=16,
                     layout="divided", plan={"default": "hydra", "local": "dwc3"})
    assert video.blocks[0].temporal_attn.local.conv.weight.dim() == 3  # (D, 1, 3): over time
    assert video.blocks[0].block.attn.local.conv.weight.dim() == 4
    with pytest.raises(ValueError, match="unknown local mixing 'conv3'"):
        AttentionPlan(default="hydra", local="conv3").resolve(2)
    with pytest.raises(ValueError, match="must be odd"):
        AttentionPlan(default="hydra", local="dwc4").resolve(2)


def test_set_plan_adds_and_removes_the_branch_keeping_weights():
    m = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=8, img_size=16, plan="hydra")
    qkv = m.blocks[0].attn.qkv.weight.clone()
    m.set_plan({"default": "hydra", "local": "dwc3"})
    assert isinstance(m.blocks[0].attn, HydraAttention) and m.blocks[0].attn.local is not None
    assert torch.equal(m.blocks[0].attn.qkv.weight, qkv)
    m.set_plan("hydra")
    assert m.blocks[0].attn.local is None


def test_msa_checkpoint_loads_and_reports_local_params_as_new(tmp_path, capsys):
    msa = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=8, img_size=16, plan="msa")
    path = tmp_path / "msa.pth"
    torch.save(msa.state_dict(), path)
    local = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=8, img_size=16,
                plan={"default": "hydra", "local": "dwc3"})
    report = load_pretrained(local, path, strict=True)
    assert not report.missing and len(report.new) == 4  # weight + bias of 2 blocks
    assert "new in this plan" in capsys.readouterr().out
    plain = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=8, img_size=16, plan="hydra")
    load_pretrained(plain, path)
    x = torch.randn(1, 3, 16, 16)
    assert torch.equal(local(x)[0], plain(x)[0])
    torch.save(randomise(local).state_dict(), path)
    with pytest.raises(CheckpointError, match=r"unexpected keys \['blocks.0.attn.local.conv.weight'"):
        load_pretrained(plain, path, strict=True)
