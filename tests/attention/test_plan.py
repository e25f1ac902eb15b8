"""Attention plans resolved into per-block kinds, and their errors naming the problem."""
import pytest

from hydra_dense.attention import AttentionPlan, build_attention


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
