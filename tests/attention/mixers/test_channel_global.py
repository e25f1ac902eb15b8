"""AFT-Simple and Poly-NL (the Hydra paper's token-linear baselines) against references written
out by hand: explicit loops over tokens and channels, padding masks, gradients, plans."""
import warnings

import pytest
import torch

from hydra_dense.attention import TokenLayout, build_attention, plan_from_name, plan_names
from hydra_dense.attention.ops import aft_simple, aft_simple_eager, poly_nl, poly_nl_eager
from hydra_dense.backbones import ViT


def aft_by_hand(q, k, v, valid=None):
    """out[b, t, d] = sigmoid(q[b, t, d]) * sum_s w[b, s, d] v[b, s, d], w = exp(k) / sum exp(k) over valid s."""
    B, T, D = q.shape
    out = torch.zeros(B, T, D, dtype=torch.float64)
    for b in range(B):
        keep = [s for s in range(T) if valid is None or valid[b, s]]
        for d in range(D):
            e = [torch.exp(k[b, s, d].double()) for s in keep]
            z = sum(e)
            ctx = sum(e_i / z * v[b, s, d].double() for e_i, s in zip(e, keep))
            for t in range(T):
                if valid is None or valid[b, t]:
                    out[b, t, d] = torch.sigmoid(q[b, t, d].double()) * ctx
    return out


def poly_by_hand(q, k, v, valid=None):
    """out[b, t] = q[b, t] * (1/N) sum over the N valid s of k[b, s] * v[b, s] (einsum per sample)."""
    B, T, D = q.shape
    out = torch.zeros(B, T, D, dtype=torch.float64)
    for b in range(B):
        keep = torch.tensor([valid is None or bool(valid[b, s]) for s in range(T)])
        ctx = torch.einsum("sd,sd->d", k[b, keep].double(), v[b, keep].double()) / int(keep.sum())
        out[b, keep] = q[b, keep].double() * ctx
    return out


CASES = [(aft_simple, aft_by_hand), (poly_nl, poly_by_hand)]


@pytest.mark.parametrize("op,reference", CASES)
def test_matches_the_formula_written_out(op, reference):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 7, 5, generator=g) * 2 for _ in range(3))
    torch.testing.assert_close(op(q, k, v).double(), reference(q, k, v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,reference", CASES)
def test_padded_keys_contribute_nothing_and_padded_rows_are_zero(op, reference):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 9, 4, generator=g) for _ in range(3))
    pad = torch.zeros(2, 9, dtype=torch.bool)
    pad[0, 6:] = True
    pad[1, 0] = True
    out = op(q, k, v, pad)
    torch.testing.assert_close(out.double(), reference(q, k, v, ~pad), rtol=1e-5, atol=1e-6)
    assert torch.all(out[pad] == 0)
    k2, v2 = k.clone(), v.clone()
    k2[pad], v2[pad] = 50.0, -50.0  # whatever sits in the padding
    torch.testing.assert_close(op(q, k2, v2, pad), out)
    # and the mask matters: without it the padding changes the valid rows (the test can fail)
    assert (op(q, k2, v2)[~pad] - out[~pad]).abs().max() > 1e-3


