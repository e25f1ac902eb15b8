"""Data-parallel scaling: measured throughput with 1..N processes, and the gradient all-reduce cost
of the shipped ViT-B recipes on GPU clusters, on paper.

Measured: each process count runs ``tools/train.py fit`` on the same config (per-process batch as
in the config, so the global batch grows with the processes: DDP's usual weak scaling), with the
trainer settings of ``configs/cluster/<cluster>.yaml``; only training batches are timed
(:class:`~hydra_dense.bench.throughput.TrainClock`), after warm-up. On CPUs the cores are split
evenly between the processes, so 1 and N processes use the same hardware.

On paper: DDP all-reduces every gradient once per optimizer step. With NCCL's ring, each GPU
sends and receives ``2 (N-1) / N x bytes``; nccl-tests report ``busbw`` normalised so that
``time = bytes x 2 (N-1) / N / busbw``. The default bandwidths are published nccl-tests
measurements for 8x A100 SXM nodes (see ``BUSBW_SOURCES``) - assumptions, not measured here.
DDP overlaps most of this with the backward pass (25 MB buckets), so it is an upper bound of what
communication can add to a step.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import lightning as L
import yaml
from jsonargparse import ArgumentParser
from torch import nn

from ..data.embedded import prepare_embedded_data
from ..runtime.atomic_file import atomic_write_text
from .. import cli
from ..runtime.shipped import job_command, job_environment, shipped_file
from ..tables import markdown_table, write_csv
from .throughput import TrainClock

__all__ = ["measure_scaling", "allreduce_seconds", "model_from_config", "comm_cost_rows", "BUSBW_SOURCES", "main"]

COMM_CONFIGS = ["configs/segmentation/ade20k_upernet_vit_b16.yaml", "configs/detection/coco_mask_rcnn_vitdet_b16.yaml",
                "configs/video/k400_vit_b16_joint_hydra.yaml"]

BUSBW_SOURCES = {
    "intra": (230.0, "8x A100 SXM, NVLink, one node: 232 GB/s all_reduce busbw "
                     "(https://github.com/NVIDIA/nccl-tests/issues/175)"),
    "inter": (85.0, "A100 nodes with 4x 200 Gb/s HDR InfiniBand: 85-96 GB/s all_reduce busbw across nodes "
                    "(https://github.com/NVIDIA/nccl-tests/issues/119, /issues/175)"),
}


def allreduce_seconds(nbytes: float, world: int, busbw_gb_s: float) -> float:
    """Ring all-reduce time of ``nbytes`` over ``world`` GPUs at nccl-tests ``busbw`` (GB/s)."""
    if world <= 1:
        return 0.0
    return nbytes * 2 * (world - 1) / world / (busbw_gb_s * 1e9)


def model_from_config(config: str | Path) -> nn.Module:
    """The ``model:`` of a task YAML (backbone file references resolved, no pretrained weights)."""
    config = Path(config)
    model = yaml.safe_load(config.read_text())["model"]
    backbone = model["init_args"].get("backbone")
    if isinstance(backbone, str):
        backbone = yaml.safe_load((config.parent / backbone).read_text())
    backbone["init_args"].pop("pretrained", None)
    model["init_args"]["backbone"] = backbone
    parser = ArgumentParser()
    parser.add_subclass_arguments(L.LightningModule, "model")
    return parser.instantiate_classes(parser.parse_object({"model": model})).model


def comm_cost_rows(configs: Sequence[str | Path], worlds: Sequence[int] = (8, 64), gpus_per_node: int = 8,
                   busbw_intra: float = BUSBW_SOURCES["intra"][0],
                   busbw_inter: float = BUSBW_SOURCES["inter"][0]) -> list[dict]:
    """Per config: trainable parameters, fp32 / bf16 gradient bytes, all-reduce ms per step at each
    world size (inside one node at ``busbw_intra``, across nodes at ``busbw_inter``)."""
    rows = []
    for cfg in configs:
        model = model_from_config(cfg)
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        row = dict(config=Path(cfg).name, params_m=params / 1e6, grad_mb_fp32=params * 4 / 1e6)
        for world in worlds:
            bw = busbw_intra if world <= gpus_per_node else busbw_inter
            row[f"allreduce_ms_{world}gpu_fp32"] = 1e3 * allreduce_seconds(params * 4, world, bw)
            row[f"allreduce_ms_{world}gpu_bf16"] = 1e3 * allreduce_seconds(params * 2, world, bw)
        rows.append(row)
        del model
    return rows


def _run_one(config: str, procs: int, cluster: str, steps: int, warmup: int, overrides: Sequence[str],
             threads: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "clock.json"
        clock = json.dumps({"class_path": f"{TrainClock.__module__}.{TrainClock.__qualname__}",
                            "init_args": {"skip": warmup, "out": str(out)}})
        cmd = job_command(cli, "fit", "--config", config,
               "--config", str(shipped_file(f"configs/cluster/{cluster}.yaml", "the cluster config")),
               f"--trainer.devices={procs}", f"--trainer.max_steps={steps + warmup}",
               "--trainer.limit_val_batches=0", "--trainer.num_sanity_val_steps=0", "--trainer.logger=false",
               "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
               f"--trainer.default_root_dir={tmp}", f"--trainer.callbacks+={clock}", *overrides)
        if procs == 1:
            cmd.append("--trainer.strategy=auto")  # the baseline without a process group
        env = dict(job_environment(), OMP_NUM_THREADS=str(threads))
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"{procs} process(es) failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        return json.loads(out.read_text())


def measure_scaling(config: str, procs: Sequence[int] = (1, 2), cluster: str = "cpu_gloo", steps: int = 20,
                    warmup: int = 3, overrides: Sequence[str] = (), cores: Optional[int] = None,
                    timeout: float = 1800) -> list[dict]:
    """Training images/s for each process count (see the module docstring)."""
    cores = cores or os.cpu_count() or 1
    rows: list[dict] = []
    for p in procs:
        threads = max(1, cores // p) if cluster.startswith("cpu") else int(os.environ.get("OMP_NUM_THREADS", 4))
        print(f"[scaling] {p} process(es) x {threads} thread(s): {steps} timed steps after {warmup}", flush=True)
        r = _run_one(config, p, cluster, steps, warmup, overrides, threads, timeout)
        ips = r["images_per_s"]
        first = rows[0] if rows else dict(processes=p, images_per_s=ips)
        speedup = ips / first["images_per_s"]
        # CPU processes split the same cores: the ideal is no loss (1x); GPUs add hardware (p x)
        ideal = 1.0 if cluster.startswith("cpu") else p / first["processes"]
        rows.append(dict(processes=p, threads_per_process=threads,
                         global_batch=r["images_per_rank"] // max(r["steps"], 1) * p,
                         step_s=r["seconds"] / max(r["steps"], 1), images_per_s=ips, speedup=speedup,
                         ideal_speedup=ideal, efficiency=speedup / ideal))
    return rows


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/segmentation/demo_digits.yaml")
    ap.add_argument("--cluster", default="cpu_gloo", help="trainer settings: configs/cluster/<name>.yaml")
    ap.add_argument("--procs", default="1,2", help="process counts (GPUs with --cluster gpu_ddp)")
    ap.add_argument("--steps", type=int, default=20, help="timed training steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    ap.add_argument("--busbw-intra", type=float, default=BUSBW_SOURCES["intra"][0], help="GB/s inside a node")
    ap.add_argument("--busbw-inter", type=float, default=BUSBW_SOURCES["inter"][0], help="GB/s across nodes")
    ap.add_argument("--skip-measure", action="store_true", help="only the on-paper communication table")
    ap.add_argument("--out", default="runs/scaling")
    return ap


def main(argv: Optional[list[str]] = None) -> int:
    """``tools/scaling.py``: the on-paper communication table, then the measured scaling."""
    args, overrides = _parser().parse_known_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config = str(shipped_file(args.config, "--config"))
    prepare_embedded_data(Path(config))
    rows = comm_cost_rows([shipped_file(c, "a ViT-B recipe") for c in COMM_CONFIGS], busbw_intra=args.busbw_intra,
                          busbw_inter=args.busbw_inter)
    note = (f"\nAssumed all_reduce busbw: {args.busbw_intra:g} GB/s inside a node (8 GPUs), {args.busbw_inter:g} GB/s "
            f"across nodes (64 GPUs = 8 nodes).\nSources: {BUSBW_SOURCES['intra'][1]}; {BUSBW_SOURCES['inter'][1]}.\n"
            "DDP all-reduces fp32 gradients (also under bf16-mixed: the parameters stay fp32); a bf16 "
            "compression hook would halve it. Buckets overlap with the backward pass, so this bounds the "
            "added step time from above.\n")
    atomic_write_text(out / "comm_cost.md", markdown_table(rows) + "\n" + note)
    write_csv(rows, out / "comm_cost.csv")
    print(markdown_table(rows) + "\n" + note)
    if args.skip_measure:
        return 0
    procs = [int(p) for p in args.procs.split(",")]
    measured = measure_scaling(config, procs, args.cluster, args.steps, args.warmup, overrides)
    table = markdown_table(measured)
    atomic_write_text(out / "scaling.md", f"`{' '.join(['tools/scaling.py', *(argv or [])])}`\n\n{table}\n")
    write_csv(measured, out / "scaling.csv")
    print(table)
    return 0
