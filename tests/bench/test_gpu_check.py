"""tools/gpu_check.py: its pass/fail checks catch wrong kernels, and its dry run exercises every section."""
import subprocess
import sys

import pytest
import torch

from hydra_dense.attention import hydra_attention_eager
from hydra_dense.bench.kernel_check import check_kernel_numerics, relative_error
from tests.helpers.tiny_runs import ROOT

SHAPES = ((2, 19, 8),)


def test_a_correct_kernel_passes_and_the_error_is_measured_against_fp64():
    rows = check_kernel_numerics(SHAPES, ("fp32", "bf16"), torch.device("cpu"), fused=hydra_attention_eager)
    assert len(rows) == 2 * 2 * 4  # dtypes x (no mask, mask) x (out, dq, dk, dv)
    assert all(r["passed"] for r in rows)
    bf16 = [r["fused_err"] for r in rows if r["dtype"] == "bf16"]
    assert all(0 < e < 1e-2 for e in bf16)  # rounding to bf16 is measured, not hidden


def test_a_slightly_wrong_kernel_fails():
    wrong = lambda q, k, v, m: hydra_attention_eager(q, k, v, m) * 1.001  # noqa: E731
    rows = check_kernel_numerics(SHAPES, ("fp32",), torch.device("cpu"), fused=wrong)
    assert not any(r["passed"] for r in rows if r["tensor"] == "out")


def test_a_kernel_that_leaks_padding_fails():
    def leaky(q, k, v, mask):
        return hydra_attention_eager(q, k, v, None)  # ignores the mask

    rows = check_kernel_numerics(SHAPES, ("fp32",), torch.device("cpu"), fused=leaky)
    masked = [r for r in rows if r["mask"]]
    assert masked and not any(r["passed"] for r in masked)
    assert all("padded tokens not exactly zero" in r["note"] for r in masked)


def test_relative_error_is_scaled_by_the_reference():
    ref = torch.tensor([2.0, -4.0])
    assert relative_error(torch.tensor([2.0, -3.0]), ref) == pytest.approx(0.25)


@pytest.mark.slow
def test_dry_run_runs_every_section_and_passes(tmp_path):
    pytest.importorskip("triton", reason="the dry run runs the Triton kernels in Triton's interpreter")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--dry-run", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = (tmp_path / "report.md").read_text()
    for heading in ("## numerics — passed", "## bandwidth", "## speed", "## training — passed", "**Overall: PASSED**"):
        assert heading in report
    for task in ("segmentation", "detection", "video"):
        assert f"| {task} | configs/cluster/cpu_gloo.yaml | gloo |" in report
    assert "| hydra | 64 | 64 |" in report and "| forward + backward |" in report


def test_an_unknown_section_is_named():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--dry-run", "--sections", "numerics,speeed"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "speeed" in proc.stderr
