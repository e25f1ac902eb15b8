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


def test_the_key_follows_the_config_content_not_its_comments_layout_or_key_order(tmp_path):
    config = tmp_path / "task.yaml"
    config.write_text("model:\n  lr: 0.1\n  depth: 2\ntrainer: {max_steps: 3}\n")
    key = RunRequest(recipe="msa", seed=0, config=str(config)).identity()
    config.write_text("# fine-tuned from DINOv2\ntrainer:\n  max_steps: 3   # short\nmodel: {depth: 2, lr: 0.1}\n")
    assert RunRequest(recipe="msa", seed=0, config=str(config)).identity() == key
    config.write_text("model:\n  lr: 0.2\n  depth: 2\ntrainer: {max_steps: 3}\n")
    assert RunRequest(recipe="msa", seed=0, config=str(config)).identity() != key


def test_a_run_stored_under_the_key_of_its_configs_raw_text_is_still_this_request(tmp_path):
    """Runs kept on disk may carry the key made from the config's raw text: sha1 of the sorted JSON of
    the request with ``config`` set to that text and ``out``, ``key``, ``save_weights`` nulled."""
    import hashlib

    config = tmp_path / "task.yaml"
    config.write_text("model:\n  lr: 0.1   # as tuned\n")
    req = RunRequest(recipe="msa", seed=0, config=str(config), overrides=["--trainer.max_steps=3"])
    fields = dict(req.as_json(), config=config.read_text(), out=None, key=None, save_weights=None)
    fields.pop("eval_sizes")
    stored = hashlib.sha1(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    assert stored != req.identity()
    assert req.is_key(stored) and req.is_key(req.identity())
    other = RunRequest(recipe="msa", seed=1, config=str(config), overrides=["--trainer.max_steps=3"])
    assert not other.is_key(stored) and not req.is_key(None)
