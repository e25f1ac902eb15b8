"""tools/export.py: ONNX of the three tasks, checked in onnxruntime against PyTorch (fp32, 1e-4),
the detection pyramid at sizes other than the traced one, the torch.export program, the eager
attention path under export, and the errors for bad input."""
from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("onnxruntime", reason="the export extra: pip install -e .[export]")
pytest.importorskip("onnxscript", reason="the export extra: pip install -e .[export]")

import onnx  # noqa: E402

from hydra_dense.attention import ops  # noqa: E402
from hydra_dense.deploy.__main__ import main  # noqa: E402
from hydra_dense.checkpoints import CheckpointMismatchError  # noqa: E402
from tests.helpers.tiny_runs import write_config  # noqa: E402


def _report(out):
    return json.loads(out.with_suffix(".json").read_text())


@pytest.mark.slow  # in-process, but among the heaviest: out of the fast loop
def test_segmentation_export_matches_pytorch_and_holds_no_compiled_kernels(tmp_path, monkeypatch):
    from hydra_dense.deploy import example_inputs, export_onnx, export_wrapper
    from hydra_dense.deploy.__main__ import build_task

    config = write_config("segmentation", tmp_path)  # all-Hydra backbone
    monkeypatch.setenv("HYDRA_DENSE_FUSED", "1")
    monkeypatch.setattr(ops, "FUSED_MIN_NUMEL", 0)  # auto would pick the compiled path at any size
    monkeypatch.setattr(ops, "_compiled", {})
    spec = export_wrapper(build_task(str(config), None, []))
    out = export_onnx(spec, example_inputs(spec, 64, 96), tmp_path / "direct.onnx")
    assert ops._compiled == {}, "export must trace the eager op, not compile it"
    model = onnx.load(str(out))
    assert {n.domain for n in model.graph.node} <= {"", "ai.onnx"}  # standard ONNX ops only
    dims = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert dims == [1, 4, 64, 96]

    out = tmp_path / "seg.onnx"
    assert main(["--allow-untrained", "--config", str(config), "--size", "64x96", "--out", str(out)]) == 0
    report = _report(out)
    assert report["max_abs_error"]["64x96"] <= 1e-4 and report["outputs"] == ["logits"]


NO_ANTIALIAS = "--model.init_args.backbone.init_args.pos_embed_antialias=false"


@pytest.mark.slow  # in-process, but among the heaviest: out of the fast loop
def test_detection_pyramid_exports_with_dynamic_size_and_a_torch_export_program(tmp_path):
    config = write_config("detection", tmp_path)
    out = tmp_path / "det.onnx"
    assert main(["--allow-untrained", "--config", str(config), "--size", "64x64", "--dynamic", "--check-size", "96x128",
                 "--check-size", "32x48", "--program", "--out", str(out), NO_ANTIALIAS]) == 0
    report = _report(out)
    assert report["inputs"] == ["images", "pad_mask"]
    errors = report["max_abs_error"]  # each checked on a batch of a whole and a padded image
    assert set(errors) == {"64x64", "96x128", "32x48"} and max(errors.values()) <= 1e-4
    program = torch.export.load(str(out.with_suffix(".pt2")))
    from hydra_dense.deploy import export_wrapper
    from hydra_dense.deploy.__main__ import build_task

    pyramid = export_wrapper(build_task(str(config), None, [NO_ANTIALIAS])).module
    x, mask = torch.randn(3, 3, 96, 128), torch.zeros(3, 96, 128, dtype=torch.bool)
    mask[2, 50:], mask[2, :, 90:] = True, True
    with torch.no_grad():
        for got, want in zip(program.module()(x, mask), pyramid(x, mask)):
            assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)

    # padding preserved in onnxruntime: an image padded inside a batch has, in its valid region,
    # the features it has alone (the reference: the same graph on the image at its own size)
    import onnxruntime as ort

    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    # (sizes: multiples of the coarsest stride, 64, so that every level's cells hold only valid pixels)
    alone = torch.randn(1, 3, 64, 64)
    batch = torch.randn(2, 3, 128, 192)
    batch[1] = 0
    batch[1, :, :64, :64] = alone[0]
    pad = torch.ones(2, 128, 192, dtype=torch.bool)
    pad[0], pad[1, :64, :64] = False, False
    run = lambda images, m: session.run(None, {"images": images.numpy(), "pad_mask": m.numpy()})  # noqa: E731
    levels_alone = run(alone, torch.zeros(1, 64, 64, dtype=torch.bool))
    for level_alone, level_batch in zip(levels_alone, run(batch, pad)):
        h, w = level_alone.shape[-2:]
        torch.testing.assert_close(torch.from_numpy(level_batch[1, :, :h, :w]), torch.from_numpy(level_alone[0]),
                                   atol=1e-4, rtol=1e-4)
    # without the mask the padding leaks into the image's features: the check above can fail
    unmasked = run(batch, torch.zeros(2, 128, 192, dtype=torch.bool))[0]
    h, w = levels_alone[0].shape[-2:]
    assert not torch.allclose(torch.from_numpy(unmasked[1, :, :h, :w]), torch.from_numpy(levels_alone[0][0]), atol=1e-3)


