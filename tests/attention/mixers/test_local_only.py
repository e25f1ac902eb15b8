"""The local-only control (``local+dwc<K>``) and the global term's learned gain (``+gain``), each
checked against the operation written out by hand (F.conv2d on v, the Hydra sum as an explicit
token loop), not against the module code."""
import math

import pytest
import torch
import torch.nn.functional as F

from hydra_dense.attention import TokenLayout, build_attention, plan_from_name
from hydra_dense.attention.modules import GAIN_RATE
from hydra_dense.backbones import ViT
from hydra_dense.checkpoints.pretrained import load_pretrained


def _q_k_v(attn, x):
    D = x.shape[-1]
    return attn.qkv(x).unflatten(-1, (3, D)).unbind(-2)


def test_local_only_is_the_projected_depthwise_convolution_of_v():
    torch.manual_seed(0)
    attn = build_attention("local", 16, 2, local="dwc3", grid_dims=2, local_shifted=False)
    with torch.no_grad():
        attn.local.conv.weight.normal_(0, 0.3)
        attn.local.conv.bias.normal_(0, 0.3)
    x = torch.randn(2, 1 + 12, 16)  # a cls token and a 3x4 grid
    _, _, v = _q_k_v(attn, x)
    grid = v[:, 1:].reshape(2, 3, 4, 16).permute(0, 3, 1, 2)
    conv = F.conv2d(grid, attn.local.conv.weight, attn.local.conv.bias, padding=1, groups=16)
    mixed = torch.cat([torch.zeros(2, 1, 16), conv.permute(0, 2, 3, 1).reshape(2, 12, 16)], 1)
    torch.testing.assert_close(attn(x, TokenLayout((3, 4), 1)), attn.proj(mixed))


def test_local_only_without_a_branch_is_refused():
    with pytest.raises(ValueError, match="local branch alone: give it one"):
        build_attention("local", 16, 2)
    with pytest.raises(ValueError, match="name it, e.g. local\\+dwc7"):
        plan_from_name("local", 12)


@pytest.mark.parametrize("token_mean", [False, True])
def test_the_gain_scales_the_global_term_alone(token_mean):
    torch.manual_seed(0)
    attn = build_attention("hydra", 8, 2, local="dwc3", token_mean=token_mean, global_gain=True, grid_dims=2,
                           local_shifted=False).double()
    with torch.no_grad():
        attn.local.conv.weight.normal_(0, 0.3)
        attn.global_log_gain.normal_(0, 0.05)
    x = torch.randn(1, 6, 8, dtype=torch.float64)  # a 2x3 grid, no prefix
    q, k, v = _q_k_v(attn, x)
    phi = lambda t: t / t.norm(dim=-1, keepdim=True)  # noqa: E731
    kv = sum(phi(k)[:, s] * v[:, s] for s in range(6)) / (6 if token_mean else 1)  # one D-vector per image
    global_term = phi(q) * kv[:, None] * torch.exp(GAIN_RATE * attn.global_log_gain)
    grid = v.reshape(1, 2, 3, 8).permute(0, 3, 1, 2)
    local = F.conv2d(grid, attn.local.conv.weight, attn.local.conv.bias, padding=1, groups=8)
    local = local.permute(0, 2, 3, 1).reshape(1, 6, 8)
    torch.testing.assert_close(attn(x, TokenLayout((2, 3), 0)), attn.proj(global_term + local))


def test_a_checkpoint_without_the_gain_loads_and_starts_at_the_plain_scale():
    torch.manual_seed(0)
    plain = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=4, img_size=16,
                plan=plan_from_name("hydra+mean+dwc3", 2))
    gained = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=4, img_size=16,
                 plan=plan_from_name("hydra+mean+gain+dwc3", 2))
    load_pretrained(gained, plain.state_dict(), strict=True, verbose=False)  # the gain is new, not missing
    x = torch.randn(1, 3, 16, 16)
    torch.testing.assert_close(gained(x)[-1], plain(x)[-1])
    assert gained.blocks[0].attn.global_log_gain.requires_grad
    assert math.isclose(float(gained.blocks[0].attn.global_log_gain.abs().sum()), 0.0)


@pytest.mark.parametrize("name, labels", [
    ("local+dwc7", ["local+dwc7"] * 4),
    ("hydra+mean+gain+dwc7", ["hydra+mean+gain+dwc7"] * 4),
    ("hydra+gain+win4+dwc7", ["hydra+gain+win4+dwc7"] * 4),
    ("vitdet8_hydra", ["hydra", "hydra", "hydra", "hydra"]),  # depth 4: every block is a global one
])
def test_recipe_names_of_the_controls_and_levers(name, labels):
    assert plan_from_name(name, 4).block_labels(4) == labels


def test_vitdet_with_a_window_size_in_its_name():
    plan = plan_from_name("vitdet8_msa", 12)
    assert plan.window_size == 8 and plan.global_blocks == [2, 5, 8, 11]
    assert plan_from_name("vitdet_msa", 12).window_size == 14
    with pytest.raises(ValueError, match="'\\+gain' would change"):
        plan_from_name("msa+gain", 12)
