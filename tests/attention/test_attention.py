"""Hydra attention against independent references: the quadratic form and H = D linear attention."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from hydra_dense.attention import (
    BlockAttention,
    AttentionPlan,
    HydraAttention,
    MSAttention,
    TokenLayout,
    WindowMSAttention,
    build_attention,
    hydra_attention,
    linear_attention,
)


def quadratic_reference(q, k, v, mask=None):
    """out_t = sum_s (phi(q_t) * phi(k_s)) * v_s, materialising the (T x T x D) interaction."""
    qn = q / q.norm(dim=-1, keepdim=True)
    kn = k / k.norm(dim=-1, keepdim=True)
    terms = qn.unsqueeze(-2) * kn.unsqueeze(-3) * v.unsqueeze(-3)  # (..., T, S, D)
    if mask is not None:
        terms = terms.masked_fill(mask.unsqueeze(-2).unsqueeze(-1), 0.0)
    return terms.sum(dim=-2)


def rand(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("shape", [(2, 7, 5), (3, 1, 4), (2, 3, 6, 8)])
def test_matches_quadratic_form(shape):
    q, k, v = rand(*shape, seed=1), rand(*shape, seed=2), rand(*shape, seed=3)
    torch.testing.assert_close(hydra_attention(q, k, v), quadratic_reference(q, k, v), rtol=1e-6, atol=1e-6)


def test_matches_linear_attention_with_as_many_heads_as_features():
    q, k, v = (rand(2, 9, 6, seed=s) for s in (4, 5, 6))
    ref = linear_attention(q, k, v, num_heads=6, feature_map="cosine")
    torch.testing.assert_close(hydra_attention(q, k, v), ref, rtol=1e-6, atol=1e-6)
    # and with fewer heads it is a different operation (the check can fail)
    assert (linear_attention(q, k, v, num_heads=2) - ref).abs().max() > 1e-3


def test_key_padding_mask_valid_tokens_see_only_valid_tokens():
    q, k, v = (rand(2, 10, 8, seed=s) for s in (7, 8, 9))
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[0, 6:] = True
    mask[1, 3:5] = True
    out = hydra_attention(q, k, v, key_padding_mask=mask)
    for b in range(2):
        keep = ~mask[b]
        alone = quadratic_reference(q[b, keep], k[b, keep], v[b, keep])
        torch.testing.assert_close(out[b, keep], alone, rtol=1e-6, atol=1e-6)
        assert torch.all(out[b, mask[b]] == 0), "padded positions output zeros (documented)"
    # padded tokens' contents cannot leak: change them, valid outputs stay the same
    k2, v2 = k.clone(), v.clone()
    k2[mask], v2[mask] = 1e3, -1e3
    torch.testing.assert_close(hydra_attention(q, k2, v2, key_padding_mask=mask), out)
    torch.testing.assert_close(quadratic_reference(q, k, v, mask)[~mask], out[~mask], rtol=1e-6, atol=1e-6)


def test_gradients_match_reference():
    q, k, v = (rand(2, 6, 5, seed=s).requires_grad_() for s in (10, 11, 12))
    mask = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])
    w = rand(2, 6, 5, seed=13)
    g1 = torch.autograd.grad((hydra_attention(q, k, v, mask) * w).sum(), (q, k, v))
    g2 = torch.autograd.grad((quadratic_reference(q, k, v, mask).masked_fill(mask[..., None], 0) * w).sum(), (q, k, v))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-8)


def test_zero_vectors_give_no_nan():
    q, k, v = torch.zeros(1, 4, 8), torch.zeros(1, 4, 8), torch.randn(1, 4, 8)
    q.requires_grad_(), k.requires_grad_()
    out = hydra_attention(q, k, v)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()
    assert torch.all(out == 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_long_sequence_accumulates_in_fp32(dtype):
    # T = 32k tokens whose kv sum is 409,600: it overflows fp16 (max 65,504) unless accumulated
    # in fp32, while the true output, 51,200, still fits.
    T, D = 32768, 64
    q = torch.ones(1, T, D, dtype=dtype)
    k = torch.ones(1, T, D, dtype=dtype)
    v = torch.full((1, T, D), 100.0, dtype=dtype)
    out = hydra_attention(q, k, v, impl="eager")
    assert out.dtype == dtype and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), torch.full((1, T, D), 51200.0), rtol=1e-2, atol=0)
    # small vectors: their squares (1e-8) underflow in fp16, the fp32 norm does not.
    # phi(x) = 1/8 per feature, kv = 8 tokens * 1/8 * 1 = 1, out = 1/8.
    small = torch.full((1, 8, D), 1e-4, dtype=dtype)
    out = hydra_attention(small, small, torch.ones(1, 8, D, dtype=dtype), impl="eager")
    torch.testing.assert_close(out.float(), torch.full((1, 8, D), 0.125), rtol=2e-2, atol=0)


def test_autocast_module_runs_in_bf16():
    attn = HydraAttention(32, num_heads=4)
    x = torch.randn(2, 50, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attn(x)
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()
    torch.testing.assert_close(y.float(), attn(x), rtol=0.05, atol=0.05)


def _fused(q, k, v, mask=None):
    """``impl="fused"``, failing the test if compilation failed and the eager path ran instead
    (the op falls back with a warning and sets ``_compile_failed``)."""
    import hydra_dense.attention.ops as ops

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = hydra_attention(q, k, v, mask, impl="fused")
    assert not ops._compile_failed and "hydra_attention_eager" in ops._compiled, "the fused (compiled) path did not run"
    return out


@pytest.mark.slow  # in-process, but among the heaviest: out of the fast loop
def test_fused_equals_eager_fp32_with_mask_and_grads():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 64, 32, requires_grad=True) for _ in range(3))
    mask = torch.zeros(2, 64, dtype=torch.bool)
    mask[1, 40:] = True
    outs, grads = [], []
    for run in (lambda: hydra_attention(q, k, v, mask, impl="eager"), lambda: _fused(q, k, v, mask)):
        out = run()
        outs.append(out)
        grads.append(torch.autograd.grad((out * torch.linspace(-1, 1, 32)).sum(), (q, k, v)))
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(grads[1], grads[0]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_equals_eager_low_precision(dtype):
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 128, 32, dtype=dtype) for _ in range(3))
    torch.testing.assert_close(_fused(q, k, v).float(),
                               hydra_attention(q, k, v, impl="eager").float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("bad, match", [
    (lambda q: (q, q[:, :3], q, None), "same shape"),
    (lambda q: (q, q, q, torch.zeros(2, 5)), "bool"),
    (lambda q: (q, q, q, torch.zeros(2, 4, dtype=torch.bool)), r"key_padding_mask must have shape \(2, 5\)"),
    (lambda q: (q[0, 0, 0], q[0, 0, 0], q[0, 0, 0], None), r"\(\.\.\., T, D\)"),
])
def test_bad_input_is_named(bad, match):
    with pytest.raises(ValueError, match=match):
        hydra_attention(*bad(torch.randn(2, 5, 8)))


def test_msa_module_matches_manual_softmax_and_masks():
    torch.manual_seed(0)
    attn = MSAttention(16, num_heads=4).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    q, k, v = attn.qkv(x).reshape(2, 7, 3, 4, 4).permute(2, 0, 3, 1, 4)
    ref = ((q @ k.transpose(-1, -2)) / 2.0).softmax(-1) @ v
    ref = attn.proj(ref.transpose(1, 2).reshape(2, 7, 16))
    torch.testing.assert_close(attn(x), ref)
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[0, 5:] = True
    out = attn(x, TokenLayout((7,), 0, mask))
    torch.testing.assert_close(out[0, :5], attn(x[:1, :5])[0])


def test_all_modules_share_parameters_and_swap():
    kinds = ["msa", "hydra", "none", "linear", "window"]
    plan = AttentionPlan(window_size=2)
    mods = [build_attention(k, 24, 4, **BlockAttention.of(plan, k).arguments()) for k in kinds]
    assert [m.plan_arguments for m in mods][3:] == [
        {"local": None, "token_mean": False, "global_gain": False, "linear_heads": None, "feature_map": "cosine", "grid_dims": 2,
         "local_shifted": False}, {"window_size": 2, "rel_pos": False}]
    with pytest.raises(ValueError, match="attention 'msa' does not take window_size; it takes no plan options"):
        build_attention("msa", 24, 4, window_size=2)
    with pytest.raises(ValueError, match="attention 'aft' does not take token_mean; it takes grid_dims, local, "):
        build_attention("aft", 24, 4, token_mean=True)
    names = [set(m.state_dict()) for m in mods]
    assert all(n == names[0] for n in names)
    sd = mods[0].state_dict()
    for m in mods[1:]:
        m.load_state_dict(sd)
    x = torch.randn(1, 4, 24)
    torch.testing.assert_close(mods[2](x), mods[0].proj(mods[0].qkv(x)[..., 48:]))


def test_window_attention_equals_msa_inside_each_window():
    torch.manual_seed(0)
    win = WindowMSAttention(16, num_heads=2, window_size=2).double()
    msa = MSAttention(16, num_heads=2).double()
    msa.load_state_dict(win.state_dict())
    x = torch.randn(1, 1 + 4 * 6, 16, dtype=torch.float64)  # 1 cls token + a 4x6 grid
    out = win(x, TokenLayout((4, 6), 1))
    grid = x[:, 1:].reshape(1, 4, 6, 16)
    for i in range(0, 4, 2):
        for j in range(0, 6, 2):
            ref = msa(grid[:, i:i + 2, j:j + 2].reshape(1, 4, 16)).reshape(1, 2, 2, 16)
            torch.testing.assert_close(out[:, 1:].reshape(1, 4, 6, 16)[:, i:i + 2, j:j + 2], ref)
    # a window larger than the (padded) grid is global attention
    big = WindowMSAttention(16, num_heads=2, window_size=8).double()
    big.load_state_dict(win.state_dict())
    torch.testing.assert_close(big(x[:, 1:], TokenLayout((4, 6), 0)), msa(x[:, 1:]))


def test_window_attention_rel_pos_equals_timm_sam_attention_in_each_window():
    from timm.models.vision_transformer_sam import Attention as SamAttention

    torch.manual_seed(0)
    win = WindowMSAttention(16, num_heads=2, window_size=3, rel_pos=True).double()
    with torch.no_grad():
        win.rel_pos_h.normal_()
        win.rel_pos_w.normal_()
    sam = SamAttention(16, num_heads=2, use_rel_pos=True, input_size=(3, 3)).double()
    sam.load_state_dict(win.state_dict())
    x = torch.randn(2, 6 * 6, 16, dtype=torch.float64)
    out = win(x, TokenLayout((6, 6), 0)).reshape(2, 6, 6, 16)
    grid = x.reshape(2, 6, 6, 16)
    for i in range(0, 6, 3):
        for j in range(0, 6, 3):
            torch.testing.assert_close(out[:, i:i + 3, j:j + 3], sam(grid[:, i:i + 3, j:j + 3]))


def test_plan_resolution():
    assert AttentionPlan("hydra").resolve(3) == ["hydra"] * 3
    assert AttentionPlan(hydra_last=2).resolve(4) == ["msa", "msa", "hydra", "hydra"]
    assert AttentionPlan(hydra_blocks=[0, -1]).resolve(4) == ["hydra", "msa", "msa", "hydra"]
    assert AttentionPlan(window_size=7, global_blocks=[1, 3], global_attention="hydra").resolve(4) == [
        "window", "hydra", "window", "hydra"]
    assert AttentionPlan.coerce(["msa", "none"]).resolve(2) == ["msa", "none"]
    assert AttentionPlan.coerce({"default": "hydra"}).resolve(1) == ["hydra"]


@pytest.mark.parametrize("plan, match", [
    (AttentionPlan(hydra_blocks=[12]), "hydra_blocks index 12 is out of range for a model of depth 12"),
    (AttentionPlan(window_size=14, global_blocks=[-13]), "global_blocks index -13"),
    (AttentionPlan(hydra_last=13), "hydra_last=13"),
    (AttentionPlan(blocks=["msa"] * 3), "blocks lists 3 entries"),
    (AttentionPlan(global_blocks=[1]), "only apply with window_size"),
    (AttentionPlan(default="softmax"), "unknown attention 'softmax'"),
])
def test_plan_errors_name_the_problem(plan, match):
    with pytest.raises(ValueError, match=match):
        plan.resolve(12)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown attention 'flash'"):
        AttentionPlan.coerce("flash")
    with pytest.raises(ValueError, match="unknown attention-plan keys"):
        AttentionPlan.coerce({"defualt": "msa"})
    with pytest.raises(ValueError, match="unknown linear-attention feature map"):
        build_attention("linear", 8, 2, feature_map="gauss")


def test_module_rejects_wrong_feature_size():
    with pytest.raises(ValueError, match=r"expected x of shape \(B, N, 16\)"):
        HydraAttention(16, num_heads=2)(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="key_padding_mask must be bool of shape"):
        HydraAttention(16, num_heads=2)(torch.randn(2, 3, 16), TokenLayout((3,), 0, torch.zeros(2, 4, dtype=torch.bool)))


def test_linear_kernels_are_distinct_and_finite():
    q, k, v = (rand(1, 5, 8, seed=s) for s in (1, 2, 3))
    outs = {kern: linear_attention(q, k, v, 2, kern) for kern in ("cosine", "relu", "elu", "sigmoid", "identity")}
    assert all(torch.isfinite(o).all() for o in outs.values())
    assert (outs["relu"] - outs["elu"]).abs().max() > 1e-3
    # identity kernel, 1 head: plain (un-normalised) linear attention Q (K^T V)
    torch.testing.assert_close(linear_attention(q, k, v, 1, "identity"), q @ (k.transpose(1, 2) @ v))
    assert F.cosine_similarity(outs["cosine"].flatten(), hydra_attention(q, k, v).flatten(), dim=0) < 0.9999


def test_flop_counting_does_not_disable_the_fused_path():
    """Counting FLOPs (a dispatch mode torch.compile cannot run under) takes the eager path
    without marking the fused one as failed for the rest of the process."""
    import hydra_dense.attention.ops as attn
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(1, attn.FUSED_MIN_NUMEL // 64 + 1, 64)
    with FlopCounterMode(display=False), warnings.catch_warnings():
        warnings.simplefilter("error")  # no "fused Hydra attention failed" warning
        out = attn.hydra_attention(q, q, q)
    torch.testing.assert_close(out, attn.hydra_attention_eager(q, q, q))
    assert not attn._compile_failed
