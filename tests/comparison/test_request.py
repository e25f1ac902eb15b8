"""RunRequest: the one object a comparison run is built from, its key and its overrides."""
import json

from hydra_dense.comparison.request import RunRequest


def test_a_teacher_is_a_field_whose_override_parses_back_to_it(tmp_path):
    config = tmp_path / "task.yaml"
    config.write_text("model: {}\n")
    teacher = str(tmp_path / 'odd "name".ckpt')
    req = RunRequest(recipe="hydra@distilled", seed=1, config=str(config), distill_teacher=teacher)
    [override] = [o for o in req.cli_overrides(uses_pretrained=False) if o.startswith("--model.init_args.distill=")]
    assert json.loads(override.split("=", 1)[1]) == {"teacher": teacher}
    assert RunRequest.from_json(json.loads(json.dumps(req.as_json()))) == req


def test_a_run_without_a_teacher_keeps_the_key_it_had_before_the_field(tmp_path):
    """Finished runs are reused by key: a field left unset must not change it."""
    config = tmp_path / "task.yaml"
    config.write_text("model: {}\n")
    req = RunRequest(recipe="msa", seed=0, config=str(config))
    assert "distill_teacher" not in req.as_json() and "head_from" not in req.as_json()
    assert not [o for o in req.cli_overrides(uses_pretrained=False) if "distill" in o]
