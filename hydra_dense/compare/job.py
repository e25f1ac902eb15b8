"""The comparison job in four named steps: train every recipe x seed, convert what needs converting,
time the trained models together, and write the report (see :func:`run_comparison`)."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..backbones.sizes import configured_depth
from .progress import JobProgress
from .runs import run_or_reuse

__all__ = ["ComparisonJob", "run_comparison", "prepare_job"]


@dataclass
class ComparisonJob:
    """One comparison: its settings, and what each step leaves for the next.

    ``requests`` keeps every run's request in memory (recipe name -> one per seed), so that the speed
    step builds each model from the request it was trained with.
    """

    args: argparse.Namespace
    overrides: list[str]
    config: Path
    seeds: list[int]
    recipes: list
    weights: Optional[str]  # the pretrained weights every run starts from (None: from scratch)
    start: Optional[str]  # the MSA weights conversions and distillation start from (None: the msa run's)
    out: Path
    progress: JobProgress
    eval_sizes: list[int]
    keep_all: bool  # every msa seed's weights are kept when later recipes start from them
    by_recipe: dict[str, list[dict]] = field(default_factory=dict)
    requests: dict[str, list[dict]] = field(default_factory=dict)
    conversions: dict = field(default_factory=dict)

    # ---- train -------------------------------------------------------------------------------
    def train(self, recipe, starts: Optional[list[tuple[str, Optional[str]]]] = None) -> list[dict]:
        """Every seed of ``recipe``. ``starts``: per seed, the backbone checkpoint to load and the task
        weights whose head to load."""
        runs, requests = [], []
        for i, seed in enumerate(self.seeds):
            converted, head_from = starts[i] if starts else (None, None)
            # @distilled: the MSA weights the recipe was converted from teach during the fine-tune
            distill = ([f'--model.init_args.distill={{"teacher": "{self.start}"}}']
                       if recipe.start == "distilled" else [])
            req = dict(recipe=recipe.name, plan_name=recipe.plan_name, backbone_yaml=recipe.backbone_yaml, seed=seed,
                       config=str(self.config.resolve()), overrides=list(self.overrides) + distill,
                       pretrained=self.weights, converted=converted, max_steps=self.args.max_steps,
                       eval_sizes=self.eval_sizes,
                       # every seed's weights when other sizes may be evaluated later, or a recipe starts from them
                       save_weights=i == 0 or bool(self.eval_sizes) or (self.keep_all and recipe is self.recipes[0]))
            if head_from:
                req["head_from"] = head_from
            runs.append(run_or_reuse(req, self.out / recipe.name / f"seed{seed}", self.config, self.args.rerun,
                                     self.progress))
            requests.append(req)
        self.progress.recipe_done(recipe.name, runs)
        self.by_recipe[recipe.name], self.requests[recipe.name] = runs, requests
        return runs

    # ---- convert -----------------------------------------------------------------------------
    def convert(self) -> None:
        """The converted recipes: convert once (cached), then train every seed from the conversion."""
        if not any(r.converted for r in self.recipes):
            return
        # a trained task model as the source: its head comes along (it fits the features conversion imitates)
        head_from = None if self.start else self.by_recipe[self.recipes[0].name][0]["weights"]
        self.conversions = _conversions(self.recipes, self.args, self.config, self.overrides, self.start or head_from)
        for r in self.recipes:
            if r.converted:
                self.train(r, [(str(self.conversions[r.name][0]), head_from)] * len(self.seeds))

    def convert_msa_runs(self) -> None:
        """``@from_msa`` / ``msa@continued``: each seed's fine-tuned msa run, converted (or not) and trained again."""
        if not self.keep_all:
            return
        from .from_msa import msa_run_starts

        args = self.args
        starts, staged = msa_run_starts(self.recipes, self.by_recipe[self.recipes[0].name], self.config,
                                        self.overrides, args.from_msa_convert_config, args.convert_steps,
                                        args.convert_args.split() if args.convert_args else [])
        self.conversions.update(staged)
        for r in self.recipes:
            if r.name in starts:
                self.train(r, starts[r.name])

    # ---- speed -------------------------------------------------------------------------------
    def speed(self) -> tuple[dict, str, str]:
        """Every recipe's first-seed model, timed together (interleaved, after warm-up)."""
        import torch

        from .run_setup import build_run
        from .speed import measure_speed
        from .worker import request_overrides

        print("\n=== speed (interleaved, after warm-up; trained weights of the first seed) ===", flush=True)
        models, dm = {}, None
        for recipe in self.recipes:
            req, run = self.requests[recipe.name][0], self.by_recipe[recipe.name][0]
            ov = [o for o in request_overrides(req) if "pretrained=" not in o]
            _, model, dm_r, _ = build_run(self.config, ov, self.out / recipe.name / "speed", recipe.plan_name)
            model.load_state_dict(torch.load(run["weights"], map_location="cpu", weights_only=True))
            models[recipe.name] = model.eval()
            dm = dm or dm_r
        args = self.args
        return measure_speed(models, dm, args.speed_size, args.speed_batch, args.speed_repeats)

    # ---- report ------------------------------------------------------------------------------
    def report(self, speed: dict, small: str, big: str) -> list[dict]:
        """Rows per recipe (mean ± std over seeds, speed, conversion) written as tables, plots and HTML."""
        import torch

        from .report import aggregate, write_report

        runs = [run for r in self.recipes for run in self.by_recipe[r.name]]
        conversions = {k: v[1] for k, v in self.conversions.items()}
        rows = aggregate(runs, conversions)
        for row in rows:
            row.update(speed[row["plan"]])
        gpu = f"CUDA {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "no GPU"
        header = (f"hydra_dense comparison: {self.config} | seeds {','.join(map(str, self.seeds))} | "
                  f"{os.cpu_count()} CPU cores, {gpu} | pretrained: {self.start or 'none'}")
        summary = dict(config=str(self.config), seeds=self.seeds, pretrained=self.start, overrides=self.overrides,
                       conversions=conversions)
        out = self.out
        legend = _legend(rows, small, big) + _not_shown(out, [r.name for r in self.recipes])
        text = write_report(rows, runs, out, header, legend, big, summary)
        print("\n" + text)
        print(f"written: {out / 'table.md'}, {out / 'table.csv'}, {out / 'runs.csv'}, {out / 'per_class.md'}, "
              f"{out / 'accuracy_vs_speed.png'}, {out / 'curves.png'}; all on one page: {out / 'report.html'}")
        return rows


