"""The comparison job in four named steps: train every recipe x seed, convert what needs converting,
time the trained models together, and write the report (see :func:`run_comparison`)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch

from ..backbones.sizes import configured_depth
from ..conversion.cache import (ALIGN_CONFIG, aligned_checkpoint, convert_config_for, converted_checkpoint,
                                  is_video_backbone, task_backbone_config)
from .progress import JobProgress
from .reading import read_table
from .recipes import Recipe, parse_recipes
from .report import aggregate, write_report
from .request import RunRequest, RunStart
from .run_setup import build_run, pretrained_weights, uses_pretrained
from ..data.embedded import prepare_embedded_data
from .runs import run_folder, run_or_reuse
from .speed import measure_speed
from .worker import request_overrides
from ..runtime.progress import silence_known_noise
from ..runtime.refusal import plain_refusals
from .from_msa import msa_run_starts
from .options import ComparisonOptions

__all__ = ["ComparisonJob", "run_comparison", "prepare_job", "recipe_conversions", "conversion_arguments",
           "task_depth"]


@dataclass
class ComparisonJob:
    """One comparison: its options, and what each step leaves for the next.

    ``requests`` keeps every run's request (recipe name -> one per seed), so that the speed step
    builds each model from the request it was trained with.
    """

    options: ComparisonOptions
    recipes: list[Recipe]
    weights: Optional[str]  # the pretrained weights every run starts from (None: from scratch)
    start: Optional[str]  # the MSA weights conversions and distillation start from (None: the msa run's)
    progress: JobProgress
    keep_all: bool  # every msa seed's weights are kept when later recipes start from them
    by_recipe: dict[str, list[dict]] = field(default_factory=dict)
    requests: dict[str, list[RunRequest]] = field(default_factory=dict)
    conversions: dict = field(default_factory=dict)

    # ---- train -------------------------------------------------------------------------------
    def request(self, recipe: Recipe, index: int, start: RunStart) -> RunRequest:
        """The run of ``recipe`` with the ``index``-th seed."""
        o = self.options
        return RunRequest(
            recipe=recipe.name, seed=o.seeds[index], config=str(o.config.resolve()), overrides=list(o.overrides),
            plan_name=recipe.plan_name, backbone_yaml=recipe.backbone_yaml, pretrained=self.weights,
            converted=start.backbone, head_from=start.head,
            # @distilled: the MSA weights the recipe was converted from teach during the fine-tune
            distill_teacher=self.start if recipe.start == "distilled" else None, max_steps=o.max_steps, eval_sizes=o.eval_sizes,
            # every seed's weights when other sizes may be evaluated later, or a recipe starts from them
            save_weights=index == 0 or bool(o.eval_sizes) or (self.keep_all and recipe is self.recipes[0]))

    def train(self, recipe: Recipe, starts: Optional[list[RunStart]] = None) -> list[dict]:
        """Every seed of ``recipe``; ``starts``: per seed, where its weights start."""
        requests = [self.request(recipe, i, starts[i] if starts else RunStart(None, None))
                    for i in range(len(self.options.seeds))]
        runs = [run_or_reuse(req, run_folder(self.options.out, recipe.name, req.seed), self.options.rerun,
                             self.progress) for req in requests]
        self.progress.recipe_done(recipe.name, runs)
        self.add_runs(recipe, runs, requests)
        return runs

    def add_runs(self, recipe: Recipe, runs: list[dict], requests: list[RunRequest]) -> None:
        """``recipe``'s finished runs and the requests they ran, for the speed step and the report
        (also runs made outside :meth:`train`: ``--from-run`` validating the given model)."""
        self.by_recipe[recipe.name], self.requests[recipe.name] = runs, requests

    def add_conversion(self, recipe: Recipe, conversion: tuple) -> None:
        """``recipe``'s conversion (converted checkpoint, info), made here or by the caller, for the report."""
        self.conversions[recipe.name] = conversion

    # ---- convert -----------------------------------------------------------------------------
    def convert(self) -> None:
        """The converted recipes: convert once (cached), then train every seed from the conversion."""
        if not any(r.converted for r in self.recipes):
            return
        # a trained task model as the source: its head comes along (it fits the features conversion imitates)
        head_from = None if self.start else self.by_recipe[self.recipes[0].name][0]["weights"]
        self.conversions = recipe_conversions(self.recipes, self.options, self.start or head_from)
        for r in self.recipes:
            if r.converted:
                self.train(r, [RunStart(str(self.conversions[r.name][0]), head_from)] * len(self.options.seeds))

    def convert_msa_runs(self) -> None:
        """``@from_msa`` / ``msa@continued``: each seed's fine-tuned msa run, converted (or not) and trained again."""
        if not self.keep_all:
            return
        o = self.options
        starts, staged = msa_run_starts(self.recipes, self.by_recipe[self.recipes[0].name], o.config, o.overrides,
                                        o.from_msa_convert_config, o.convert_steps, o.convert_args)
        self.conversions.update(staged)
        for r in self.recipes:
            if r.name in starts:
                self.train(r, starts[r.name])

    # ---- speed -------------------------------------------------------------------------------
    def speed(self) -> tuple[dict, str, str]:
        """Every recipe's first-seed model, timed together (interleaved, after warm-up)."""
        print("\n=== speed (interleaved, after warm-up; trained weights of the first seed) ===", flush=True)
        models, dm = {}, None
        for recipe in self.recipes:
            req, run = self.requests[recipe.name][0], self.by_recipe[recipe.name][0]
            ov = [o for o in request_overrides(req) if "pretrained=" not in o]
            model, dm_r, _ = build_run(self.options.config, ov, self.options.out / recipe.name / "speed",
                                          recipe.plan_name)
            model.load_state_dict(torch.load(run["weights"], map_location="cpu", weights_only=True))
            models[recipe.name] = model.eval()
            dm = dm or dm_r
        o = self.options
        return measure_speed(models, dm, o.speed_size, o.speed_batch, o.speed_repeats)

    # ---- report ------------------------------------------------------------------------------
    def report(self, speed: dict, small: str, big: str) -> list[dict]:
        """Rows per recipe (mean ± std over seeds, speed, conversion) written as tables, plots and HTML."""
        o = self.options
        runs = [run for r in self.recipes for run in self.by_recipe[r.name]]
        conversions = {k: v[1] for k, v in self.conversions.items()}
        rows = aggregate(runs, conversions)
        for row in rows:
            row.update(speed[row["plan"]])
        disturbed = sorted({row.pop("speed_note", "") for row in rows} - {""})
        gpu = f"CUDA {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "no GPU"
        header = (f"hydra_dense comparison: {o.config} | seeds {','.join(map(str, o.seeds))} | "
                  f"{os.cpu_count()} CPU cores, {gpu} | pretrained: {o.start_note or self.start or 'none'}")
        summary = dict(config=str(o.config), seeds=o.seeds, pretrained=o.start_note or self.start, overrides=o.overrides,
                       conversions=conversions, speed_disturbed=disturbed[0] if disturbed else "")
        reading = read_table(rows, small, big, o.reading_tolerance)
        summary["reading"] = reading
        legend = _legend(rows, small, big) + _not_shown(o.out, [r.name for r in self.recipes])
        if reading:
            legend = "**What this table says:**\n\n" + "".join(f"- {s}\n" for s in reading) + "\n" + legend
        if disturbed:
            legend = f"**Speed: {disturbed[0]}.**\n\n" + legend
            print(f"[compare] {disturbed[0]}", flush=True)
        text = write_report(rows, runs, o.out, header, legend, big, summary)
        print("\n" + text)
        print(f"written: {o.out / 'table.md'}, {o.out / 'table.csv'}, {o.out / 'runs.csv'}, {o.out / 'per_class.md'}, "
              f"{o.out / 'accuracy_vs_speed.png'}, {o.out / 'curves.png'}; all on one page: {o.out / 'report.html'}")
        return rows


