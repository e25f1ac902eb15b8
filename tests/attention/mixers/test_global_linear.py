"""token_mean: Hydra's kv averaged over the valid tokens instead of summed. Against the quadratic form
written token by token, invariance of the output scale to the token count, padding, plans."""
import pytest
import torch

from hydra_dense.attention import TokenLayout, build_attention, plan_from_name, plan_names
from hydra_dense.backbones import ViT

from tests.helpers.mixing import assert_padding_invariant


def quadratic_hydra_mean(q, k, v, pad=None):
    """out_t = (1 / n) * sum_s phi(q_t) * phi(k_s) * v_s over the n valid keys s, one pair at a time."""
    B, N, D = q.shape
    phi = lambda t: t / t.norm(dim=-1, keepdim=True)  # noqa: E731
    qn, kn = phi(q), phi(k)
    out = torch.zeros_like(q)
    for b in range(B):
        keys = [s for s in range(N) if pad is None or not pad[b, s]]
        for t in range(N):
            if pad is not None and pad[b, t]:
                continue
            out[b, t] = sum(qn[b, t] * kn[b, s] * v[b, s] for s in keys) / len(keys)
    return out


@pytest.mark.parametrize("padded", [False, True])
def test_matches_the_quadratic_form_over_valid_tokens(padded):
    torch.manual_seed(0)
    attn = build_attention("hydra", 8, 2, token_mean=True).double()
    x = torch.randn(2, 1 + 12, 8, dtype=torch.float64)
    pad = None
    if padded:
        pad = torch.zeros(2, 13, dtype=torch.bool)
        pad[0, 1:].view(3, 4)[:, 2:] = True
    q, k, v = attn.qkv(x).unflatten(-1, (3, 8)).unbind(-2)
    ref = attn.proj(quadratic_hydra_mean(q, k, v, pad))
    out = attn(x, TokenLayout((3, 4), 1, pad))
    keep = slice(None) if pad is None else ~pad
    torch.testing.assert_close(out[keep], ref[keep])


def test_output_scale_does_not_grow_with_the_token_count():
    """The same tokens twice over: with token_mean the output is unchanged, with the sum it doubles
    (before proj's bias)."""
    torch.manual_seed(0)
    mean = build_attention("hydra", 16, 2, token_mean=True, proj_bias=False)
    summed = build_attention("hydra", 16, 2, proj_bias=False)
    summed.load_state_dict(mean.state_dict())
    x = torch.randn(1, 12, 16)
    twice = torch.cat([x, x], 1)
    torch.testing.assert_close(mean(twice, TokenLayout((2, 12)))[:, :12], mean(x, TokenLayout((1, 12))))
    torch.testing.assert_close(summed(twice, TokenLayout((2, 12)))[:, :12], 2 * summed(x, TokenLayout((1, 12))))


def test_padding_invariance_and_the_plan():
    m = ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=16, img_size=64, out_indices=[1],
            plan={"default": "hydra", "token_mean": True, "local": "dwc3"})
    for blk in m.blocks:
        torch.nn.init.normal_(blk.attn.local.conv.weight, std=0.2)
    assert_padding_invariant(m)
    assert [b.attn.token_mean for b in m.blocks] == [True, True]
    assert m.plan.describe(2) == "hydra+mean+dwc3 x2"
    plan = plan_from_name("hybrid2+mean+win4", 4)
    assert plan.token_mean and plan.local == "win4" and plan.block_labels(4)[2:] == ["hydra+mean+win4"] * 2
    assert {"hydra+mean", "hydra+mean+dwc7", "hybrid4+mean+win4"} <= set(plan_names(12))
    with pytest.raises(ValueError, match="no Hydra / linear block whose global term .\+mean. would change"):
        plan_from_name("aft+mean", 4)
    # switching the plan's token_mean swaps the modules, keeping the weights
    qkv = m.blocks[0].attn.qkv.weight.clone()
    m.set_plan({"default": "hydra", "local": "dwc3"})
    assert not m.blocks[0].attn.token_mean and torch.equal(m.blocks[0].attn.qkv.weight, qkv)
