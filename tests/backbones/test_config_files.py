"""Backbone YAML files checked before the config parser: depth from the file's own size, types named."""
import pytest

from hydra_dense.backbones.config_files import BackboneFileError, check_backbone_file, check_inline_plans
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


def test_a_plan_written_inside_a_config_is_named_by_its_file_and_key_path(tmp_path):
    config = tmp_path / "run.yaml"
    backbone = "model:\n  init_args:\n    backbone:\n      class_path: hydra_dense.backbones.ViT\n      init_args:\n"
    config.write_text(backbone + "        plan: {window_sise: 8}\n")
    with pytest.raises(BackboneFileError, match=rf"{config}: model.init_args.backbone.init_args.plan: unknown "
                                                r"attention-plan keys \['window_sise'\]"):
        check_inline_plans(["fit", "--config", str(config)])
    # its blocks are counted only where the same mapping sets the size: another config may set it
    config.write_text(backbone + "        plan: {hydra_last: 13}\n")
    check_inline_plans([f"--config={config}"])
    config.write_text(backbone + "        size: base\n        plan: {hydra_last: 13}\n")
    with pytest.raises(BackboneFileError, match=r"backbone.init_args.plan: .*hydra_last=13 must be in \[0, 12\]"):
        check_inline_plans(["-c", str(config)])


def test_a_plan_given_as_an_option_is_named_by_the_option():
    option = "--model.init_args.backbone.init_args.plan"
    with pytest.raises(BackboneFileError, match=rf"^{option}: unknown attention-plan keys \['window_sise'\]"):
        check_inline_plans(["fit", f"{option}={{window_sise: 8}}"])
    with pytest.raises(BackboneFileError, match=rf"^{option}: unknown attention 'hydra_nrom'"):
        check_inline_plans(["fit", option, "hydra_nrom"])
    # valid plans pass; their blocks are counted when the model is built
    check_inline_plans(["fit", f"{option}=hydra", f"{option}={{default: msa, hydra_last: 40}}"])
