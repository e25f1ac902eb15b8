"""The command line's refusals of a bad value: one line naming the config file or option that gave
it, under a one-line usage (jsonargparse would print every option and a union-type dump)."""
import pytest
import yaml

from hydra_dense import cli
from tests.helpers.tiny_runs import seg_config


@pytest.fixture()
def config(tmp_path):
    path = tmp_path / "seg.yaml"
    path.write_text(yaml.safe_dump(seg_config(tmp_path / "data", steps=2)))
    return path


def refusal(capsys, args):
    with pytest.raises(SystemExit) as stop:
        cli.main(["fit", *map(str, args)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) <= 3, lines
    return lines[-1]


def test_a_bad_value_in_a_config_file_names_the_file_and_key(capsys, config, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer:\n  max_steps: four\n")
    line = refusal(capsys, ["--config", config, "--config", bad])
    assert line.startswith(f"error: {bad}: trainer.max_steps:") and "four" in line


def test_a_bad_value_on_the_command_line_names_the_option(capsys, config):
    line = refusal(capsys, ["--config", config, "--model.init_args.lr=abc"])
    assert line.startswith("error: --model.init_args.lr:") and "abc" in line and "Union" not in line


def test_an_unknown_option_of_a_class_names_the_class_and_the_file(capsys, config, tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("model:\n  init_args:\n    nonsense: 3\n")
    line = refusal(capsys, ["--config", config, "--config", extra])
    assert line == f"error: {extra}: model.init_args.nonsense: hydra_dense.tasks.SegmentationTask takes no option 'nonsense'"


def test_help_still_lists_every_option(capsys):
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    assert "--trainer.max_steps" in capsys.readouterr().out


def test_a_misspelt_plan_key_inside_a_config_names_the_file_and_key_path(capsys, config, tmp_path):
    extra = tmp_path / "plan.yaml"
    extra.write_text("model:\n  init_args:\n    backbone:\n      init_args:\n        plan: {window_sise: 8}\n")
    line = refusal(capsys, ["--config", config, "--config", extra])
    assert line.startswith(f"error: {extra}: model.init_args.backbone.init_args.plan: unknown attention-plan keys "
                           "['window_sise']")


def test_a_misspelt_plan_key_given_as_an_option_names_the_option(capsys, config):
    line = refusal(capsys, ["--config", config, "--model.init_args.backbone.init_args.plan={window_sise: 8}"])
    assert line.startswith("error: --model.init_args.backbone.init_args.plan: unknown attention-plan keys "
                           "['window_sise']")