@pytest.mark.parametrize("op,reference", CASES)
def test_gradients_match_the_reference(op, reference):
    g = torch.Generator().manual_seed(2)
    pad = torch.zeros(1, 6, dtype=torch.bool)
    pad[0, -2:] = True
    leaves = [torch.randn(1, 6, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    weight = torch.randn(1, 6, 3, generator=g, dtype=torch.float64)
    (op(*leaves, pad) * weight).sum().backward()
    ours = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    (reference(*leaves, ~pad) * weight).sum().backward()
    for a, b in zip(ours, (t.grad for t in leaves)):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("eager", [aft_simple_eager, poly_nl_eager])
def test_an_all_padding_sample_gives_zeros_not_nan(eager):
    q = torch.randn(2, 5, 4, requires_grad=True)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[0] = True
    out = eager(q, q, q, pad)
    out.sum().backward()
    assert torch.all(out[0] == 0) and torch.isfinite(out).all() and torch.isfinite(q.grad).all()


@pytest.mark.parametrize("op", [aft_simple, poly_nl])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_accumulates_in_fp32(op, dtype):
    """4,096 tokens in half precision: the result is the fp32 result rounded once."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 4096, 8, generator=g) for _ in range(3))
    low = op(q.to(dtype), k.to(dtype), v.to(dtype), impl="eager")
    ref = op(q.to(dtype).float(), k.to(dtype).float(), v.to(dtype).float(), impl="eager")
    assert low.dtype == dtype
    torch.testing.assert_close(low.float(), ref, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("op", [aft_simple, poly_nl])
def test_fused_equals_eager_with_mask_and_grads(op):
    import hydra_dense.attention.ops as ops

    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 300, 16, generator=g, requires_grad=True) for _ in range(3))
    pad = torch.zeros(2, 300, dtype=torch.bool)
    pad[1, 200:] = True
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a compile failure would warn and fall back
        fused = op(q, k, v, pad, impl="fused")
    assert not ops._compile_failed
    eager = op(q, k, v, pad, impl="eager")
    torch.testing.assert_close(fused, eager, rtol=1e-5, atol=1e-6)
    gf = torch.autograd.grad(fused.square().sum(), (q, k, v))
    ge = torch.autograd.grad(eager.square().sum(), (q, k, v))
    for a, b in zip(gf, ge):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind,op", [("aft", aft_simple), ("polynl", poly_nl)])
def test_module_uses_timms_qkv_and_proj(kind, op):
    """The module is ``proj(op(q, k, v))`` on the MSA module's own parameters."""
    torch.manual_seed(0)
    msa = build_attention("msa", 12, 3)
    attn = build_attention(kind, 12, 3)
    attn.load_state_dict(msa.state_dict())  # the same state dict, strict
    x = torch.randn(2, 10, 12)
    q, k, v = (x @ msa.qkv.weight.T + msa.qkv.bias).chunk(3, dim=-1)
    expected = op(q, k, v) @ msa.proj.weight.T + msa.proj.bias
    torch.testing.assert_close(attn(x, TokenLayout((3, 3), 1)), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("plan", ["aft", "polynl", {"default": "aft", "local": "dwc3"},
                                  {"default": "polynl", "local": "dwc5"}])
def test_vit_padding_invariance(plan):
    from tests.helpers.mixing import assert_padding_invariant, randomise

    assert_padding_invariant(randomise(ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=16, img_size=64,
                                           plan=plan, out_indices=[1])))


def test_plan_names_hybrids_and_local_mixing():
    plan = plan_from_name("aft_last2+dwc3", 4)
    assert plan.resolve(4) == ["msa", "msa", "aft", "aft"]
    assert plan.describe(4) == "msa@[0, 1], aft+dwc3@[2, 3]"
    m = ViT(None, embed_dim=16, depth=4, num_heads=2, patch_size=8, img_size=32, plan=plan)
    assert [type(b.attn).__name__ for b in m.blocks] == ["MSAttention"] * 2 + ["AFTSimpleAttention"] * 2
    assert m.blocks[3].attn.local is not None and not hasattr(m.blocks[1].attn, "local")
    m.set_plan(plan_from_name("polynl", 4))
    assert {type(b.attn).__name__ for b in m.blocks} == {"PolyNLAttention"}
    names = plan_names(12)
    assert {"aft", "polynl", "aft+dwc7", "polynl_last<L>+dwc3"} <= set(names)
    assert "aft+dwc3_kv" not in names
    with pytest.raises(ValueError, match="aft.*branch on v or x"):
        ViT(None, embed_dim=16, depth=2, num_heads=2, patch_size=8, img_size=32, plan={"default": "aft",
                                                                                          "local": "dwc3_kv"})
    with pytest.raises(ValueError, match="last 5 blocks of a model of depth 4"):
        plan_from_name("polynl_last5", 4)
