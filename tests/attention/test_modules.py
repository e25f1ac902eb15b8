"""Every attention kind built by name: the same parameters, swappable state dicts, options refused by name."""
import pytest
import torch

from hydra_dense.attention import AttentionPlan, BlockAttention, build_attention


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
