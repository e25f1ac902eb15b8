"""Each shipped demo's default rows, read from one table."""
from hydra_dense.attention.plan_grammar import plan_from_name
from hydra_dense.comparison.command import parse_args
from hydra_dense.comparison.demo_defaults import CONTEXT_CONFIGS, CONTEXT_PLANS, DEMO_DEFAULTS


def test_a_context_track_brings_every_row_that_says_who_carries_the_cue():
    for config in CONTEXT_CONFIGS:
        assert parse_args(["--config", config])[0].plans == CONTEXT_PLANS
    rows = CONTEXT_PLANS.split(",")
    # MSA, the recipe, its local branch alone, ViTDet with MSA / Hydra (also converted) global blocks and without any
    assert rows[0] == "msa" and {"hydra+mean+dwc7@converted", "local+dwc7@converted", "vitdet8_msa",
                                 "vitdet8_hydra+mean", "vitdet8_hydra+mean@converted", "vitdet8_windows"} <= set(rows)


def test_the_windows_only_control_has_no_global_block():
    assert plan_from_name("vitdet8_windows", 12).resolve(12) == ["window"] * 12
    assert plan_from_name("vitdet8_msa", 12).resolve(12).count("window") == 8


def test_every_demo_in_the_table_is_a_shipped_config():
    from hydra_dense.runtime.shipped import find_shipped

    assert all(find_shipped(config) is not None for config in DEMO_DEFAULTS)


def test_a_context_set_of_its_own_gets_the_context_rows_from_its_data(tmp_path):
    """A user's (or a held-out) context config is no shipped demo: its data shipping each pixel's
    distance to the cue is what makes it a context set, so it gets the rows that read the answer."""
    import yaml

    from hydra_dense.comparison.demo_defaults import CONVERTIBLE_PLANS
    from hydra_dense.runtime.shipped import find_shipped

    config = yaml.safe_load(find_shipped(CONTEXT_CONFIGS[0]).read_text())
    config["model"]["init_args"]["backbone"] = str(find_shipped("configs/backbones/vit_s14_dinov2_msa.yaml"))
    context, plain = tmp_path / "held_out_context", tmp_path / "plain_scenes"
    (context / "cue_distance" / "validation").mkdir(parents=True)
    plain.mkdir()
    config["data"]["init_args"]["root"] = str(context)
    own = tmp_path / "my_context.yaml"
    own.write_text(yaml.safe_dump(config))
    assert parse_args(["--config", str(own)])[0].plans == CONTEXT_PLANS
    assert parse_args(["--config", str(own), f"--data.init_args.root={plain}"])[0].plans == CONVERTIBLE_PLANS
    assert parse_args(["--config", str(own), "--pretrained", "none"])[0].plans != CONTEXT_PLANS
