"""The Hydra attention module: bf16 under autocast, and inputs of the wrong size named."""
import pytest
import torch

from hydra_dense.attention import HydraAttention, TokenLayout


def test_autocast_module_runs_in_bf16():
    attn = HydraAttention(32, num_heads=4)
    x = torch.randn(2, 50, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attn(x)
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()
    torch.testing.assert_close(y.float(), attn(x), rtol=0.05, atol=0.05)


def test_module_rejects_wrong_feature_size():
    with pytest.raises(ValueError, match=r"expected x of shape \(B, N, 16\)"):
        HydraAttention(16, num_heads=2)(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match="key_padding_mask must be bool of shape"):
        HydraAttention(16, num_heads=2)(torch.randn(2, 3, 16), TokenLayout((3,), 0, torch.zeros(2, 4, dtype=torch.bool)))