def test_detection_export_without_a_mask_where_positions_antialias(tmp_path):
    """timm's antialiased resampling has no traced form: the pyramid exports images only, and says so."""
    from hydra_dense.deploy import export_wrapper
    from hydra_dense.deploy.__main__ import build_task

    spec = export_wrapper(build_task(str(write_config("detection", tmp_path)), None,
                                     ["--model.init_args.backbone.init_args.pos_embed_antialias=true"]))
    assert spec.input_names == ["images"] and any("pos_embed_antialias: true" in n for n in spec.notes)


def test_video_export_matches_pytorch(tmp_path):
    config = write_config("video", tmp_path)
    out = tmp_path / "video.onnx"
    assert main(["--allow-untrained", "--config", str(config), "--size", "32x32", "--out", str(out)]) == 0
    report = _report(out)
    assert report["inputs"] == ["clips"] and report["max_abs_error"]["32x32"] <= 1e-4


def test_export_errors_name_what_is_wrong(tmp_path):
    config = write_config("segmentation", tmp_path)
    out = tmp_path / "seg.onnx"
    with pytest.raises(ValueError, match="height 60 is not a multiple of the patch size 4; use 60|width 62 .* use 64"):
        main(["--allow-untrained", "--config", str(config), "--size", "64x62", "--out", str(out)])
    with pytest.raises(ValueError, match="--dynamic: the segmentation model's UPerNet head"):
        main(["--allow-untrained", "--config", str(config), "--size", "64x64", "--dynamic", "--out", str(out)])
    from hydra_dense.deploy.__main__ import build_task

    other = tmp_path / "detection.ckpt"
    torch.save({"state_dict": build_task(str(write_config("detection", tmp_path)), None, []).state_dict()}, other)
    with pytest.raises(CheckpointMismatchError, match=f"--ckpt_path: {other} does not match the configured "
                                                      "SegmentationTask"):
        main(["--config", str(config), "--ckpt_path", str(other), "--size", "64x64", "--out", str(out)])
    assert not out.exists()


def test_export_without_the_export_extra_names_the_extra(monkeypatch, capsys):
    import importlib.util

    from hydra_dense.deploy.__main__ import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else real(name, *a))
    with pytest.raises(SystemExit):
        main(["--allow-untrained", "--config", "configs/segmentation/demo_digits.yaml", "--size", "112x112", "--out", "m.onnx"])
    assert 'exporting needs onnxscript, from the export extra: pip install -e ".[export]"' in capsys.readouterr().err


def test_an_export_without_weights_or_with_an_out_that_is_not_onnx_is_refused_before_anything_runs(tmp_path, capsys):
    """No untrained model is exported unasked, and --out never replaces a file it does not name."""
    config = write_config("segmentation", tmp_path)
    notes = tmp_path / "notes.json"
    notes.write_text("mine")
    for args, words in (([], "no --ckpt_path: the export would hold the config's untrained weights"),
                        (["--allow-untrained", "--out", str(tmp_path / "notes.txt")], "name the model file with .onnx"),
                        (["--allow-untrained", "--out", str(tmp_path / "model.json")], "name the model file with .onnx"),
                        (["--allow-untrained", "--size", "0x0"], "expected a positive HxW")):
        argv = ["--config", str(config), "--size", "64x64", "--out", str(tmp_path / "m.onnx"), *args]
        with pytest.raises(SystemExit):
            main(argv)
        assert words in capsys.readouterr().err
    assert notes.read_text() == "mine" and not (tmp_path / "m.onnx").exists()
