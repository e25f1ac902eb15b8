"""One prepared check of the CUDA path: kernel numerics, bandwidth, ViT-B speed, DDP training smoke.

``tools/gpu_check.py`` is the entry point. ``dry_run`` runs every section at toy sizes on the CPU
(kernels in Triton's interpreter, gloo instead of NCCL), so the script is exercised by CI and
cannot rot before the day a GPU is available.
"""
from __future__ import annotations

import csv
import math
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..data import demo_instances, demo_segmentation, demo_video
from .. import cli
from ..runtime.shipped import job_command, job_environment, shipped_file
from ..tables import markdown_table
from .backbone import BenchSettings, bench_backbones
from .input_sizes import parse_size
from .kernel_check import check_kernel_numerics, measure_bandwidth, peak_bandwidth_gbs

__all__ = ["CheckSizes", "FULL", "DRY", "speed_rows", "train_smoke", "SMOKE_TASKS"]



@dataclass(frozen=True)
class CheckSizes:
    """How big each section runs."""

    numerics_shapes: tuple[tuple[int, int, int], ...]
    bandwidth_shape: tuple[int, int, int]
    speed_model: str
    speed_sizes: tuple[str, ...]
    speed_batch: int
    speed_dtype: torch.dtype
    speed_repeats: int
    smoke_steps: int
    smoke_overrides: tuple[str, ...] = ()


FULL = CheckSizes(numerics_shapes=((2, 197, 64), (4, 4096, 384), (8, 16384, 768)), bandwidth_shape=(8, 16384, 768),
                  speed_model="vit_base", speed_sizes=("1024", "1080p"), speed_batch=8, speed_dtype=torch.bfloat16,
                  speed_repeats=10, smoke_steps=30)
DRY = CheckSizes(numerics_shapes=((2, 37, 24),), bandwidth_shape=(2, 64, 32), speed_model="vit_micro",
                 speed_sizes=("64", "48x80"), speed_batch=1, speed_dtype=torch.float32, speed_repeats=1, smoke_steps=2,
                 smoke_overrides=("--data.init_args.batch_size=2", "--data.init_args.val_batch_size=2",
                                  "--data.init_args.num_workers=0"))


def speed_rows(sizes: CheckSizes, device: torch.device, mode: str) -> list[dict]:
    """MSA vs Hydra vs no-mixing, timed interleaved; on CUDA, MSA is pinned to SDPA's flash kernel
    (an error, not a silent fallback, if flash cannot run)."""
    settings = BenchSettings(model=sizes.speed_model, plans=["msa", "hydra", "none"],
                             sizes=[parse_size(s) for s in sizes.speed_sizes], batch=sizes.speed_batch, mode=mode,
                             dtype=sizes.speed_dtype, device=device, warmup=3 if device.type == "cuda" else 1,
                             repeats=sizes.speed_repeats, memory=device.type == "cuda")
    if device.type == "cuda":
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return bench_backbones(settings)
    return bench_backbones(settings)


# task -> (demo config, how to write its tiny data under a root, its main validation metric)
def _prepare_segmentation(root: Path) -> None:
    demo_segmentation.prepare(root, n_train=32, n_val=8)


def _prepare_detection(root: Path) -> None:
    demo_instances.prepare(root, n_train=16, n_val=4)


def _prepare_video(root: Path) -> None:
    demo_video.prepare(root, n_train=16, n_val=4)


SMOKE_TASKS: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "segmentation": ("configs/segmentation/demo_digits.yaml", _prepare_segmentation, "val_mIoU"),
    "detection": ("configs/detection/demo_digits_mask_rcnn.yaml", _prepare_detection, "val_mAP"),
    "video": ("configs/video/demo_moving_digits.yaml", _prepare_video, "val_top1"),
}


def _last_metrics(root_dir: Path) -> dict[str, float]:
    files = sorted(root_dir.rglob("metrics.csv"), key=lambda p: p.stat().st_mtime)
    if not files:
        return {}
    out: dict[str, float] = {}
    for row in csv.DictReader(files[-1].open()):
        out.update({k: float(v) for k, v in row.items() if v and (k.startswith("val_") or k == "train_loss")})
    return out


