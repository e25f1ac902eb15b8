"""Window-softmax local branch: against a dense masked softmax written out token by token (the
quadratic form), zero-init = plain Hydra, padding, gradients, plans, checkpoints, conversion."""
import math

import pytest
import torch

from hydra_dense.attention import AttentionPlan, TokenLayout, build_attention, hydra_attention, plan_from_name, plan_names
from hydra_dense.backbones import ViT, VideoViT
from hydra_dense.checkpoints import load_pretrained
from hydra_dense.attention.local_window import WindowSoftmaxBranch

from tests.helpers.mixing import assert_padding_invariant


def window_of(index: int, grid: tuple[int, ...], window: int, shift: int = 0) -> tuple[int, ...]:
    """Which window a grid token (row-major ``index``) falls into: frames apart, W x W in (h, w),
    windows starting ``shift`` tokens before the first row and column."""
    coords = []
    for size in reversed(grid):
        coords.append(index % size)
        index //= size
    coords = coords[::-1]
    if len(grid) == 1:
        return ((coords[0] + shift) // window,)
    return (*coords[:-2], (coords[-2] + shift) // window, (coords[-1] + shift) // window)


def dense_reference(q, k, v, grid, P, window, heads, pad=None, shift=0):
    """softmax(q k^T / sqrt(d)) v per head over the allowed (query, key) pairs, one token at a time."""
    B, N, D = q.shape
    d = D // heads
    allowed = torch.zeros(N, N, dtype=torch.bool)
    for i in range(N):
        for j in range(N):
            allowed[i, j] = i < P or j < P or window_of(i - P, grid, window, shift) == window_of(j - P, grid, window,
                                                                                                 shift)
    out = torch.zeros_like(q)
    for b in range(B):
        ok = allowed.clone()
        if pad is not None:
            ok &= ~pad[b][None, :]
        for hd in range(heads):
            sl = slice(hd * d, (hd + 1) * d)
            scores = q[b, :, sl] @ k[b, :, sl].T / math.sqrt(d)
            out[b, :, sl] = torch.softmax(scores.masked_fill(~ok, float("-inf")), -1) @ v[b, :, sl]
        if pad is not None:
            out[b, pad[b]] = 0
    return out


def random_gate(branch, seed=0):
    with torch.no_grad():
        branch.gate.copy_(torch.randn(branch.gate.shape, generator=torch.Generator().manual_seed(seed)))
    return branch


@pytest.mark.parametrize("grid,window,P,shift", [((5, 7), 3, 1, 0), ((4, 4), 2, 0, 0), ((2, 3, 5), 2, 1, 0),
                                                 ((7,), 3, 1, 0), ((5, 7), 3, 1, 1), ((4, 4), 4, 0, 2),
                                                 ((2, 3, 5), 2, 1, 1), ((7,), 3, 1, 2)])
def test_matches_dense_masked_softmax(grid, window, P, shift):
    B, D, H = 2, 8, 2
    N = P + math.prod(grid)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(B, N, D, generator=g, dtype=torch.float64) for _ in range(3))
    branch = random_gate(WindowSoftmaxBranch(D, H, window, len(grid), shift)).double()
    out = branch(q, k, v, TokenLayout(grid, P))
    ref = dense_reference(q, k, v, grid, P, window, H, shift=shift) * branch.gate
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("shift", [0, 1])
def test_padded_keys_are_masked_and_padded_queries_get_zero(shift):
    B, D, H, grid, P, window = 2, 8, 2, (4, 5), 1, 2
    N = P + 20
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(B, N, D, generator=g, dtype=torch.float64) for _ in range(3))
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[0, P:].view(4, 5)[:, 3:] = True  # two columns of padding in image 0
    pad[1, P:].view(4, 5)[2:, :] = True  # two rows in image 1 (whole windows of padding)
    branch = random_gate(WindowSoftmaxBranch(D, H, window, shift=shift)).double()
    out = branch(q, k, v, TokenLayout(grid, P, pad))
    ref = dense_reference(q, k, v, grid, P, window, H, pad, shift) * branch.gate
    torch.testing.assert_close(out, ref)
    changed = v.clone()
    changed[pad] = 1e3
    torch.testing.assert_close(branch(q, k, changed, TokenLayout(grid, P, pad)), out)


def test_zero_initialised_branch_gives_exactly_plain_hydra_and_the_formula_otherwise():
    torch.manual_seed(0)
    plain = build_attention("hydra", 16, 2)
    local = build_attention("hydra", 16, 2, local="win2")
    local.load_state_dict(plain.state_dict(), strict=False)
    assert torch.count_nonzero(local.local_window.gate) == 0 and local.local is None
    x = torch.randn(2, 1 + 12, 16)
    layout = TokenLayout((3, 4), 1)
    assert torch.equal(local(x, layout), plain(x, layout))
    random_gate(local.local_window)
    q, k, v = local.qkv(x).unflatten(-1, (3, 16)).unbind(-2)
    ref = local.proj(hydra_attention(q, k, v) + dense_reference(q, k, v, (3, 4), 1, 2, 2) * local.local_window.gate)
    torch.testing.assert_close(local(x, layout), ref, rtol=1e-5, atol=1e-6)