def run_comparison(options: ComparisonOptions) -> list[dict]:
    """Train every recipe x seed (fresh process each, reused when done), convert, time the trained
    recipes together, and write the report. Returns the per-recipe rows."""
    job = prepare_job(options)
    for recipe in job.recipes:  # recipes trained from the given weights first: a conversion may start from msa
        if recipe.start == "given":
            job.train(recipe)
    job.convert()
    job.convert_msa_runs()
    return job.report(*job.speed())


def prepare_job(options: ComparisonOptions) -> ComparisonJob:
    """Check the inputs and fetch what every run needs, before anything trains."""
    o = options
    if not o.config.is_file():
        raise FileNotFoundError(f"--config: {o.config} does not exist")
    twice = sorted({s for s in o.seeds if o.seeds.count(s) > 1})
    if twice:
        raise ValueError(f"--seeds {','.join(map(str, o.seeds))}: seed {', '.join(map(str, twice))} is listed twice; a "
                         f"seed is one run, so a repeated one would be counted as a second measurement")
    if o.out.exists() and not o.out.is_dir():
        raise ValueError(f"--out {o.out} is a file; give a folder (it is created if missing)")
    recipes = parse_recipes(o.plans, o.backbones, task_depth(o.config, o.overrides))
    prepare_embedded_data(o.config)
    o.out.mkdir(parents=True, exist_ok=True)
    weights = pretrained_weights(o.pretrained)
    start = weights if weights and uses_pretrained(o.config) else None  # video / mm configs train from scratch
    if any(r.converted for r in recipes) and start is None:
        _check_conversion_teacher(recipes, o.config)
    if any(r.start == "distilled" for r in recipes) and start is None:
        raise ValueError(f"--plans: @distilled needs pretrained MSA image weights to teach with; {o.config} has none "
                         "(use @converted, or --pretrained <weights>)")
    return ComparisonJob(o, recipes, weights, start, JobProgress(len(recipes) * len(o.seeds)),
                         keep_all=any(r.from_msa_run for r in recipes))


