"""backbones.blocks: the plan resolved once when a backbone is built, each attention built once."""
import pytest
import torch

from hydra_dense.attention import AttentionPlan, PlannedAttention
from hydra_dense.backbones import VideoViT, ViT

PLANS = [
    "msa",
    {"default": "hydra", "local": "dwc7", "token_mean": True},
    {"window_size": 4, "global_blocks": [1, 3], "global_attention": "hydra", "rel_pos": True},
    {"default": "local", "local": "win4_shift"},
]


@pytest.fixture
def counted(monkeypatch):
    """How often a plan is resolved and an attention module is constructed."""
    counts = {"resolve": 0, "attention": 0}
    resolve, init = AttentionPlan.resolve, PlannedAttention.__init__

    def counting_resolve(self, depth):
        counts["resolve"] += 1
        return resolve(self, depth)

    def counting_init(self, *args, **kwargs):
        counts["attention"] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(AttentionPlan, "resolve", counting_resolve)
    monkeypatch.setattr(PlannedAttention, "__init__", counting_init)
    return counts


@pytest.mark.parametrize("plan", PLANS, ids=["msa", "hydra+mean+dwc7", "vitdet_hydra", "local+win4_shift"])
def test_building_a_vit_resolves_its_plan_once_and_builds_each_attention_once(counted, plan):
    model = ViT("tiny", depth=4, plan=plan)
    assert counted == {"resolve": 1, "attention": 4}
    # what reports the plan reads the list kept at construction: no resolution after it
    labels, text, kinds = model.block_labels, model.describe_plan(), model.attention_kinds
    assert counted["resolve"] == 1
    expected = AttentionPlan.coerce(plan).per_block(4)  # resolved again here, by the test
    assert labels == [b.label for b in expected] and kinds == [b.kind for b in expected]
    assert [m.kind for m in (blk.attn for blk in model.blocks)] == kinds
    assert text == AttentionPlan.coerce(plan).describe(4)


@pytest.mark.parametrize("layout", ["joint", "divided"])
def test_building_a_video_vit_resolves_once_and_builds_each_attention_once(counted, layout):
    model = VideoViT("tiny", depth=2, num_frames=4, img_size=32, patch_size=8, layout=layout,
                     plan={"default": "hydra", "local": "dwc3"})
    per_block = 2 if layout == "divided" else 1  # divided: a temporal attention beside the spatial one
    assert counted == {"resolve": 1, "attention": 2 * per_block}
    grids = [[m.plan_arguments["grid_dims"] for m in blk.modules() if isinstance(m, PlannedAttention)]
             for blk in model.blocks]
    assert grids == ([[1, 2]] * 2 if layout == "divided" else [[3]] * 2)


def test_the_block_built_through_timms_seam_equals_the_swapped_one():
    """Built directly, a Hydra block holds what swapping MSA's module for it held: the same parameter
    names and shapes, its local branch zero at the start (the block starts as plain Hydra)."""
    plan = {"default": "hydra", "local": "dwc7", "token_mean": True}
    direct = ViT("tiny", depth=2, plan=plan)
    swapped = ViT("tiny", depth=2)
    swapped.set_plan(plan)
    assert {k: v.shape for k, v in direct.state_dict().items()} == {k: v.shape for k, v in swapped.state_dict().items()}
    for blk in direct.blocks:
        assert not blk.attn.local.conv.weight.any() and not blk.attn.local.conv.bias.any()
    swapped.load_state_dict(direct.state_dict())
    x = torch.randn(1, 3, 40, 56)
    torch.testing.assert_close(direct(x)[0], swapped(x)[0])


def test_a_plan_is_frozen():
    plan = AttentionPlan(default="hydra")
    with pytest.raises(AttributeError):
        plan.local = "dwc7"  # a changed plan is a new one: dataclasses.replace
