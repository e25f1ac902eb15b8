"""Every shipped backbone YAML instantiates from its class_path and builds the plan it names."""

import pytest
import torch
from jsonargparse import ArgumentParser

from hydra_dense.attention.plan_grammar import plan_from_name
from tests.helpers.tiny_runs import ROOT

BACKBONES = ROOT / "configs" / "backbones"
CONFIGS = sorted(BACKBONES.glob("*.yaml"))


def backbone_from(*args: str) -> torch.nn.Module:
    """The backbone the config parser builds from ``--backbone`` arguments (files and overrides), in order."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--backbone", type=torch.nn.Module, sub_configs=True)
    return parser.instantiate(parser.parse_args(list(args))).backbone


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_backbone_yaml_instantiates(path):
    model = backbone_from("--backbone", str(path))
    kinds = model.attention_kinds
    stem = path.stem
    if stem.endswith("_msa") and "window" not in stem:
        assert set(kinds) == {"msa"}
    if stem.endswith("_hydra") and "window" not in stem:
        assert set(kinds) == {"hydra"}
    if "hybrid" in stem:
        assert kinds[-1] == "hydra" and kinds[0] == "msa"
    if "window" in stem:  # ..._window<W>_<global attention>[_mean], or ..._window<W>_only: no global block
        window, global_attention = stem.split("window")[1].split("_")[:2]
        if global_attention == "only":
            assert kinds == ["window"] * len(kinds)
        else:
            assert kinds.count("window") == 8 and kinds[2] == global_attention
        assert model.plan.token_mean == stem.endswith("_mean")
        assert not window or model.plan.window_size == int(window)
    if stem.endswith("_hydra_mean_dwc7"):
        assert model.plan.block_labels(len(kinds)) == ["hydra+mean+dwc7"] * len(kinds)
    if stem.endswith("_local_dwc7"):
        assert model.plan.block_labels(len(kinds)) == ["local+dwc7"] * len(kinds)


def test_every_backbone_config_is_named_for_the_plan_it_is_checked_against():
    """The check above reads the plan from the file name: a config named otherwise would go unchecked."""
    unnamed = [p.name for p in CONFIGS if not (p.stem.endswith(("_msa", "_hydra", "_hydra_mean_dwc7", "_local_dwc7"))
                                                or "hybrid" in p.stem or "window" in p.stem)]
    assert CONFIGS and not unnamed


@pytest.mark.parametrize("stem, plan_name", [("vit_s14_dinov2_window8_msa", "vitdet8_msa"),
                                             ("vit_s14_dinov2_window8_hydra_mean", "vitdet8_hydra+mean"),
                                             ("vit_s14_dinov2_window8_only", "vitdet8_windows")])
def test_the_context_tracks_vitdet_configs_ship_the_plans_the_comparison_measured(stem, plan_name):
    """The README recommends these files for scene context: each must build what the context tracks ran."""
    model = backbone_from("--backbone", str(BACKBONES / f"{stem}.yaml"))
    assert model.plan == plan_from_name(plan_name, depth=12)


@pytest.mark.parametrize("first, then, plan_name", [("vit_s14_dinov2_hydra_mean_dwc7", "vit_s14_dinov2_msa", "msa"),
                                                    ("vit_s14_dinov2_hydra_mean_dwc7", "vit_s14_dinov2_window8_hydra_mean",
                                                     "vitdet8_hydra+mean")])
def test_a_backbone_file_given_over_another_replaces_its_whole_plan(first, then, plan_name):
    """Swapping the backbone by one override (a task config names one file, the command line another):
    no key of the first file's plan (its local branch, kv averaging) may survive into the second's."""
    model = backbone_from("--backbone", str(BACKBONES / f"{first}.yaml"), "--backbone", str(BACKBONES / f"{then}.yaml"))
    assert model.plan == plan_from_name(plan_name, depth=12)


def test_override_from_command_line():
    model = backbone_from("--backbone", str(BACKBONES / "vit_s16_msa.yaml"), "--backbone.init_args.depth", "2",
                          "--backbone.init_args.plan", "hydra", "--backbone.init_args.out_indices", "[1]")
    assert model.attention_kinds == ["hydra", "hydra"]
