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
import time

from hydra_dense.bench.backbone import BenchSettings, count_backbone_flops
from hydra_dense.bench.input_sizes import InputSize, parse_size
from hydra_dense.tables import markdown_table, write_csv

CHILD = r"""
import json, sys, time, torch
from hydra_dense.bench.models import build_backbone
from hydra_dense.bench.memory import peak_memory_mb
torch.manual_seed(0)
m = build_backbone({model!r}, {plan!r}, {patch}, {tubelet}, grad_checkpointing={ckpt})
x = torch.randn(1, 3, {frames}, {height}, {width})
opt = torch.optim.AdamW(m.parameters(), lr=1e-6)
def step():
    m.train(); loss = m(x).float().square().mean(); loss.backward(); opt.step()
t0 = time.perf_counter()
peak = peak_memory_mb(step, torch.device("cpu"))
dt = time.perf_counter() - t0
print("RESULT " + json.dumps(dict(seconds=dt, peak_mem_mb=peak)))
"""


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
    p.add_argument("--csv")
    args = p.parse_args(argv)
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
            code = CHILD.format(model=args.model, plan=plan,
                                patch=args.patch_size, tubelet=args.tubelet_size, ckpt=not args.no_checkpointing,
                                frames=size.frames, height=size.height, width=size.width)
            print(f"{plan} {clip} ({tokens:,} tokens, {gflops / 1e3:.1f} TFLOP per step) ...", file=sys.stderr, flush=True)
            t0 = time.time()
            row = dict(model=args.model, attention=plan, clip=str(size), tokens=tokens, train_tflop=gflops / 1e3,
                       seconds=float("nan"), peak_mem_mb=float("nan"), status="")
            try:
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      timeout=args.timeout, env=dict(os.environ))
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

