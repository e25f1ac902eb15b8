"""Speed, memory and FLOPs of MSA / Hydra / hybrid / ViTDet / no-mixing backbones, side by side.

Examples (CPU numbers are noisy in absolute terms; compare ratios from one run):

    python tools/benchmark.py --quick --csv out.csv                   # < 2 min smoke run
    python tools/benchmark.py --model vit_base --sizes 224,512,1024,1080p --plans msa,hydra,none
    python tools/benchmark.py --model vit_base --sizes 1024 --mode train --dtype bf16
    python tools/benchmark.py --model video_vit_base --sizes 16x224x224 --plans msa,hydra
    python tools/benchmark.py --level op --op-shape 8x4096x768       # Hydra op vs q+k+v floor
    python tools/benchmark.py --level shares --sizes 224,384,512,1024,1080p   # attention FLOP share
    python tools/benchmark.py --level decode                          # video: whole file vs seeking decode
    python tools/benchmark.py --backend onnxruntime --sizes 1024,1080p --plans msa,hydra,none   # ONNX Runtime
    python tools/benchmark.py --model seg_uper:vit_base --sizes 512,1024 --mode train   # whole segmentation model
    python tools/benchmark.py --model det_mask_rcnn:vit_base --sizes 1024 --mode train \
        --plans msa,hydra,vitdet_msa,vitdet_hydra                      # whole Mask R-CNN, one training step

Sizes are ``S``, ``HxW``, ``FxHxW`` (clips) or 1080p / 720p / 4k; a size that is not a multiple
of the patch is padded (the row says so). Plans: msa, hydra, none (no token mixing: the floor),
hybrid<L> (Hydra in the last L blocks), vitdet_msa / vitdet_hydra (14x14 windows, global blocks
every depth/4), linear<H>.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

import torch
from tqdm import tqdm

from hydra_dense.bench.decode import DECODE_COLUMNS, bench_decode, write_test_video
from hydra_dense.data.sources import cache_dir

from ..attention import plan_from_name
from ..tables import markdown_table, write_csv
from .attention_op import OP_COLUMNS, bench_hydra_op
from .backbone import ROW_COLUMNS, BenchSettings, attention_flop_shares, bench_backbones
from .models import MODELS, PIPELINES
from .detection import DETECTION_PIPELINES
from .input_sizes import parse_devices, parse_dtype, parse_size
from .plots import plot_backbone_rows

SHOW = ["backbone", "attention", "height", "width", "frames", "tokens", "batch", "mode", "dtype", "device",
        "ms_per_iter", "throughput", "peak_mem_mb", "gflops", "attn_flop_share", "speedup_vs_msa",
        "flop_ideal_vs_msa", "pct_of_ideal", "overhead_vs_none", "note"]
SHARE_SIZES = "224,384,512,1024,1080p"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--level", choices=["backbone", "op", "shares", "decode"], default="backbone")
    p.add_argument("--model", default="vit_base", help=f"a backbone ({', '.join(sorted(MODELS))}) or a whole task "
                   f"model ({', '.join(sorted(PIPELINES) + sorted(DETECTION_PIPELINES))}:<backbone>, "
                   f"e.g. seg_uper:vit_base, det_mask_rcnn:vit_base)")
    p.add_argument("--plans", default="msa,hydra,none")
    p.add_argument("--sizes", default="224,512,1024")
    p.add_argument("--patch-size", type=int, default=16)
    p.add_argument("--tubelet-size", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--backend", choices=["torch", "onnxruntime"], default="torch",
                   help="onnxruntime: export each backbone to ONNX and time it in onnxruntime (CPU, fp32, "
                   "inference) next to PyTorch, in one round-robin run")
    p.add_argument("--mode", choices=["infer", "train"], default="infer")
    p.add_argument("--dtype", default="fp32", help="fp32, bf16 or fp16 (autocast)")
    p.add_argument("--compile", action="store_true", help="torch.compile the whole backbone")
    p.add_argument("--grad-checkpointing", action="store_true")
    p.add_argument("--no-memory", action="store_true", help="skip peak-memory measurement (saves one step per plan)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, or a list such as cpu,cuda")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--op-shape", default="8x4096x768", help="BxTxD for --level op")
    p.add_argument("--op-backward", action="store_true", help="time forward + backward for --level op")
    p.add_argument("--op-msa", action="store_true", help="also time softmax SDPA (12 heads) for --level op")
    p.add_argument("--video", help="--level decode: a video file (default: a generated 10 s, 30 fps, 1280x720 "
                   "H.264 file, cached)")
    p.add_argument("--gop", type=int, help="--level decode: keyframe interval of the generated file (default: "
                   "x264's own, 250)")
    p.add_argument("--csv", help="write the rows as CSV")
    p.add_argument("--plot", help="write a PNG plot")
    p.add_argument("--quick", action="store_true", help="tiny backbone, small sizes: under 2 minutes on 2 CPU cores")
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.sizes, args.plans = "vit_micro", "64,128,192", "msa,hydra,none,hybrid2"
        args.warmup, args.repeats = 1, 3
    return args


def _checked(args: argparse.Namespace) -> tuple[list, Any, list, list[str]]:
    """``(devices, dtype, sizes, plans)`` of the command line, each checked (ValueError naming it)."""
    devices = parse_devices(args.device)
    dtype = parse_dtype(args.dtype)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    plans = [p.strip() for p in args.plans.split(",") if p.strip()]
    for plan in plans:
        plan_from_name(plan, 12)
    task, _, inner = args.model.partition(":")
    pipelines = sorted(PIPELINES) + sorted(DETECTION_PIPELINES)
    if args.model not in MODELS and not (task in pipelines and (inner or "vit_base") in MODELS):
        raise ValueError(f"unknown model {args.model!r}; choose from {', '.join(sorted(MODELS))} "
                         f"or {', '.join(pipelines)}:<backbone>")
    return devices, dtype, sizes, plans


def _op_level(args: argparse.Namespace, devices: list, dtype, t0: float) -> int:
    """The Hydra op alone at ``--op-shape`` (B x T x D), beside SDPA when asked."""
    B, T, D = (int(v) for v in args.op_shape.lower().split("x"))
    rows = []
    for dev in devices:
        rows += bench_hydra_op(B, T, D, dtype, dev, repeats=max(args.repeats, 10), warmup=args.warmup + 2,
                               backward=args.op_backward, msa_heads=12 if args.op_msa and D % 12 == 0 else 0)
    print(markdown_table(rows, OP_COLUMNS))
    if args.csv:
        write_csv(rows, args.csv, OP_COLUMNS)
    print(f"\n({time.time() - t0:.0f} s)")
    return 0


def _backbone_rows(args: argparse.Namespace, devices: list, dtype, sizes: list, plans: list[str]) -> list[dict]:
    """Every plan at every size on every device, one size at a time (a progress bar on a terminal)."""
    rows: list[dict] = []
    bar = tqdm(total=len(sizes) * len(devices), desc="benchmark", unit="size") \
        if not args.quick and sys.stderr.isatty() else None
    for dev in devices:
        settings = BenchSettings(model=args.model, plans=plans, sizes=sizes, patch_size=args.patch_size,
                                 tubelet_size=args.tubelet_size, batch=args.batch, mode=args.mode, dtype=dtype,
                                 compile=args.compile, device=dev, warmup=args.warmup, repeats=args.repeats,
                                 grad_checkpointing=args.grad_checkpointing, memory=not args.no_memory)
        for size in sizes:
            settings.sizes = [size]
            rows += bench_backbones(settings, progress=(bar.set_postfix_str if bar else
                                                        (lambda m: print(m, file=sys.stderr, flush=True))))
            if bar:
                bar.update(1)
    if bar:
        bar.close()
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        devices, dtype, sizes, plans = _checked(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"# hydra_dense benchmark  ({os.cpu_count()} CPU cores, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, devices {', '.join(map(str, devices))})\n")
    t0 = time.time()
    if args.level == "op":
        return _op_level(args, devices, dtype, t0)
    if args.level == "decode":
        return _decode_level(args, t0)
    if args.backend == "onnxruntime":
        return _onnxruntime_level(args, sizes, plans, t0)
    image_sizes = [s for s in sizes if s.frames is None]
    if args.level == "shares":
        shares = attention_flop_shares(args.model, image_sizes or [parse_size(s) for s in SHARE_SIZES.split(",")],
                                       args.patch_size)
        print(markdown_table(shares))
        if args.csv:
            write_csv(shares, args.csv)
        return 0
    rows = _backbone_rows(args, devices, dtype, sizes, plans)
    print(markdown_table(rows, SHOW))
    print("\nspeedup_vs_msa = MSA time / this time; flop_ideal_vs_msa = MSA FLOPs / these FLOPs "
          "(FlopCounterMode, SDPA counted on its math path; Hydra's elementwise work added by formula); "
          "pct_of_ideal = speedup / ideal; overhead_vs_none = this time / no-mixing time.")
    if args.csv:
        print(f"CSV: {write_csv(rows, args.csv, ROW_COLUMNS)}")
    if args.plot:
        shares = [] if args.model.startswith("video") or ":" in args.model else attention_flop_shares(
            args.model, [parse_size(s) for s in ("224,512" if args.quick else SHARE_SIZES).split(",")], args.patch_size)
        print(f"plot: {plot_backbone_rows(rows, shares, args.plot, f'{args.model}, {args.mode}, {args.dtype}, {devices[0]}')}")
    print(f"\n({time.time() - t0:.0f} s)")
    return 0


def _onnxruntime_level(args: argparse.Namespace, sizes, plans: list[str], t0: float) -> int:
    if args.level != "backbone" or args.mode != "infer" or args.dtype != "fp32" or args.device != "cpu":
        print("error: --backend onnxruntime times backbone inference in fp32 on the CPU (--level backbone "
              "--mode infer --dtype fp32 --device cpu)", file=sys.stderr)
        return 2
    if ":" in args.model or args.model.startswith("video") or any(s.frames for s in sizes):
        print("error: --backend onnxruntime times image backbones (vit_*), not pipelines or video", file=sys.stderr)
        return 2
    from hydra_dense.bench.onnxruntime_speed import ORT_COLUMNS, bench_onnxruntime

    rows = bench_onnxruntime(args.model, plans, sizes, batch=args.batch, patch_size=args.patch_size,
                             warmup=args.warmup, repeats=args.repeats,
                             progress=lambda m: print(m, file=sys.stderr, flush=True))
    return _print_rows(rows, ORT_COLUMNS, "*_speedup_vs_msa = that runtime's MSA time / this time; "
                       "ort_ratio_pct_of_torch = onnxruntime's speed-up as % of PyTorch's; max_abs_error = "
                       "|onnxruntime - PyTorch| on the timed input.", args.csv, t0)


def _decode_level(args: argparse.Namespace, t0: float) -> int:
    video = Path(args.video) if args.video else cache_dir() / "bench" / f"pan_10s_30fps_1280x720_gop{args.gop or 'x264'}.mp4"
    if args.video and not video.is_file():
        print(f"error: --video {video} does not exist", file=sys.stderr)
        return 2
    if not video.is_file():
        print(f"writing {video} ...", file=sys.stderr, flush=True)
        tmp = write_test_video(video.with_suffix(".part.mp4"), gop=args.gop)
        tmp.replace(video)
    rows = bench_decode(video, repeats=args.repeats, memory=not args.no_memory)
    print(f"{video} ({video.stat().st_size / 1e6:.1f} MB); clips of 16 frames x stride 4 at short side 256; "
          "eval: 5 clips x 3 crops\n")
    return _print_rows(rows, DECODE_COLUMNS, "speedup_vs_whole = whole-file time / this time; memory_vs_whole = "
                       "whole-file peak / this peak (resident-set rise of a fresh process over one sample).",
                       args.csv, t0)


def _print_rows(rows: list[dict], columns: list[str], legend: str, csv_path: Optional[str], t0: float) -> int:
    """The rows as a Markdown table, the legend under it, the CSV if asked for, the elapsed time."""
    print(markdown_table(rows, columns))
    print("\n" + legend)
    if csv_path:
        print(f"CSV: {write_csv(rows, csv_path, columns)}")
    print(f"\n({time.time() - t0:.0f} s)")
    return 0

