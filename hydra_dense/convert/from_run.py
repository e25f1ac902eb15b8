"""Make a finished MSA run fast: ``hydra-dense-convert --from-run RUN_DIR``.

    hydra-dense-convert --from-run runs/seg/lightning_logs/version_0          # a hydra-dense-train fit run
    hydra-dense-convert --from-run runs/compare/msa/seed0 --plan hybrid6+mean+dwc7 --steps 200

The run's model (segmentation, detection or video: its saved ``config.yaml`` and checkpoint, or a
comparison run's request and weights) is converted into ``--plan`` on the run's own training images,
labels unused (stage 1: each converted block learns its softmax block; ``--align-steps N`` adds
stage 2, the whole network aligned to the run's features), its head kept, and fine-tuned with the
run's config for ``--steps``. The report (``<out>/table.md``, ``report.html``, ``table.csv``) puts
both on the run's validation split: the score, the speed at the run's resolution and at 1024² (a
32x224x224 clip for video), the conversion's error and minutes.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from ..backbones.sizes import configured_depth

__all__ = ["FinishedRun", "find_run", "convert_run", "main", "DEFAULT_PLAN"]

# the recipe the comparison recommends for all-Hydra (docs/results/accuracy.md)
DEFAULT_PLAN = "hydra+mean+dwc7"


@dataclass
class FinishedRun:
    """What a finished run leaves: its config (and CLI overrides), its weights, seed and steps."""

    config: Path
    overrides: list[str]
    weights: Path  # a Lightning checkpoint (``state_dict`` inside) or a task state dict
    seed: int
    steps: int


def find_run(run_dir: Path) -> FinishedRun:
    """The config and weights of a ``hydra-dense-train fit`` run (its log folder or a folder above that
    holds only this run: its ``config.yaml`` and the ``last.ckpt`` / newest ``*.ckpt`` beside it; a
    folder of several runs is refused, naming them) or of a comparison
    run folder (``request.json`` + ``final_weights.pt``). Raises naming what is missing."""
    run_dir = Path(run_dir).expanduser()
    if not run_dir.is_dir():
        raise FileNotFoundError(f"--from-run: {run_dir} is not a folder")
    request, weights = run_dir / "request.json", run_dir / "final_weights.pt"
    if request.is_file():
        if not weights.is_file():
            raise FileNotFoundError(f"--from-run: {run_dir} is a comparison run without final_weights.pt (only the "
                                    "first seed keeps its weights unless the comparison keeps them all)")
        req = json.loads(request.read_text())
        result = run_dir / "result.json"
        steps = json.loads(result.read_text()).get("steps", 0) if result.is_file() else 0
        overrides = list(req.get("overrides", [])) + ([f"--trainer.max_steps={req['max_steps']}"] if req.get("max_steps") else [])
        return FinishedRun(Path(req["config"]), overrides, weights, int(req["seed"]), int(steps))
    configs = sorted(run_dir.rglob("config.yaml"), key=lambda p: p.stat().st_mtime)
    if not configs:
        raise FileNotFoundError(f"--from-run: no config.yaml under {run_dir} (hydra-dense-train saves the run's "
                                "config there, beside its logs)")
    if len(configs) > 1:
        shown = ", ".join(str(c.parent.relative_to(run_dir)) for c in configs[-5:])
        raise ValueError(f"--from-run: {run_dir} holds {len(configs)} runs (a config.yaml in each of {shown}); give "
                         f"the folder of the one to convert")
    config = configs[0]
    checkpoints = sorted(config.parent.rglob("*.ckpt"), key=lambda p: (p.name == "last.ckpt", p.stat().st_mtime))
    if not checkpoints:
        raise FileNotFoundError(f"--from-run: no checkpoint (*.ckpt) under {config.parent}, the folder of the run's "
                                f"config {config.name}")
    import torch
    import yaml

    ckpt = torch.load(checkpoints[-1], map_location="cpu", weights_only=False, mmap=True)
    seed = (yaml.safe_load(config.read_text()) or {}).get("seed_everything")
    return FinishedRun(config, [], checkpoints[-1], int(seed) if isinstance(seed, int) else 0,
                       int(ckpt.get("global_step", 0)))


def _task_state_dict(weights: Path, out: Path) -> Path:
    """The run's task weights as a plain state dict file (what the comparison's runs save)."""
    import torch

    if weights.suffix != ".ckpt":
        return weights
    state = torch.load(weights, map_location="cpu", weights_only=False)["state_dict"]
    path = out / "msa_weights.pt"
    out.mkdir(parents=True, exist_ok=True)
    from ..runtime.atomic_file import atomic_write

    atomic_write(path, lambda fh: torch.save(state, fh))
    return path


def _without_subcommand_keys(config: Path, out: Path) -> Path:
    """A copy of a saved run config without the ``fit`` subcommand's own keys (``ckpt_path``,
    ``weights_only``: ``Trainer.fit``'s arguments), which a config for building the model does not
    take; the config itself when it has none."""
    import inspect

    import yaml
    from lightning import Trainer

    loaded = yaml.safe_load(config.read_text()) or {}
    built_by_the_cli = {"self", "model", "train_dataloaders", "val_dataloaders", "datamodule"}
    fit_keys = (set(inspect.signature(Trainer.fit).parameters) - built_by_the_cli) & set(loaded)
    if not fit_keys:
        return config
    for key in fit_keys:
        loaded.pop(key)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "run_config.yaml"
    path.write_text(yaml.safe_dump(loaded, sort_keys=False))
    return path


def _with_run_data(convert_config: str, run: FinishedRun, out: Path) -> Path:
    """A copy of ``convert_config`` whose ``data:`` is the run's own (after its overrides): a video run
    is converted on its training clips (labels unused; its validation clips measure the conversion)."""
    import yaml

    from ..compare.run_setup import shipped_file
    from .images import task_data_section

    config = yaml.safe_load(shipped_file(convert_config, "--convert-config").read_text())
    config["data"] = task_data_section(run.config, run.overrides)
    out.mkdir(parents=True, exist_ok=True)
    written = out / "convert_config.yaml"
    written.write_text(yaml.safe_dump(config, sort_keys=False))
    return written


def _check_softmax(run: FinishedRun) -> dict:
    """The run's backbone config; raises unless every block of its plan is softmax attention."""
    from ..attention import AttentionPlan
    from ..compare.conversion import task_backbone_config

    backbone = task_backbone_config(run.config, run.overrides)
    depth = configured_depth(backbone["init_args"])
    plan = AttentionPlan.coerce(backbone["init_args"].get("plan"))
    kinds = set(plan.resolve(depth))
    if kinds != {"msa"}:
        raise ValueError(f"--from-run: the run ({run.config}) already runs {plan.describe(depth)}; conversion starts "
                         "from a softmax (msa) model")
    return backbone