def test_both_branches_add_up():
    torch.manual_seed(0)
    both = build_attention("hydra", 8, 2, local="win2+dwc3")
    assert both.local is not None and both.local_window is not None and both.local_name == "win2+dwc3"
    torch.nn.init.normal_(both.local.conv.weight, std=0.3)
    random_gate(both.local_window)
    x = torch.randn(1, 1 + 9, 8)
    layout = TokenLayout((3, 3), 1)
    q, k, v = both.qkv(x).unflatten(-1, (3, 8)).unbind(-2)
    ref = both.proj(hydra_attention(q, k, v) + both.local_window(q, k, v, layout) + both.local(v, layout))
    torch.testing.assert_close(both(x, layout), ref)


@pytest.mark.parametrize("plan", [{"default": "hydra", "local": "win2"}, {"default": "hydra", "local": "win2+dwc3"},
                                  {"default": "hydra", "local": "win3_shift"},
                                  {"window_size": 2, "global_blocks": [1], "global_attention": "hydra",
                                   "local": "win3"}])
def test_vit_padding_invariance_with_window_branch(plan):
    m = ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=16, img_size=64, plan=plan, out_indices=[1],
            class_token="window_size" not in plan)
    for blk in m.blocks:
        if getattr(blk.attn, "local_window", None) is not None:
            random_gate(blk.attn.local_window)
        if getattr(blk.attn, "local", None) is not None:
            torch.nn.init.normal_(blk.attn.local.conv.weight, std=0.2)
    assert_padding_invariant(m)


def test_gradients_reach_the_gate_from_zero_and_then_qkv_through_the_branch():
    m = ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=8, img_size=32, plan={"default": "hydra",
                                                                                          "local": "win2"})
    x = torch.randn(2, 3, 32, 32)
    m(x)[0].square().mean().backward()
    for blk in m.blocks:
        assert blk.attn.local_window.gate.grad.abs().sum() > 0
    # with the gate open, the branch passes gradient to q and k (plain Hydra's own share removed)
    attn = m.blocks[0].attn
    random_gate(attn.local_window)
    tokens = torch.randn(1, 1 + 16, 32)
    layout = TokenLayout((4, 4), 1)
    q, k, v = (t.detach().requires_grad_() for t in attn.qkv(tokens).unflatten(-1, (3, 32)).unbind(-2))
    attn.local_window(q, k, v, layout).square().sum().backward()
    assert q.grad.abs().sum() > 0 and k.grad.abs().sum() > 0 and v.grad.abs().sum() > 0


def test_plan_names_yaml_checkpoint_and_video():
    plan = plan_from_name("hybrid4+win4+dwc7", 12)
    assert plan.local == "win4+dwc7" and plan.describe(12) == "msa x8, hydra+win4+dwc7@[8, 9, 10, 11]"
    assert "hydra+win4" in plan_names(12)
    shifted = ViT(None, embed_dim=16, depth=3, num_heads=2, patch_size=8, img_size=16,
                  plan={"default": "hydra", "local": "win4_shift"})
    assert [blk.attn.local_window.shift for blk in shifted.blocks] == [0, 2, 0]
    with pytest.raises(ValueError, match="shift must be in"):
        WindowSoftmaxBranch(8, 2, 2, shift=2)
    with pytest.raises(ValueError, match="unknown local mixing 'win4\\+win2'"):
        AttentionPlan(default="hydra", local="win4+win2").resolve(2)
    with pytest.raises(ValueError, match="at least 1 token"):
        AttentionPlan(default="hydra", local="win0").resolve(2)
    msa = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=8, img_size=16, plan="msa")
    local = ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=8, img_size=16,
                plan={"default": "hydra", "local": "win2"})
    report = load_pretrained(local, msa.state_dict(), strict=True)
    assert not report.missing and report.new == ["blocks.0.attn.local_window.gate", "blocks.1.attn.local_window.gate"]
    video = VideoViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=8, num_frames=4, img_size=16,
                     layout="divided", plan={"default": "hydra", "local": "win2"})
    assert video.blocks[0].temporal_attn.local_window.grid_dims == 1
    assert video.blocks[0].block.attn.local_window.grid_dims == 2
    joint = VideoViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=8, num_frames=4, img_size=16,
                     layout="joint", plan={"default": "hydra", "local": "win2"})
    for blk in joint.blocks:
        random_gate(blk.attn.local_window)
    assert joint.forward_tokens(torch.randn(1, 3, 4, 16, 16))[0].isfinite().all()
