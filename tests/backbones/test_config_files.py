"""Backbone YAML files checked before the config parser: depth from the file's own size, types named."""
import pytest

from hydra_dense.backbones.config_files import BackboneFileError, check_backbone_file
from hydra_dense.backbones.sizes import configured_depth


def _file(tmp_path, body: str):
    path = tmp_path / "backbone.yaml"
    path.write_text("class_path: hydra_dense.backbones.ViT\ninit_args:\n" + body)
    return path


def test_a_vit_large_plan_is_checked_against_its_24_blocks(tmp_path):
    check_backbone_file(_file(tmp_path, "  size: large\n  plan: {hydra_last: 16}\n"))
    check_backbone_file(_file(tmp_path, "  size: base\n  plan: {hydra_last: 12}\n"))
    with pytest.raises(BackboneFileError, match=r"init_args.plan: .*hydra_last=13 must be in \[0, 12\]"):
        check_backbone_file(_file(tmp_path, "  size: base\n  plan: {hydra_last: 13}\n"))
    with pytest.raises(BackboneFileError, match=r"hydra_last=25 must be in \[0, 24\]"):
        check_backbone_file(_file(tmp_path, "  size: large\n  plan: {hydra_last: 25}\n"))


@pytest.mark.parametrize("init_args, depth", [({}, 12), ({"size": "large"}, 24), ({"size": "tiny", "depth": 4}, 4),
                                              ({"size": None, "depth": 6, "embed_dim": 8, "num_heads": 2}, 6)])
def test_configured_depth_follows_the_size_preset_and_the_depth_given(init_args, depth):
    assert configured_depth(init_args) == depth