def convert_run(run: FinishedRun, out: Path, plan_name: str, steps: Optional[int], convert_config: Optional[str],
                convert_steps: Optional[int], align_steps: int, align_config: Optional[str], speed_size: str,
                rerun: bool = False) -> list[dict]:
    """Convert ``run`` into ``plan_name``, fine-tune, time both, and write the report under ``out``.
    Returns the report's rows (the run's model first)."""
    from ..compare.cli import parse_args
    from ..compare.conversion import ALIGN_CONFIG, aligned_checkpoint, converted_checkpoint
    from ..compare.from_msa import task_convert_config
    from ..compare.job import prepare_job
    from ..compare.runs import run_key
    from ..compare.worker import evaluate_given

    with tempfile.TemporaryDirectory() as scratch:  # checked before anything is written under out
        _check_softmax(replace(run, config=_without_subcommand_keys(run.config, Path(scratch))))
    run = replace(run, config=_without_subcommand_keys(run.config, out))
    backbone = _check_softmax(run)
    recipe_name = f"{plan_name}@from_msa"
    args, overrides = parse_args(["--config", str(run.config), "--plans", f"msa,{recipe_name}", "--seeds",
                                  str(run.seed), "--pretrained", "none", "--out", str(out), "--speed-size", speed_size,
                                  "--max-steps", str(steps or 0), *(["--rerun"] if rerun else []), *run.overrides])
    job = prepare_job(args, overrides)
    msa, converted = job.recipes
    weights = _task_state_dict(run.weights, out / "msa" / f"seed{run.seed}")

    # the run's own model, validated as it is: the first row
    req = dict(recipe=msa.name, plan_name="msa", backbone_yaml=None, seed=run.seed, config=str(run.config.resolve()),
               overrides=overrides, pretrained=None, converted=None, max_steps=None, eval_sizes=[], save_weights=False)
    req["key"] = run_key(req, run.config)
    print(f"[from-run] validating the run's model ({run.weights})", flush=True)
    job.progress.start(msa.name, run.seed)
    given = evaluate_given(req, out / msa.name / f"seed{run.seed}", str(weights), run.steps)
    job.progress.finish(msa.name, run.seed, given, reused=False)
    job.by_recipe[msa.name], job.requests[msa.name] = [given], [req]

    # stage 1 (and 2) on the run's training images, labels unused; then the fine-tune, head kept
    depth = configured_depth(backbone["init_args"])
    plan = converted.plan_fields(depth)
    if backbone["class_path"].endswith("VideoViT"):  # the run's own clips: its data module, as it trained
        task_data = []
        convert_config = convert_config or str(_with_run_data(task_convert_config(backbone), run, out))
    else:  # the run's own training images, read through its data module's file list
        task_data = [f"--data.init_args.task_config={run.config.resolve()}",
                     f"--data.init_args.task_overrides={json.dumps(list(overrides))}"]
        convert_config = convert_config or task_convert_config(backbone)
    stage = converted_checkpoint(backbone, plan, str(weights), convert_config, convert_steps, task_data)
    if align_steps:
        stage = aligned_checkpoint(backbone, plan, str(weights), stage, align_config or ALIGN_CONFIG, run.config,
                                   overrides, align_steps)
    job.conversions[converted.name] = stage
    job.train(converted, [(str(stage[0]), str(weights))])
    return job.report(*job.speed())