def train_smoke(task: str, workdir: Path, cuda: bool, steps: int, overrides: tuple[str, ...] = (),
                timeout: float = 600) -> dict:
    """``tools/train.py fit`` of the task's demo config, all-Hydra with local mixing, one process
    under DDP: ``configs/cluster/gpu_ddp.yaml`` (NCCL, bf16-mixed, SyncBatchNorm) on CUDA,
    ``cpu_gloo.yaml`` otherwise. Passes when the run ends cleanly with the expected process-group
    backend, a finite training loss and a finite main validation metric."""
    config, prepare, metric_name = SMOKE_TASKS[task]
    data, run_dir = workdir / f"{task}_data", workdir / f"{task}_run"
    prepare(data)
    shutil.rmtree(run_dir, ignore_errors=True)  # never read back an earlier run's metrics
    cluster = "gpu_ddp" if cuda else "cpu_gloo"
    cmd = job_command(cli, "fit", "--config", str(shipped_file(config, "the smoke task's config")),
           "--config", str(shipped_file(f"configs/cluster/{cluster}.yaml", "the cluster config")), "--trainer.devices=1",
           f"--trainer.max_steps={steps}", f"--trainer.val_check_interval={steps}",
           "--trainer.limit_val_batches=2", "--trainer.enable_progress_bar=false", "--trainer.log_every_n_steps=1",
           f"--trainer.default_root_dir={run_dir}",
           # the metrics are read back from CSV (the default logger is TensorBoard where it is installed)
           "--trainer.logger=lightning.pytorch.loggers.CSVLogger", f"--trainer.logger.init_args.save_dir={run_dir}",
           f"--data.init_args.root={data}", "--model.init_args.backbone.init_args.plan={default: hydra, local: dwc3}",
           *overrides)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=job_environment(), capture_output=True, text=True, timeout=timeout)
        rc, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as err:
        rc, log = -1, f"timed out after {timeout:.0f} s\n{err.stdout or ''}{err.stderr or ''}"
    backend = "nccl" if cuda else "gloo"
    metrics = _last_metrics(run_dir)
    metric = metrics.get(metric_name, float("nan"))
    problems = []
    if rc != 0:
        problems.append(f"exit code {rc}")
    if f"distributed_backend={backend}" not in log:
        problems.append(f"no {backend} process group")
    if not math.isfinite(metrics.get("train_loss", float("nan"))):
        problems.append("no finite train_loss")
    if not math.isfinite(metric):
        problems.append(f"no finite {metric_name}")
    (workdir / f"{task}_log.txt").write_text(log)
    return dict(task=task, config=config, cluster=f"configs/cluster/{cluster}.yaml", backend=backend, steps=steps,
                seconds=time.perf_counter() - t0, train_loss=metrics.get("train_loss", float("nan")),
                metric=f"{metric_name}={metric:.4g}", passed=not problems,
                note="; ".join(problems) + (f" (log: {workdir / f'{task}_log.txt'})" if problems else ""))


def device_header(device: torch.device) -> str:
    import triton

    parts = [f"torch {torch.__version__}", f"triton {triton.__version__}"]
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        peak, source = peak_bandwidth_gbs(device)
        parts = [f"{props.name} ({props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs)",
                 f"peak bandwidth {peak:.0f} GB/s from {source}", f"CUDA {torch.version.cuda}"] + parts
    else:
        parts = ["CPU dry run: toy sizes, Triton interpreter, gloo"] + parts
    return " | ".join(parts)


# Each section: (sizes, device, workdir) -> (Markdown, passed); passed None = a report, nothing to fail.
def numerics_section(sizes: CheckSizes, device: torch.device, workdir: Path) -> tuple[str, Optional[bool]]:
    rows = check_kernel_numerics(sizes.numerics_shapes, ("fp32", "bf16", "fp16"), device)
    worst = {}
    for r in rows:  # one line per (shape, dtype, mask): the worst tensor
        key = (r["shape"], r["dtype"], r["mask"])
        if key not in worst or (not r["passed"], r["fused_err"] / r["tolerance"]) > (
                not worst[key]["passed"], worst[key]["fused_err"] / worst[key]["tolerance"]):
            worst[key] = r
    shown = [dict(r, passed="yes" if r["passed"] else "**NO**") for r in worst.values()]
    table = markdown_table(shown, ["shape", "dtype", "mask", "tensor", "fused_err", "eager_err", "tolerance",
                                   "passed", "note"])
    ok = all(r["passed"] for r in rows)
    return ("Relative error against eager Hydra in fp64 (max |x - ref| / max |ref|), forward and the "
            "gradients of q, k, v; the worst of the four tensors per line.\n\n" + table), ok


