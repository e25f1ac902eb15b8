"""Long clips: the largest clip a ViT-B training step fits with MSA and with Hydra, on this machine.

Each (plan, clip) runs one training step (forward, backward, AdamW step; gradient checkpointing
on by default) in a fresh process, which reports the step time and the process's peak memory
above its start. A step that runs out of memory or past ``--timeout`` is reported as such, with
its FLOP count, so the table says why it could not run.

    python tools/long_clip.py                                   # 16x224², 32x224², 64x448² (25,088 tokens)
    python tools/long_clip.py --clips 16x224x224,64x448x448 --plans msa,hydra --timeout 900
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from hydra_dense.bench.backbone import BenchSettings, count_backbone_flops
from hydra_dense.bench.input_sizes import InputSize, parse_size
from hydra_dense.bench.memory import peak_memory_mb
from hydra_dense.bench.models import build_backbone
from hydra_dense.runtime.request_file import request_fields
from hydra_dense.runtime.shipped import job_command, job_environment
from hydra_dense.tables import markdown_table, write_csv

@dataclass(frozen=True)
class ClipStep:
    """One training step to time in a fresh process: the backbone (``model``, ``plan``, patch and
    tubelet sizes, gradient checkpointing) and the clip (``frames`` x ``height`` x ``width``, batch 1)."""

    model: str
    plan: str
    patch: int
    tubelet: int
    checkpointing: bool
    frames: int
    height: int
    width: int

    @classmethod
    def read(cls, path: Path) -> "ClipStep":
        return cls(**request_fields(cls, path, "long-clip step"))


def time_one_step(step: ClipStep) -> dict:
    """``{seconds, peak_mem_mb}`` of one forward, backward and AdamW step on a random clip."""
    torch.manual_seed(0)
    model = build_backbone(step.model, step.plan, step.patch, step.tubelet, grad_checkpointing=step.checkpointing)
    clip = torch.randn(1, 3, step.frames, step.height, step.width)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def train_step() -> None:
        model.train()
        model(clip).float().square().mean().backward()
        opt.step()

    t0 = time.perf_counter()
    peak = peak_memory_mb(train_step, torch.device("cpu"))
    return dict(seconds=time.perf_counter() - t0, peak_mem_mb=peak)


def _run_step(step: ClipStep, timeout: float) -> subprocess.CompletedProcess:
    """:func:`time_one_step` in a fresh process (its peak memory is its own), reading ``step`` from a file."""
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / "step.json"
        request.write_text(json.dumps(asdict(step)))
        return subprocess.run(job_command(sys.modules[__name__], "--step", str(request)), capture_output=True,
                              text=True, timeout=timeout, env=job_environment())


def flops_of(model: str, plan: str, frames: int, h: int, w: int, patch: int, tubelet: int) -> float:
    s = BenchSettings(model=model, patch_size=patch, tubelet_size=tubelet, mode="train")
    return count_backbone_flops(model, plan, InputSize(h, w, frames), s)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="video_vit_base")
    p.add_argument("--plans", default="hydra,msa")
    p.add_argument("--clips", default="16x224x224,32x224x224,64x448x448", help="FxHxW list")
    p.add_argument("--patch-size", type=int, default=16)
    p.add_argument("--tubelet-size", type=int, default=2)
    p.add_argument("--no-checkpointing", action="store_true")
    p.add_argument("--timeout", type=float, default=600, help="seconds per step before giving up")
    p.add_argument("--step", help=argparse.SUPPRESS)  # the child process: time the step in this file
    p.add_argument("--csv")
    args = p.parse_args(argv)
    if args.step:
        print("RESULT " + json.dumps(time_one_step(ClipStep.read(Path(args.step)))), flush=True)
        return 0
    rows = []
    for clip in args.clips.split(","):
        size = parse_size(clip)
        if size.frames is None:
            print(f"error: clip {clip!r} must be FxHxW", file=sys.stderr)
            return 2
        for plan in args.plans.split(","):
            tokens = (-(-size.frames // args.tubelet_size)) * (-(-size.height // args.patch_size)) * \
                (-(-size.width // args.patch_size))
            gflops = flops_of(args.model, plan, size.frames, size.height, size.width, args.patch_size,
                              args.tubelet_size) / 1e9
            step = ClipStep(args.model, plan, args.patch_size, args.tubelet_size, not args.no_checkpointing,
                            size.frames, size.height, size.width)
            print(f"{plan} {clip} ({tokens:,} tokens, {gflops / 1e3:.1f} TFLOP per step) ...", file=sys.stderr, flush=True)
            t0 = time.time()
            row = dict(model=args.model, attention=plan, clip=str(size), tokens=tokens, train_tflop=gflops / 1e3,
                       seconds=float("nan"), peak_mem_mb=float("nan"), status="")
            try:
                proc = _run_step(step, args.timeout)
                line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
                if line:
                    row.update(json.loads(line[7:]))
                    row["status"] = "ok"
                else:
                    err = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
                    row["status"] = ("out of memory" if proc.returncode in (-9, 137) or "memory" in err[0].lower()
                                     else err[0][:100])
            except subprocess.TimeoutExpired:
                row["status"] = f"not finished within {args.timeout:.0f} s"
            row["wall_s"] = time.time() - t0
            rows.append(row)
    print(markdown_table(rows, ["model", "attention", "clip", "tokens", "train_tflop", "seconds", "peak_mem_mb",
                                "status"]))
    print(f"\n{os.cpu_count()} CPU cores; one training step, batch 1, gradient checkpointing "
          f"{'off' if args.no_checkpointing else 'on'}; peak_mem_mb = peak resident memory above the start "
          "of the step (fresh process); train_tflop counted with FlopCounterMode (SDPA on its math path).")
    if args.csv:
        write_csv(rows, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
