"""The main job: train and evaluate MSA, Hydra, hybrid, local-mixing and converted backbones the same
way, over several seeds, side by side.

    python tools/compare.py                                   # embedded demo (segmentation)
    python tools/compare.py --plans msa,hydra,hydra+dwc3,hydra+dwc3@converted --seeds 0,1,2
    python tools/compare.py --config configs/segmentation/ade20k_upernet_vit_b16.yaml \\
        --plans msa,hydra,hybrid2 --data.init_args.root=/data/ADEChallengeData2016
    python tools/compare.py --list-plans                      # every accepted plan name

Every recipe gets the same config, data and schedule; only the backbone's attention plan changes
(``--plans``; ``+dwc3`` adds local mixing, ``@converted`` converts the MSA weights first: the
pretrained ones, or for a task trained from scratch the comparison's own ``msa`` run; ``@aligned``
adds whole-network alignment to the MSA features after that conversion; ``@distilled`` fine-tunes
that conversion with the MSA weights' backbone features as an extra loss;
``@from_msa`` converts the comparison's fine-tuned ``msa`` run of each seed and fine-tunes again,
``msa@continued`` fine-tunes that run again without conversion; ``+mean`` averages Hydra's ``kv``
over tokens; ``--eval-sizes 224,448`` validates every run again at those sizes) or the backbone file
(``--backbones a.yaml,b.yaml``). Each (recipe, seed) trains in a fresh process, so its
peak memory is its own; finished runs are reused when the same command is run again. Extra
``--key=value`` arguments are LightningCLI overrides. Outputs in ``--out``: ``table.md`` /
``table.csv`` (mean ± std over seeds), ``runs.csv`` (every seed), ``per_class.md``,
``accuracy_vs_speed.png`` (Pareto front with error bars), ``summary.json``, and each run's folder.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

from .progress import JobProgress

__all__ = ["main", "run_comparison", "parse_args", "DEMO_CONFIG"]

DEMO_CONFIG = "configs/segmentation/demo_digits.yaml"
DEFAULT_PLANS = "msa,hybrid2,hydra"
# the demos also show their recommended Hydra recipe: on segmentation the real DINOv2 weights
# converted with 7x7 local mixing and kv averaged over tokens (it keeps working at other token
# counts), on video the comparison's own MSA run converted; other configs have no convertible MSA
# backbone by default
DEMO_PLANS = DEFAULT_PLANS + ",hydra+mean+dwc7@converted"
VIDEO_DEMO_CONFIG = "configs/video/demo_moving_digits.yaml"
VIDEO_DEMO_PLANS = DEFAULT_PLANS + ",hydra@converted"
# the detection demo starts from the same DINOv2 weights (at patch 16), so it shows the same recipe,
# converted on crops that give its own token count (224 px at patch 16: 196 tokens)
DETECTION_DEMO_CONFIG = "configs/detection/demo_digits.yaml"
DETECTION_CONVERT_CONFIG = "configs/convert/dinov2_s16_det_224.yaml"


def _run_key(req: dict, config: Path) -> str:
    """Identity of a run: a finished run with the same key is reused instead of trained again."""
    # what a run is evaluated on afterwards (eval_sizes) does not make it another run
    ident = {k: v for k, v in req.items() if k != "eval_sizes"}
    text = json.dumps(dict(ident, config=config.read_text(), out=None, key=None, save_weights=None), sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _train_in_subprocess(req: dict, run_dir: Path) -> dict:
    from .inputs import repo_root

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "result.json").unlink(missing_ok=True)
    (run_dir / "request.json").write_text(json.dumps(req, indent=1))
    proc = subprocess.run([sys.executable, "-m", "hydra_dense.compare.worker", str(run_dir / "request.json")],
                          cwd=repo_root(), env=dict(os.environ, PYTHONPATH=str(repo_root())))
    if proc.returncode != 0 or not (run_dir / "result.json").is_file():
        raise RuntimeError(f"[compare] run {req['recipe']} seed {req['seed']} failed (exit {proc.returncode}); "
                           f"its request is {run_dir / 'request.json'}")
    return json.loads((run_dir / "result.json").read_text())


def _run_or_reuse(req: dict, run_dir: Path, config: Path, rerun: bool, progress: JobProgress) -> dict:
    req["key"] = _run_key(req, config)
    done = run_dir / "result.json"
    progress.start(req["recipe"], req["seed"])
    if done.is_file() and not rerun:
        result = json.loads(done.read_text())
        if result.get("key") == req["key"] and (not req["save_weights"] or Path(result.get("weights", "")).is_file()):
            print(f"[compare] {req['recipe']} seed {req['seed']}: reusing {done}", flush=True)
            result = _add_eval_sizes(req, run_dir, result)
            progress.finish(req["recipe"], req["seed"], result, reused=True)
            return result
    result = _train_in_subprocess(req, run_dir)
    progress.finish(req["recipe"], req["seed"], result, reused=False)
    return result


def _add_eval_sizes(req: dict, run_dir: Path, result: dict) -> dict:
    """A reused run lacking some ``--eval-sizes`` scores gets them from its saved weights (a fresh process)."""
    from .inputs import repo_root

    lacking = [s for s in req.get("eval_sizes") or [] if str(s) not in result.get("scores_at", {})]
    if not lacking:
        return result
    if not Path(result.get("weights", "")).is_file():
        print(f"[compare] {req['recipe']} seed {req['seed']}: no saved weights to evaluate at {lacking}; "
              "--rerun trains it again", flush=True)
        return result
    (run_dir / "request.json").write_text(json.dumps(req, indent=1))
    subprocess.run([sys.executable, "-m", "hydra_dense.compare.worker", "--evaluate", str(run_dir / "request.json")],
                   cwd=repo_root(), env=dict(os.environ, PYTHONPATH=str(repo_root())), check=True)
    return json.loads((run_dir / "result.json").read_text())


def _check_conversion_teacher(recipes, config: Path) -> None:
    """A task trained from scratch (the video demo) has no MSA weights to convert: its ``@converted``
    recipes convert the comparison's own ``msa`` run (first seed), which must be the first recipe.
    Raises before anything trains."""
    if recipes[0].plan_name != "msa" or recipes[0].converted:
        raise ValueError(f"@converted recipes of {config} (no pretrained image weights) convert the comparison's own "
                         f"trained MSA model: list msa first in --plans (got {recipes[0].name!r})")


def _conversions(recipes, args, config: Path, overrides: list[str], source: str) -> dict:
    """recipe name -> (converted checkpoint, info) for the ``@converted`` recipes."""
    from dataclasses import asdict

    from .conversion import ALIGN_CONFIG, aligned_checkpoint, converted_checkpoint, default_convert_config, \
        task_backbone_config

    backbone = task_backbone_config(config, overrides)
    depth = backbone["init_args"].get("depth") or 12
    extra = args.convert_args.split() if args.convert_args else []
    convert_config = args.convert_config or default_convert_config(backbone)
    out = {}
    for r in recipes:
        if r.converted:
            plan = {k: v for k, v in asdict(r.plan(depth)).items() if v not in (None, [], 0, False) or k == "default"}
            out[r.name] = converted_checkpoint(backbone, plan, source, convert_config, args.convert_steps, extra)
            if r.aligned:
                if backbone["class_path"].endswith("VideoViT"):
                    raise ValueError(f"--plans: {r.name!r}: @aligned is for image ViTs; use @converted for video")
                out[r.name] = aligned_checkpoint(backbone, plan, source, out[r.name], args.align_config or ALIGN_CONFIG,
                                                 config, overrides, args.align_steps)
    return out


def run_comparison(args: argparse.Namespace, overrides: list[str]) -> list[dict]:
    """Train every recipe x seed (fresh process each, reused when done), time the trained recipes
    together, and write the report. Returns the per-recipe rows."""
    import torch

    from .inputs import build_run, prepare_default_data, pretrained_weights, uses_pretrained
    from .recipes import parse_recipes
    from .report import aggregate, write_report
    from .speed import measure_speed

    config = Path(args.config)
    if not config.is_file():
        raise FileNotFoundError(f"--config: {config} does not exist")
    seeds = [int(s) for s in str(args.seeds).split(",") if s.strip()] if args.seeds else [args.seed]
    recipes = parse_recipes(args.plans, args.backbones)
    prepare_default_data(config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    weights = pretrained_weights(args.pretrained)
    start = weights if weights and uses_pretrained(config) else None  # video / mm configs train from scratch
    converting = any(r.converted for r in recipes)
    if converting and start is None:
        _check_conversion_teacher(recipes, config)
    if any(r.start == "distilled" for r in recipes) and start is None:
        raise ValueError(f"--plans: @distilled needs pretrained MSA image weights to teach with; {config} has none "
                         "(use @converted, or --pretrained <weights>)")

    # every msa seed's weights are kept when later recipes start from them
    keep_all = any(r.from_msa_run for r in recipes)
    progress = JobProgress(len(recipes) * len(seeds))
    eval_sizes = [int(s) for s in str(args.eval_sizes).split(",") if s.strip()] if args.eval_sizes else []

    def train_seeds(recipe, starts: Optional[list[tuple[str, Optional[str]]]] = None) -> list[dict]:
        """``starts``: per seed, the backbone checkpoint to load and the task weights whose head to load."""
        runs = []
        for i, seed in enumerate(seeds):
            converted, head_from = starts[i] if starts else (None, None)
            # @distilled: the MSA weights the recipe was converted from teach during the fine-tune
            distill = ([f'--model.init_args.distill={{"teacher": "{start}"}}']
                       if recipe.start == "distilled" else [])
            req = dict(recipe=recipe.name, plan_name=recipe.plan_name, backbone_yaml=recipe.backbone_yaml, seed=seed,
                       config=str(config.resolve()), overrides=list(overrides) + distill, pretrained=weights,
                       converted=converted, max_steps=args.max_steps, eval_sizes=eval_sizes,
                       # every seed's weights when other sizes may be evaluated later, or a recipe starts from them
                       save_weights=i == 0 or bool(eval_sizes) or (keep_all and recipe is recipes[0]))
            if head_from:
                req["head_from"] = head_from
            runs.append(_run_or_reuse(req, out / recipe.name / f"seed{seed}", config, args.rerun, progress))
        progress.recipe_done(recipe.name, runs)
        return runs

    # recipes trained from the given weights first: a converted recipe may convert one of them (msa)
    by_recipe = {r.name: train_seeds(r) for r in recipes if r.start == "given"}
    conversions = {}
    if converting:
        # a trained task model as the source: its head comes along (it fits the features conversion imitates)
        head_from = None if start else by_recipe[recipes[0].name][0]["weights"]
        conversions = _conversions(recipes, args, config, overrides, start or head_from)
        by_recipe.update({r.name: train_seeds(r, [(str(conversions[r.name][0]), head_from)] * len(seeds))
                          for r in recipes if r.converted})
    if keep_all:
        from .stages import msa_run_starts

        starts, staged = msa_run_starts(recipes, by_recipe[recipes[0].name], config, overrides,
                                        args.from_msa_convert_config, args.convert_steps,
                                        args.convert_args.split() if args.convert_args else [])
        conversions.update(staged)
        by_recipe.update({r.name: train_seeds(r, starts[r.name]) for r in recipes if r.name in starts})
    runs = [run for r in recipes for run in by_recipe[r.name]]

    print("\n=== speed (interleaved, after warm-up; trained weights of the first seed) ===", flush=True)
    models, dm = {}, None
    for recipe, run in zip(recipes, runs[::len(seeds)]):
        req = json.loads((Path(run["weights"]).parent / "request.json").read_text())
        from .worker import request_overrides

        ov = [o for o in request_overrides(req) if "pretrained=" not in o]
        _, model, dm_r, _ = build_run(config, ov, out / recipe.name / "speed", recipe.plan_name)
        model.load_state_dict(torch.load(run["weights"], map_location="cpu", weights_only=True))
        models[recipe.name] = model.eval()
        dm = dm or dm_r
    speed, small, big = measure_speed(models, dm, args.speed_size, args.speed_batch, args.speed_repeats)

    rows = aggregate(runs, {k: v[1] for k, v in conversions.items()})
    for row in rows:
        row.update(speed[row["plan"]])
    gpu = f"CUDA {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "no GPU"
    header = (f"hydra_dense comparison: {config} | seeds {','.join(map(str, seeds))} | {os.cpu_count()} CPU cores, "
              f"{gpu} | pretrained: {start or 'none'}")
    legend = (f"score = {rows[0]['metric']} (%) on the validation split, mean ± sample std over the seeds (scores: "
              f"each seed); score2 = {rows[0]['metric2']} (%); score_at_S (with --eval-sizes) = the score with "
              f"validation images resized to short side S: the same model on more tokens; train_img_s = training "
              f"images/s (batches only); "
              f"infer_img_s = inference images/s at the evaluation size ({small}); infer_img_s_big / speedup_big = "
              f"whole-model inference at {big or '-'} (speedup vs the first plan); flop_ideal_big = FLOP ratio there "
              f"(FlopCounterMode, SDPA on its math path); peak_train_mem_mb = peak resident memory of the training "
              f"process above its start (CPU; each run in its own process) or CUDA max allocated; gflops_img = "
              f"forward GFLOPs per image at the training crop; convert_* = the one-time MSA -> plan conversion "
              f"(minutes of wall time, mean per-block relative error before -> after on held-out inputs, its "
              f"data).")
    summary = dict(config=str(config), seeds=seeds, pretrained=start, overrides=overrides,
                   conversions={k: v[1] for k, v in conversions.items()})
    text = write_report(rows, runs, out, header, legend, big, summary)
    print("\n" + text)
    print(f"written: {out / 'table.md'}, {out / 'table.csv'}, {out / 'runs.csv'}, {out / 'per_class.md'}, "
          f"{out / 'accuracy_vs_speed.png'}, {out / 'curves.png'}; all on one page: {out / 'report.html'}")
    return rows


def parse_args(argv: Optional[list[str]] = None) -> tuple[argparse.Namespace, list[str]]:
    from .conversion import DEFAULT_CONVERT_CONFIG, VIDEO_CONVERT_CONFIG
    from .inputs import repo_root
    from .stages import TASK_CONVERT_CONFIG

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(repo_root() / DEMO_CONFIG))
    p.add_argument("--plans", help=f"recipes to compare, the first is the reference (see --list-plans); default "
                                   f"{DEMO_PLANS} for the segmentation and detection demos, {VIDEO_DEMO_PLANS} "
                                   f"for the video demo, {DEFAULT_PLANS} for other configs")
    p.add_argument("--list-plans", action="store_true", help="print every accepted plan name, one per line")
    p.add_argument("--backbones", help="comma-separated backbone YAMLs instead of --plans")
    p.add_argument("--pretrained", default="auto", help="auto (DINOv2 ViT-S/14 if available), none, or a path")
    p.add_argument("--max-steps", type=int, default=0, help="override trainer.max_steps")
    p.add_argument("--seed", type=int, default=0, help="the seed of a single-seed comparison")
    p.add_argument("--seeds", default="", help="comma-separated seeds, e.g. 0,1,2: every recipe runs once per seed")
    p.add_argument("--rerun", action="store_true", help="train again even where a finished run can be reused")
    p.add_argument("--out", default="runs/compare")
    p.add_argument("--convert-config", default=None,
                   help=f"conversion config (data, schedule) of @converted recipes; the backbone and plan come from the "
                        f"task config and the recipe. Default {DEFAULT_CONVERT_CONFIG} for image ViTs "
                        f"({DETECTION_CONVERT_CONFIG} for the detection demo), {VIDEO_CONVERT_CONFIG} for video ViTs")
    p.add_argument("--from-msa-convert-config", default=None,
                   help=f"conversion config of @from_msa recipes (default {TASK_CONVERT_CONFIG} for image ViTs: the "
                        f"comparison's own training images, labels unused; {VIDEO_CONVERT_CONFIG} for video ViTs)")
    p.add_argument("--convert-steps", type=int, default=None, help="conversion steps (default: the conversion "
                                                                   "config's trainer.max_steps)")
    p.add_argument("--align-config", default=None,
                   help="stage-2 config of @aligned recipes (whole-network alignment; default "
                        "configs/convert/dinov2_s14_align.yaml); the task's training images join its images")
    p.add_argument("--align-steps", type=int, default=None, help="alignment steps (default: its config's max_steps)")
    p.add_argument("--convert-args", default="", help="extra CLI overrides for the conversion, space separated")
    p.add_argument("--speed-size", default="1024",
                   help="input of the big-input speed column: S or HxW for images, FxHxW for clips (default "
                        "32x224x224 for video); 0 skips it")
    p.add_argument("--eval-sizes", default="",
                   help="also validate every run with its validation images resized to these short sides, e.g. "
                        "224,448: the same model on 4x / 16x the tokens (segmentation)")
    p.add_argument("--speed-batch", type=int, default=8)
    p.add_argument("--speed-repeats", type=int, default=5)
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(argv[:-1]):  # its value starts with "--", which argparse would take for an option
        if a == "--convert-args":
            argv[i: i + 2] = [f"--convert-args={argv[i + 1]}"]
            break
    args, overrides = p.parse_known_args(argv)
    for name in ("seeds", "eval_sizes"):
        value = getattr(args, name)
        bad = [s for s in str(value).split(",") if s.strip() and not s.strip().lstrip("-").isdigit()]
        if bad:
            p.error(f"--{name.replace('_', '-')}: expected comma-separated integers such as 0,1,2, got {value!r} "
                    f"({', '.join(map(repr, bad))} is not an integer)")
    config = Path(args.config).resolve()
    demo = {name: config == (repo_root() / name).resolve()
            for name in (DEMO_CONFIG, VIDEO_DEMO_CONFIG, DETECTION_DEMO_CONFIG)}
    if args.convert_config is None and demo[DETECTION_DEMO_CONFIG]:
        args.convert_config = DETECTION_CONVERT_CONFIG
    if args.plans is None:
        if args.backbones:
            args.plans = DEFAULT_PLANS
        elif demo[VIDEO_DEMO_CONFIG]:
            args.plans = VIDEO_DEMO_PLANS
        elif (demo[DEMO_CONFIG] or demo[DETECTION_DEMO_CONFIG]) and args.pretrained != "none":
            args.plans = DEMO_PLANS
        else:
            args.plans = DEFAULT_PLANS
    return args, overrides


def main(argv: Optional[list[str]] = None) -> int:
    from ..runtime.progress import silence_known_noise

    silence_known_noise()
    args, overrides = parse_args(argv)
    if args.list_plans:
        from .recipes import recipe_names

        print("\n".join(recipe_names()))
        return 0
    bad = [o for o in overrides if not o.startswith("--")]
    if bad:
        print(f"error: unexpected arguments {bad}; overrides look like --trainer.max_steps=10", file=sys.stderr)
        return 2
    run_comparison(args, overrides)
    return 0