def bandwidth_section(sizes: CheckSizes, device: torch.device, workdir: Path) -> tuple[str, Optional[bool]]:
    rows = []
    for dtype in ("bf16", "fp32"):
        rows += measure_bandwidth(sizes.bandwidth_shape, dtype, device,
                                  repeats=10 if device.type == "cuda" else 1, inner=10 if device.type == "cuda" else 1)
    return ("Least traffic of each pass (forward: q, k, v, out; backward: 7 more tensors) over its median "
            "time; `copy` (read + write) is the practical ceiling.\n\n"
            + markdown_table(rows, ["shape", "dtype", "pass", "ms", "gbytes_per_s", "pct_of_peak"])), None


def speed_section(sizes: CheckSizes, device: torch.device, workdir: Path) -> tuple[str, Optional[bool]]:
    rows = speed_rows(sizes, device, "infer") + speed_rows(sizes, device, "train")
    cols = ["attention", "height", "width", "tokens", "batch", "mode", "dtype", "ms_per_iter", "throughput",
            "peak_mem_mb", "speedup_vs_msa", "flop_ideal_vs_msa", "pct_of_ideal", "overhead_vs_none", "note"]
    msa = "MSA on SDPA's flash kernel" if device.type == "cuda" else "MSA on SDPA"
    return (f"{sizes.speed_model}, batch {sizes.speed_batch}, {str(sizes.speed_dtype).replace('torch.', '')}; "
            f"{msa}; `train` = forward, backward and AdamW step; speedups and the FLOP-ideal ratio are "
            "against MSA at the same size and mode.\n\n"
            + markdown_table(rows, cols)), None


def training_section(sizes: CheckSizes, device: torch.device, workdir: Path) -> tuple[str, Optional[bool]]:
    rows = [train_smoke(task, workdir, device.type == "cuda", sizes.smoke_steps, sizes.smoke_overrides)
            for task in SMOKE_TASKS]
    shown = [dict(r, passed="yes" if r["passed"] else "**NO**") for r in rows]
    return ("`tools/train.py fit` of each demo config with `plan: {default: hydra, local: dwc3}`, one process "
            "under DDP.\n\n" + markdown_table(shown, ["task", "cluster", "backend", "steps", "seconds",
                                                     "train_loss", "metric", "passed", "note"]),
            all(r["passed"] for r in rows))


SECTION_FNS = {"numerics": numerics_section, "bandwidth": bandwidth_section, "speed": speed_section,
               "training": training_section}
SECTIONS = tuple(SECTION_FNS)


def run_gpu_check(dry_run: bool, workdir: Path, sections=SECTIONS,
                  progress: Optional[Callable[[str], None]] = None) -> tuple[str, bool]:
    """The whole check as one Markdown report, and whether every pass/fail check passed. A
    section that raises is reported as failed with its error; the others still run."""
    device = torch.device("cpu" if dry_run else "cuda")
    if not dry_run and not torch.cuda.is_available():
        raise RuntimeError("gpu_check needs a CUDA GPU (torch.cuda.is_available() is False); "
                           "use --dry-run to exercise it on the CPU")
    sizes = DRY if dry_run else FULL
    workdir.mkdir(parents=True, exist_ok=True)
    parts, ok = [f"# hydra_dense GPU check\n\n{device_header(device)}\n"], True
    for name in sections:
        if progress:
            progress(name)
        t0 = time.perf_counter()
        try:
            text, passed = SECTION_FNS[name](sizes, device, workdir)
        except Exception as err:  # noqa: BLE001 - reported, and the exit code says so
            text, passed = f"**failed:** `{type(err).__name__}: {err}`", False
        ok &= passed is not False
        verdict = {None: "", True: " — passed", False: " — **FAILED**"}[passed]
        parts.append(f"## {name}{verdict} ({time.perf_counter() - t0:.0f} s)\n\n{text}\n")
    parts.append(f"**Overall: {'PASSED' if ok else 'FAILED'}**\n")
    return "\n".join(parts), ok