def main(argv: Optional[list[str]] = None) -> int:
    from ..compare.conversion import ALIGN_CONFIG

    p = argparse.ArgumentParser(prog="hydra-dense-convert", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from-run", required=True, metavar="RUN_DIR", help="the finished MSA run's folder")
    p.add_argument("--plan", default=DEFAULT_PLAN, help=f"the Hydra plan to convert into (default {DEFAULT_PLAN}; "
                                                        "hybrid6+mean+dwc7 keeps more accuracy at less speed)")
    p.add_argument("--steps", type=int, default=None, help="fine-tune steps after the conversion (default: the "
                                                           "run's trainer.max_steps)")
    p.add_argument("--convert-config", default=None, help="conversion config (default: the run's training images "
                                                          "for image ViTs; for video, the schedule of "
                                                          "configs/convert/video_demo_hydra_dwc3.yaml on the run's "
                                                          "clips)")
    p.add_argument("--convert-steps", type=int, default=None, help="stage-1 steps (default: the config's, 600)")
    p.add_argument("--align-steps", type=int, default=0, help="stage-2 (whole-network alignment) steps; 0 skips it")
    p.add_argument("--align-config", default=None, help=f"stage-2 config (default {ALIGN_CONFIG}); the run's "
                                                        "training images join its images")
    p.add_argument("--speed-size", default="1024", help="the big input of the speed column (S, HxW or FxHxW)")
    p.add_argument("--out", default=None, help="report folder (default: <RUN_DIR>/to_<plan>)")
    p.add_argument("--rerun", action="store_true", help="fine-tune again even where a finished run can be reused")
    args = p.parse_args(argv)
    run = find_run(Path(args.from_run))
    out = Path(args.out) if args.out else Path(args.from_run) / f"to_{args.plan}"
    convert_run(run, out, args.plan, args.steps, args.convert_config, args.convert_steps, args.align_steps,
                args.align_config, args.speed_size, args.rerun)
    return 0


if __name__ == "__main__":
    sys.exit(main())
