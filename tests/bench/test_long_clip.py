"""tools/long_clip.py (hydra_dense.bench.long_clip): each step runs in its own process from a typed
request file, and its row says what the step measured or why it could not run."""
import csv
import json

from hydra_dense.bench.long_clip import ClipStep, main


def test_each_clip_step_is_timed_in_its_own_process_and_lands_in_the_table(tmp_path):
    out = tmp_path / "clips.csv"
    assert main(["--model", "video_vit_micro", "--plans", "hydra,msa", "--clips", "2x32x32", "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["attention"], r["status"]) for r in rows] == [("hydra", "ok"), ("msa", "ok")]
    assert all(float(r["seconds"]) > 0 and float(r["train_tflop"]) > 0 for r in rows)
    assert rows[0]["tokens"] == "4"  # 1 tubelet x 2 x 2 patches of 16


def test_a_step_request_with_a_key_it_does_not_take_is_refused_naming_the_file(tmp_path):
    import pytest

    request = tmp_path / "step.json"
    request.write_text(json.dumps(dict(model="video_vit_micro", plan="msa", patch=16, tubelet=2, checkpointing=True,
                                       frames=2, height=32, width=32, batch=4)))
    with pytest.raises(ValueError, match=f"{request}: not a long-clip step"):
        ClipStep.read(request)
