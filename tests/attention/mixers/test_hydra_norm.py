"""Norm-aware Hydra against independent references: the explicit T x T per-channel weights, and
the per-channel softmax it expands to first order."""
import pytest
import torch

from hydra_dense.attention import BlockAttention, plan_from_name
from hydra_dense.attention.modules import NormAwareHydraAttention, TokenLayout, build_attention
from hydra_dense.attention.ops import norm_aware_hydra


def explicit_weights(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """out[b, t, d] = sum_s w[b, d, t, s] v[b, s, d], w = (1 + q_t (k_s - mean k)) / T over kept keys."""
    out = torch.zeros_like(v)
    for b in range(q.shape[0]):
        ks, vs = k[b][keep[b]], v[b][keep[b]]  # (T', D)
        k_centred = ks - ks.mean(0)
        for d in range(q.shape[-1]):
            w = (1 + q[b, :, d, None] * k_centred[None, :, d]) / len(ks)  # (T, T')
            assert torch.allclose(w.sum(-1), torch.ones(q.shape[1], dtype=w.dtype))
            out[b, :, d] = w @ vs[:, d]
    return out * keep[..., None]


@pytest.mark.parametrize("impl", ["eager", "fused"])
def test_norm_aware_hydra_equals_its_explicit_token_weights(impl):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 9, 5, generator=g, dtype=torch.float64) for _ in range(3))
    keep = torch.ones(2, 9, dtype=torch.bool)
    keep[1, 6:] = False  # three padded tokens in the second image
    out = norm_aware_hydra(q, k, v, key_padding_mask=~keep, impl=impl)
    torch.testing.assert_close(out, explicit_weights(q, k, v, keep))
    assert out[1, 6:].abs().max() == 0


def test_norm_aware_hydra_is_first_order_per_channel_softmax():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 16, 4, generator=g, dtype=torch.float64) for _ in range(3))
    errors = []
    for eps in (1e-1, 1e-2):
        # per channel d: softmax over tokens s of eps * q_t k_s, applied to v
        logits = eps * q[0].T[:, :, None] * k[0].T[:, None, :]  # (D, T, T)
        softmax = torch.einsum("dts,sd->td", logits.softmax(-1), v[0])
        errors.append((norm_aware_hydra(eps * q, k, v, impl="eager")[0] - softmax).abs().max().item())
    assert errors[1] < errors[0] / 50  # second-order remainder: 100x smaller for 10x smaller q


def test_the_module_keeps_the_query_norm_and_loads_an_msa_state_dict():
    torch.manual_seed(0)
    msa = build_attention("msa", 32, num_heads=4)
    plan = plan_from_name("hydra_norm+dwc3", depth=1)
    attn = build_attention("hydra_norm", 32, num_heads=4, **BlockAttention.of(plan, "hydra_norm").arguments())
    assert isinstance(attn, NormAwareHydraAttention)
    missing, unexpected = attn.load_state_dict(msa.state_dict(), strict=False)
    assert not unexpected and all(name.startswith("local.") for name in missing)
    x = torch.randn(2, 12, 32)
    q, k, v = attn.qkv(x).unflatten(-1, (3, 32)).unbind(-2)
    expected = attn.proj(v.mean(1, keepdim=True) + attn.scale * q * ((k * v).mean(1, keepdim=True)
                                                                     - k.mean(1, keepdim=True) * v.mean(1, keepdim=True)))
    torch.testing.assert_close(attn(x, TokenLayout(grid=(3, 4))), expected, rtol=1e-5, atol=1e-5)  # the zero-initialised conv adds nothing
    with pytest.raises(ValueError, match="token_mean"):
        build_attention("hydra_norm", 32, num_heads=4, token_mean=True)