def _legend(rows: list[dict], small: str, big: str) -> str:
    return (f"score = {rows[0]['metric']} (%) on the validation split, mean ± sample std over the seeds (scores: "
            f"each seed; one seed: the score alone); score2 = {rows[0]['metric2']} (%); global_zeroed = the score "
            f"with the global term set to zero in every block that has local mixing beside it (Hydra's phi(q) * kv "
            f"next to a local branch, ViTDet's global blocks), global_cost = score - global_zeroed per seed: what "
            f"the global term carries; head_pool_zeroed / head_pool_cost = the same for the decode head's global "
            f"pooling bin (UPerNet's scale 1); score_near / score_far (context tracks) = mIoU over pixels within 8 "
            f"tokens of the scene's cue / beyond; score_at_S (with --eval-sizes) = the score with "
            f"validation images resized to short side S: the same model on more tokens; train_img_s = training "
            f"images/s (batches only); "
            f"infer_img_s / speedup / flop_ideal = inference images/s at the evaluation size ({small}), its ratio "
            f"to the first plan's and the FLOP ratio there; infer_img_s_big / speedup_big = "
            f"whole-model inference at {big or '-'} (speedup vs the first plan); flop_ideal_big = FLOP ratio there "
            f"(FlopCounterMode, SDPA on its math path); peak_train_mem_mb = peak resident memory of the training "
            f"process above its start (CPU; each run in its own process) or CUDA max allocated; gflops_img = "
            f"forward GFLOPs per image at the training crop; convert_* = the one-time MSA -> plan conversion "
            f"(minutes of wall time, mean per-block relative error before -> after on held-out inputs, its "
            f"data).")


def task_depth(config: Path, overrides: list[str]) -> int:
    """The depth of the task's ViT backbone (recipe plans are checked against it); an OpenMMLab
    config (no hydra_dense backbone section) has the 12 blocks of the ViT-B it wraps."""
    try:
        backbone = task_backbone_config(config, overrides)
    except (KeyError, TypeError, ValueError):
        return 12
    return configured_depth(backbone.get("init_args") or {})


def _not_shown(out: Path, shown: list[str]) -> str:
    """A sentence naming the finished runs in ``out`` of recipes this job does not list (another job's,
    into the same folder), so that a table never drops them unsaid; empty when there are none."""
    others: dict[str, list[str]] = {}
    for done in sorted(out.glob("*/seed*/result.json")):
        recipe = done.parent.parent.name
        if recipe not in shown:
            others.setdefault(recipe, []).append(done.parent.name.removeprefix("seed"))
    if not others:
        return ""
    listed = "; ".join(f"{name} (seed {', '.join(seeds)})" for name, seeds in others.items())
    return (f"\n\nAlso finished in {out} but not in this table (another request's recipes): {listed}. List them in "
            f"--plans to show them here.")


def _check_conversion_teacher(recipes: list[Recipe], config: Path) -> None:
    """A task trained from scratch (the video demo) has no MSA weights to convert: its ``@converted``
    recipes convert the comparison's own ``msa`` run (first seed), which must be the first recipe.
    Raises before anything trains."""
    if recipes[0].plan_name != "msa" or recipes[0].converted:
        raise ValueError(f"@converted recipes of {config} (no pretrained image weights) convert the comparison's own "
                         f"trained MSA model: list msa first in --plans (got {recipes[0].name!r})")


def conversion_arguments(recipes: list[Recipe], options: ComparisonOptions, source: str) -> dict[str, tuple]:
    """recipe name -> the arguments of :func:`converted_checkpoint` for each ``@converted`` recipe
    (backbone, plan, source, conversion config, steps, extra arguments): what keys its cache entry."""
    o = options
    backbone = task_backbone_config(o.config, o.overrides)
    depth = configured_depth(backbone["init_args"])
    convert_config = o.convert_config or convert_config_for(backbone)
    return {r.name: (backbone, r.plan_fields(depth), source, convert_config, o.convert_steps, o.convert_args)
            for r in recipes if r.converted}


def recipe_conversions(recipes: list[Recipe], options: ComparisonOptions, source: str) -> dict:
    """recipe name -> (converted checkpoint, info) for the ``@converted`` recipes."""
    o = options
    out = {}
    for r in recipes:
        if not r.converted:
            continue
        args = conversion_arguments([r], o, source)[r.name]
        out[r.name] = converted_checkpoint(*args)
        if r.aligned:
            backbone, plan = args[0], args[1]
            if is_video_backbone(backbone):
                raise ValueError(f"--plans: {r.name!r}: @aligned is for image ViTs; use @converted for video")
            out[r.name] = aligned_checkpoint(backbone, plan, source, out[r.name], o.align_config or ALIGN_CONFIG,
                                             o.config, o.overrides, o.align_steps)
    return out


def work(argv: list[str]) -> int:
    """``python -m hydra_dense.comparison.job <options.json>``: one comparison from the options a
    job wrote (:meth:`ComparisonOptions.as_json`); the GPU track's workers."""
    if len(argv) != 1:
        raise ValueError("usage: python -m hydra_dense.comparison.job <options.json>")
    silence_known_noise()
    run_comparison(ComparisonOptions.read(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(plain_refusals(work)())
