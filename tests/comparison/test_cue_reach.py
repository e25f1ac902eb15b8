import math

import numpy as np
import pytest
import torch

from hydra_dense.attention import plan_from_name
from hydra_dense.backbones import ViT
from hydra_dense.comparison.cue_reach import LOCAL_REACH_PER_BLOCK, cue_reach, main, scene_pairs, token_groups
from hydra_dense.data.demo_context import CUE_SIDE

SIZE = 168  # 12x12 tokens of 14 px


@pytest.fixture(scope="module")
def pairs():
    return scene_pairs(2, SIZE)


def test_a_pair_differs_only_where_the_cue_lies(pairs):
    for with_cue, without, labels, dist in pairs:
        changed = (with_cue != without).any(-1)
        assert not changed[dist > 0].any()  # nothing outside the cue's box moved
        assert changed[dist == 0].mean() > 0.9 and (dist == 0).sum() == CUE_SIDE * CUE_SIDE
        assert set(np.unique(labels)) <= {0, 2} and (labels == 2).any()  # every digit is cued


def test_token_groups_take_a_tokens_digit_pixels_and_nearest_distance():
    labels = np.zeros((28, 28), np.uint8)
    labels[3, 20] = 2
    dist = np.arange(28 * 28, dtype=np.uint8).reshape(28, 28) % 5
    digit, token_dist = token_groups(labels, dist, patch=14)
    assert digit.tolist() == [[False, True], [False, False]]
    assert token_dist.tolist() == [[0, 0], [0, 0]]
    assert token_groups(labels, np.full((28, 28), 7, np.uint8), patch=14)[1].tolist() == [[7, 7], [7, 7]]


def _backbone(plan: str) -> ViT:
    torch.manual_seed(0)
    backbone = ViT(None, embed_dim=32, depth=3, num_heads=2, patch_size=14, img_size=SIZE,
                   plan=plan_from_name(plan, 3), out_indices=[2])
    for block in backbone.blocks:  # a fresh local branch starts at zero (it learns, or is converted, from there)
        if getattr(block.attn, "local", None) is not None:
            torch.nn.init.normal_(block.attn.local.conv.weight, std=0.1)
    return backbone


def test_a_local_only_stack_leaves_tokens_beyond_its_reach_exactly_unchanged(pairs):
    rows = cue_reach(_backbone("local+dwc7"), pairs)
    assert [r["local_reach"] for r in rows] == [LOCAL_REACH_PER_BLOCK * (b + 1) for b in range(3)]
    measured = [r["beyond_local_reach"] for r in rows if not math.isnan(r["beyond_local_reach"])]
    assert measured and max(measured) < 1e-6
    assert rows[0]["near"] > 1e-3  # the cue does move the tokens it reaches


def test_attention_moves_tokens_beyond_local_reach_from_the_first_block(pairs):
    rows = cue_reach(_backbone("msa"), pairs)
    assert rows[0]["beyond_local_reach"] > 1e-3


def test_the_command_refuses_a_folder_that_is_no_finished_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--run", str(tmp_path)])
    assert "request.json does not exist" in capsys.readouterr().err
