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
from hydra_dense.runtime import CheckpointMismatchError  # noqa: E402
from tests.tiny_runs import write_config  # noqa: E402


def _report(out):
    return json.loads(out.with_suffix(".json").read_text())


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
    assert main(["--config", str(config), "--size", "64x96", "--out", str(out)]) == 0
    report = _report(out)
    assert report["max_abs_error"]["64x96"] <= 1e-4 and report["outputs"] == ["logits"]


def test_detection_pyramid_exports_with_dynamic_size_and_a_torch_export_program(tmp_path):
    config = write_config("detection", tmp_path)
    out = tmp_path / "det.onnx"
    assert main(["--config", str(config), "--size", "64x64", "--dynamic", "--check-size", "96x128",
                 "--check-size", "32x48", "--program", "--out", str(out)]) == 0
    errors = _report(out)["max_abs_error"]
    assert set(errors) == {"64x64", "96x128", "32x48"} and max(errors.values()) <= 1e-4
    program = torch.export.load(str(out.with_suffix(".pt2")))
    from hydra_dense.deploy import export_wrapper
    from hydra_dense.deploy.__main__ import build_task

    pyramid = export_wrapper(build_task(str(config), None, [])).module
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        for got, want in zip(program.module()(x), pyramid(x)):
            assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)


def test_video_export_matches_pytorch(tmp_path):
    config = write_config("video", tmp_path)
    out = tmp_path / "video.onnx"
    assert main(["--config", str(config), "--size", "32x32", "--out", str(out)]) == 0
    report = _report(out)
    assert report["inputs"] == ["clips"] and report["max_abs_error"]["32x32"] <= 1e-4


def test_export_errors_name_what_is_wrong(tmp_path):
    config = write_config("segmentation", tmp_path)
    out = tmp_path / "seg.onnx"
    with pytest.raises(ValueError, match="height 60 is not a multiple of the patch size 4; use 60|width 62 .* use 64"):
        main(["--config", str(config), "--size", "64x62", "--out", str(out)])
    with pytest.raises(ValueError, match="--dynamic: the segmentation model's UPerNet head"):
        main(["--config", str(config), "--size", "64x64", "--dynamic", "--out", str(out)])
    from hydra_dense.deploy.__main__ import build_task

    other = tmp_path / "detection.ckpt"
    torch.save({"state_dict": build_task(str(write_config("detection", tmp_path)), None, []).state_dict()}, other)
    with pytest.raises(CheckpointMismatchError, match=f"--ckpt_path: {other} does not match the configured "
                                                      "SegmentationTask"):
        main(["--config", str(config), "--ckpt_path", str(other), "--size", "64x64", "--out", str(out)])
    assert not out.exists()
