"""Backbone inference in onnxruntime (CPU) next to PyTorch, timed round-robin in one run.

Each plan's backbone is exported once per size (fp32, batch as given, the dynamo exporter; the
attention ops trace their eager path), then every (plan, runtime) pair runs once per round, so
the speed ratios against MSA come from the same minutes for both runtimes.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from torch import nn

from .models import build_backbone, token_count
from .input_sizes import InputSize
from .timing import interleaved_medians

__all__ = ["ORT_COLUMNS", "bench_onnxruntime"]

ORT_COLUMNS = ["model", "plan", "size", "tokens", "torch_ms", "ort_ms", "torch_speedup_vs_msa",
               "ort_speedup_vs_msa", "ort_ratio_pct_of_torch", "max_abs_error"]


class _Features(nn.Module):
    """The backbone's last map as one tensor (ONNX outputs are tensors, not lists)."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        out = self.backbone(images)
        return out[-1] if isinstance(out, (list, tuple)) else out


def _session(module: nn.Module, x: torch.Tensor, path: Path, threads: int):
    import onnxruntime as ort

    with torch.no_grad():
        torch.onnx.export(module, (x,), input_names=["images"], output_names=["features"], dynamo=True,
                          external_data=True).save(str(path))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def bench_onnxruntime(model: str, plans: Sequence[str], sizes: Sequence[InputSize], batch: int = 1,
                      patch_size: int = 16, warmup: int = 1, repeats: int = 3, threads: Optional[int] = None,
                      progress: Optional[Callable[[str], None]] = None) -> list[dict]:
    """Rows per (size, plan): median ms in PyTorch (``inference_mode``) and onnxruntime, each
    runtime's speed-up against its own MSA, and the onnxruntime ratio as % of PyTorch's."""
    threads = threads or torch.get_num_threads()
    say = progress or (lambda m: None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="hydra_dense_ort_") as tmp:
        for size in sizes:
            fns, errors, tokens = {}, {}, {}
            for plan in plans:
                torch.manual_seed(0)
                module = _Features(build_backbone(model, plan, patch_size).eval())
                x = torch.randn(batch, 3, size.height, size.width)
                say(f"{size} {plan}: exporting")
                session = _session(module, x, Path(tmp) / f"{plan}_{size}.onnx", threads)
                feed = {"images": x.numpy()}
                with torch.inference_mode():
                    want = module(x).numpy()
                errors[plan] = float(np.abs(session.run(None, feed)[0] - want).max())
                tokens[plan] = token_count(module.backbone, size)

                def run_torch(m=module, x=x):
                    with torch.inference_mode():
                        m(x)

                fns[(plan, "torch")] = run_torch
                fns[(plan, "ort")] = lambda s=session, f=feed: s.run(None, f)
            say(f"{size}: timing {len(fns)} runs x {warmup + repeats}")
            medians = interleaved_medians(fns, warmup=warmup, repeats=repeats)
            msa = {rt: medians.get(("msa", rt)) for rt in ("torch", "ort")}
            for plan in plans:
                t, o = medians[(plan, "torch")], medians[(plan, "ort")]
                row = dict(model=model, plan=plan, size=str(size), tokens=tokens[plan], torch_ms=round(1e3 * t, 1),
                           ort_ms=round(1e3 * o, 1), max_abs_error=f"{errors[plan]:.1e}")
                if msa["torch"] and msa["ort"]:
                    sp_t, sp_o = msa["torch"] / t, msa["ort"] / o
                    row.update(torch_speedup_vs_msa=round(sp_t, 2), ort_speedup_vs_msa=round(sp_o, 2),
                               ort_ratio_pct_of_torch=round(100 * sp_o / sp_t, 1))
                rows.append(row)
    return rows
