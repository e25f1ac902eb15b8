"""A track at full scale on one GPU, in one command: MSA, the recommended Hydra recipe and its
local-only control, 3 seeds each, 1,000 fine-tuning steps, written as the comparison's usual table
(``<out>/table.md``, ``report.html``, ...) with speed at the track's validation size and at 1024².
The large-token track by default; ``--config`` names another (the context tracks).

    python tools/gpu_track.py                   # one CUDA GPU (bf16)
    python tools/gpu_track.py --config configs/segmentation/demo_context_presence.yaml --out runs/gpu_presence
    python tools/gpu_track.py --dry-run         # the same command at toy steps on the CPU

A ViT-S at batch 8 leaves most of an H200 idle, so the runs share it, up to ``--at-once`` at a
time, each in its own process with its log in ``<out>/logs/``: the conversions of the ``@converted``
recipes run first, side by side, into the shared cache, while every run that needs none starts;
a recipe's seeds start when its conversion is done. ``--controls`` adds plans run with the first
seed only (their table, beside MSA's first seed: ``<out>/table_controls.md``). A last comparison over the same folder reuses every
finished run, times the models alone on the GPU and writes the table (its training columns,
``train_img_s`` and memory, were measured with the runs sharing the GPU). ``--at-once 1`` runs them
one after another in a single comparison instead.

Extra ``--key=value`` arguments go to the comparison (LightningCLI overrides included).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple, Optional

import torch

from ..conversion.cache import DEFAULT_CONVERT_CONFIG, converted_checkpoint
from .recipes import parse_recipes, split_recipe_name
from .run_setup import pretrained_weights
from .runs import read_finished, run_folder
from ..data.embedded import prepare_embedded_data
from ..runtime.atomic_file import atomic_write_text
from ..runtime.progress import silence_known_noise
from ..runtime.refusal import StepFailed, plain_refusals
from ..runtime.shipped import find_shipped, job_command, job_environment
from .command import CONVERTIBLE_PLANS, LARGE_DEMO_CONFIG
from .command import parse_args
from . import job
from .job import conversion_arguments, run_comparison, task_depth
from .options import ComparisonOptions

__all__ = ["main", "entry", "GPU_TRACK_PLANS", "track_options", "worker_options",
           "controls_options", "track_runs", "ready_runs", "finished_score"]

# MSA, the recommended all-Hydra recipe and its control: the same local branch without the global term
GPU_TRACK_PLANS = CONVERTIBLE_PLANS
SEEDS = (0, 1, 2)
# the folder the job started in: workers start there and logs are written there, whatever folder a
# thread's config parsing has moved the process to for a moment
START_FOLDER = Path.cwd()


# the LightningCLI settings the track adds to the user's: a toy on the CPU, or bf16 with more loaders on the GPU
TOY_OVERRIDES = ("--trainer.val_check_interval=2", "--trainer.limit_val_batches=2", "--data.init_args.limit_train=16")
GPU_OVERRIDES = ("--trainer.precision=bf16-mixed", "--data.init_args.num_workers=4")
# the comparison's options the track sets itself (a user's would be overwritten, so they are refused)
TRACK_SETS = ("--plans", "--seeds", "--seed", "--max-steps")


def track_options(dry_run: bool, out: str, extra: list[str], config: str = LARGE_DEMO_CONFIG, steps: int = 1000,
                  seeds: tuple[int, ...] = SEEDS) -> ComparisonOptions:
    """The track's comparison: the user's command line (``--config``, ``--out`` and ``extra``, the
    user's ``--key=value`` arguments, which come last and so win) parsed once by the comparison's own
    parser, then the track's plans, seeds and schedule set on the typed options: full scale
    (``steps``, bf16) on a GPU, or toy steps on the CPU. Every worker and pass is built from it."""
    for option in TRACK_SETS:
        if any(a == option or a.startswith(option + "=") for a in extra):
            raise ValueError(f"{option}: the GPU track sets the comparison's plans, seeds and steps itself; give "
                             f"--steps, --seeds or --controls to the track instead")
    user = parse_args(["--config", config, "--out", out, *extra])[0]
    if dry_run:
        return replace(user, plans=GPU_TRACK_PLANS, seeds=[0], max_steps=2, convert_steps=2, speed_size="0",
                       speed_repeats=1, overrides=[*TOY_OVERRIDES, *user.overrides])
    every_half = f"--trainer.val_check_interval={max(1, steps // 2)}"
    return replace(user, plans=GPU_TRACK_PLANS, seeds=list(seeds), max_steps=steps,
                   overrides=[every_half, *GPU_OVERRIDES, *user.overrides])


def worker_options(full: ComparisonOptions, plan: str, seed: int) -> ComparisonOptions:
    """One recipe x seed of the comparison ``full``: the same settings (so the last pass finds the
    run finished and reuses it), that plan and seed, and no big-input timing (the last pass times)."""
    return replace(full, plans=plan, seeds=[seed], speed_size="0")


def track_runs(plans: str, seeds: tuple[int, ...] = SEEDS) -> list[tuple[str, int]]:
    """Every (plan, seed) run of the track, seed by seed."""
    names = [p.strip() for p in plans.split(",") if p.strip()]
    return [(p, s) for s in seeds for p in names]


def ready_runs(waiting: list[tuple[str, int]], finished: set[tuple[str, int]],
               seeds: tuple[int, ...] = SEEDS, prepared: Optional[set[str]] = None) -> list[tuple[str, int]]:
    """The waiting runs that may start now: a plan with a step before its training (``@converted``
    and the like) waits for that step; given ``prepared`` (the plans whose step is done, run apart),
    for it to be in there; else for its first seed, which does that step once into the shared
    cache, before its other seeds start. Any other run may start at once."""
    def ready(plan: str, seed: int) -> bool:
        if split_recipe_name(plan)[1] == "given":
            return True
        if prepared is not None:
            return plan in prepared
        return seed == seeds[0] or (plan, seeds[0]) in finished

    return [(p, s) for p, s in waiting if ready(p, s)]


def controls_options(full: ComparisonOptions, controls: str) -> ComparisonOptions:
    """The controls' comparison: the track's, with MSA and the ``controls`` plans, first seed only."""
    return replace(full, plans=",".join(["msa", *[c for c in controls.split(",") if c.strip()]]), seeds=full.seeds[:1])


class _Conversions:
    """The ``@converted`` recipes' conversions, each in its own thread (each runs its conversion in
    its own process), exactly as the comparison of ``full`` asks for them, so its runs find them cached."""

    def __init__(self, options: ComparisonOptions) -> None:
        # everything that parses a config happens here, in the calling thread: jsonargparse changes the
        # process's working folder while it reads a config, which would move the other threads' relative paths
        recipes = parse_recipes(options.plans, options.backbones, task_depth(options.config, options.overrides))
        calls = conversion_arguments(recipes, options, pretrained_weights(options.pretrained))
        self.done: set[str] = set()
        self.threads = {name: threading.Thread(target=self._convert, args=(name, *args), daemon=True)
                        for name, args in calls.items()}
        for thread in self.threads.values():
            thread.start()

    def _convert(self, name: str, *conversion) -> None:
        try:  # the comparison's own arguments, so its runs find the same cache entry
            converted_checkpoint(*conversion)
        finally:  # a failed one is tried again, and named, by its first run
            self.done.add(name)


def finished_score(out: Path, plan: str, seed: int) -> str:
    """One finished run's score as read from its ``result.json``, so each score is in the job's own
    output as soon as the run ends (a job cut off before its table still shows it)."""
    done = run_folder(out, plan, seed) / "result.json"
    result = read_finished(done)
    if result is None:
        return f"no score ({done} is missing or incomplete)"
    return f"{result.get('metric') or 'score'} {result.get('score', float('nan')):.2f} ({done})"


class _Running(NamedTuple):
    plan: str
    seed: int
    log: Path
    started: float
    process: subprocess.Popen


def _run_together(runs: list[tuple[str, int]], full: ComparisonOptions, out: Path, at_once: int,
                  prepared: Optional[set[str]] = None) -> None:
    """Run every (plan, seed) worker, at most ``at_once`` at a time, each as soon as it is ready
    (:func:`ready_runs`), each a comparison process reading its options file beside its log; a
    failed one stops the job naming its log."""
    logs = (START_FOLDER / out / "logs").resolve()
    logs.mkdir(parents=True, exist_ok=True)
    waiting, running, finished = list(runs), [], set()
    while waiting or running:
        for plan, seed in ready_runs(waiting, finished, prepared=prepared)[: at_once - len(running)]:
            waiting.remove((plan, seed))
            log = logs / f"{plan.replace('@', '_at_')}_seed{seed}.log"
            request = atomic_write_text(log.with_suffix(".options.json"),
                                        json.dumps(worker_options(full, plan, seed).as_json(), indent=1))
            cmd = job_command(job, str(request))
            with open(log, "w") as fh:
                running.append(_Running(plan, seed, log, time.time(), subprocess.Popen(
                    cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=START_FOLDER,
                    env=dict(job_environment(), PYTHONUNBUFFERED="1"))))
            print(f"[gpu_track] started {plan} seed {seed} (log {log})", flush=True)
        time.sleep(2)
        for run in [r for r in running if r.process.poll() is not None]:
            running.remove(run)
            if run.process.returncode != 0:
                for other in running:
                    other.process.terminate()
                raise StepFailed(f"{run.plan} seed {run.seed} failed (exit {run.process.returncode}); "
                                 f"its log: {run.log}")
            finished.add((run.plan, run.seed))
            print(f"[gpu_track] {run.plan} seed {run.seed} done in {(time.time() - run.started) / 60:.1f} min: "
                  f"{finished_score(out, run.plan, run.seed)}", flush=True)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="toy steps on the CPU, one seed, one process")
    p.add_argument("--out", default="runs/gpu_track")
    p.add_argument("--config", default=LARGE_DEMO_CONFIG, help="the track's task config (default: the large-token "
                                                              "track)")
    p.add_argument("--steps", type=int, default=1000, help="fine-tuning steps of every run")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="seeds of every plan (default 0,1,2)")
    p.add_argument("--controls", default="", help="plans run with the first seed only, beside MSA's, e.g. "
                                                  "vitdet8_msa,vitdet8_windows (table_controls.md)")
    p.add_argument("--at-once", type=int, default=6, help="runs sharing the GPU at a time (1: one comparison, "
                                                          "one run after another)")
    args, extra = p.parse_known_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        raise ValueError("the GPU track needs a CUDA GPU; --dry-run runs the same command at toy steps on the CPU")
    if args.at_once < 1:
        raise ValueError(f"--at-once {args.at_once}: give 1 or more runs at a time")
    if args.steps < 1:
        raise ValueError(f"--steps {args.steps}: give 1 or more")
    seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    silence_known_noise()
    full = track_options(args.dry_run, args.out, extra, args.config, args.steps, seeds)
    if not args.dry_run and args.at_once > 1:
        started = time.time()
        # the data and weights every worker reads, prepared once here rather than by workers racing
        for config in (args.config, DEFAULT_CONVERT_CONFIG):
            prepare_embedded_data(find_shipped(config) or Path(config))
        pretrained_weights("auto")
        conversions = _Conversions(full)
        runs = track_runs(GPU_TRACK_PLANS, seeds) + [(c, seeds[0]) for c in args.controls.split(",") if c.strip()
                                                     and (c, seeds[0]) not in track_runs(GPU_TRACK_PLANS, seeds)]
        _run_together(runs, full, Path(args.out), args.at_once, conversions.done)
        print(f"[gpu_track] all runs done in {(time.time() - started) / 60:.1f} min; timing and the table",
              flush=True)
    if args.controls:  # its table first: the track's own table.md is written last
        run_comparison(controls_options(full, args.controls))
        for name in ("table.md", "table.csv"):
            shutil.copyfile(Path(args.out) / name, Path(args.out) / name.replace("table", "table_controls"))
    run_comparison(full)
    return 0


# ``tools/gpu_track.py``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main)


if __name__ == "__main__":
    sys.exit(entry())
