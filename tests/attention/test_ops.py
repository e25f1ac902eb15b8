"""The Hydra, linear and fused attention ops against independent references: the quadratic form,
H = D linear attention, and eager against fused."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from hydra_dense.attention import hydra_attention, linear_attention


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