def run_comparison(args: argparse.Namespace, overrides: list[str]) -> list[dict]:
    """Train every recipe x seed (fresh process each, reused when done), convert, time the trained
    recipes together, and write the report. Returns the per-recipe rows."""
    job = prepare_job(args, overrides)
    for recipe in job.recipes:  # recipes trained from the given weights first: a conversion may start from msa
        if recipe.start == "given":
            job.train(recipe)
    job.convert()
    job.convert_msa_runs()
    return job.report(*job.speed())


def prepare_job(args: argparse.Namespace, overrides: list[str]) -> ComparisonJob:
    """Check the inputs and fetch what every run needs, before anything trains."""
    from .run_setup import prepare_default_data, pretrained_weights, uses_pretrained
    from .recipes import parse_recipes

    config = Path(args.config)
    if not config.is_file():
        raise FileNotFoundError(f"--config: {config} does not exist")
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()] if args.seeds else [args.seed]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(f"--seeds {args.seeds}: seed {', '.join(map(str, twice))} is listed twice; a seed is one run, "
                         f"so a repeated one would be counted as a second measurement")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder (it is created if missing)")
    recipes = parse_recipes(args.plans, args.backbones, _task_depth(config, overrides))
    prepare_default_data(config)
    out.mkdir(parents=True, exist_ok=True)
    weights = pretrained_weights(args.pretrained)
    start = weights if weights and uses_pretrained(config) else None  # video / mm configs train from scratch
    if any(r.converted for r in recipes) and start is None:
        _check_conversion_teacher(recipes, config)
    if any(r.start == "distilled" for r in recipes) and start is None:
        raise ValueError(f"--plans: @distilled needs pretrained MSA image weights to teach with; {config} has none "
                         "(use @converted, or --pretrained <weights>)")
    eval_sizes = [int(s) for s in str(args.eval_sizes).split(",") if s.strip()] if args.eval_sizes else []
    return ComparisonJob(args, overrides, config, seeds, recipes, weights, start, out,
                         JobProgress(len(recipes) * len(seeds)), eval_sizes,
                         keep_all=any(r.from_msa_run for r in recipes))


def _legend(rows: list[dict], small: str, big: str) -> str:
    return (f"score = {rows[0]['metric']} (%) on the validation split, mean ± sample std over the seeds (scores: "
            f"each seed; one seed: the score alone); score2 = {rows[0]['metric2']} (%); global_zeroed = the score "
            f"with the global term set to zero in every block that has local mixing beside it (Hydra's phi(q) * kv "
            f"next to a local branch, ViTDet's global blocks), global_cost = score - global_zeroed per seed: what "
            f"the global term carries; score_at_S (with --eval-sizes) = the score with "
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


def _task_depth(config: Path, overrides: list[str]) -> int:
    """The depth of the task's ViT backbone (recipe plans are checked against it); an OpenMMLab
    config (no hydra_dense backbone section) has the 12 blocks of the ViT-B it wraps."""
    from .conversion import task_backbone_config

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


def _check_conversion_teacher(recipes, config: Path) -> None:
    """A task trained from scratch (the video demo) has no MSA weights to convert: its ``@converted``
    recipes convert the comparison's own ``msa`` run (first seed), which must be the first recipe.
    Raises before anything trains."""
    if recipes[0].plan_name != "msa" or recipes[0].converted:
        raise ValueError(f"@converted recipes of {config} (no pretrained image weights) convert the comparison's own "
                         f"trained MSA model: list msa first in --plans (got {recipes[0].name!r})")


def _conversions(recipes, args, config: Path, overrides: list[str], source: str) -> dict:
    """recipe name -> (converted checkpoint, info) for the ``@converted`` recipes."""
    from .conversion import ALIGN_CONFIG, aligned_checkpoint, converted_checkpoint, default_convert_config, \
        task_backbone_config

    backbone = task_backbone_config(config, overrides)
    depth = configured_depth(backbone["init_args"])
    extra = args.convert_args.split() if args.convert_args else []
    convert_config = args.convert_config or default_convert_config(backbone)
    out = {}
    for r in recipes:
        if r.converted:
            plan = r.plan_fields(depth)
            out[r.name] = converted_checkpoint(backbone, plan, source, convert_config, args.convert_steps, extra)
            if r.aligned:
                if backbone["class_path"].endswith("VideoViT"):
                    raise ValueError(f"--plans: {r.name!r}: @aligned is for image ViTs; use @converted for video")
                out[r.name] = aligned_checkpoint(backbone, plan, source, out[r.name], args.align_config or ALIGN_CONFIG,
                                                 config, overrides, args.align_steps)
    return out


