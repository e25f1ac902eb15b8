"""Make a finished MSA run fast: ``hydra-dense-convert --from-run RUN_DIR``.

    hydra-dense-convert --from-run runs/seg/lightning_logs/version_0          # a hydra-dense-train fit run
    hydra-dense-convert --from-run runs/compare/msa/seed0 --plan hybrid6+mean+dwc7 --steps 200

The run's model (segmentation, detection or video: its saved ``config.yaml`` and checkpoint, or a
comparison run's request and weights) is converted into ``--plan`` on the run's own training images,
labels unused (stage 1: each converted block learns its softmax block; ``--align-steps N`` adds
stage 2, the whole network aligned to the run's features), its head kept, and fine-tuned with the
run's config for ``--steps``. The same run fine-tuned again for the same steps without conversion
(``msa@continued``) is the control: both have then seen the same labelled steps. The report
(``<out>/table.md``, ``report.html``, ``table.csv``) puts the three on the run's validation split:
the score, the speed at the run's resolution and at 1024² (a 32x224x224 clip for video), the
conversion's error and minutes.
"""
from __future__ import annotations

import argparse
import inspect
import json
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

import torch
import yaml
from lightning import Trainer

from ..attention import AttentionPlan
from ..backbones.sizes import configured_depth
from ..conversion.cache import (ALIGN_CONFIG, aligned_checkpoint, convert_config_for, converted_checkpoint,
                                  is_video_backbone, task_backbone_config, task_data_arguments)
from .recipes import CONTINUED, FROM_MSA, parse_recipes
from .request import RunRequest, RunStart
from .runs import run_folder
from .worker import evaluate_given
from ..conversion.images import task_data_section
from ..runtime.atomic_file import atomic_torch_save, atomic_write_text
from ..runtime.shipped import shipped_file
from .job import ComparisonJob, prepare_job
from .options import ComparisonOptions

__all__ = ["FinishedRun", "FromRunOptions", "find_run", "convert_run", "main", "DEFAULT_PLAN"]

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


@dataclass
class FromRunOptions:
    """What ``--from-run`` does with a run: the plan it converts into, the fine-tune's steps (None:
    the run's own), the conversion's config and steps, stage 2's steps (0: none) and config, the big
    speed input, and whether to train again what is already done."""

    out: Path
    plan: str = DEFAULT_PLAN
    steps: Optional[int] = None
    convert_config: Optional[str] = None
    convert_steps: Optional[int] = None
    align_steps: int = 0
    align_config: Optional[str] = None
    speed_size: str = "1024"
    rerun: bool = False


def find_run(run_dir: Path) -> FinishedRun:
    """The config and weights of a ``hydra-dense-train fit`` run (its log folder or a folder above that
    holds only this run: its ``config.yaml`` and the ``last.ckpt`` / newest ``*.ckpt`` beside it; a
    folder of several runs is refused, naming them) or of a comparison run folder (``request.json`` +
    ``final_weights.pt``). Raises naming what is missing."""
    run_dir = Path(run_dir).expanduser()
    if not run_dir.is_dir():
        raise FileNotFoundError(f"--from-run: {run_dir} is not a folder")
    if (run_dir / "request.json").is_file():
        return _comparison_run(run_dir)
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
    ckpt = torch.load(checkpoints[-1], map_location="cpu", weights_only=False, mmap=True)
    saved = yaml.safe_load(config.read_text()) or {}
    seed, step = saved.get("seed_everything"), int(ckpt.get("global_step", 0))
    max_steps = ((saved.get("trainer") or {}).get("max_steps") or -1) if isinstance(saved.get("trainer"), dict) else -1
    if isinstance(max_steps, int) and 0 < max_steps and step < max_steps:
        raise ValueError(f"--from-run: {run_dir} is unfinished: its newest checkpoint {checkpoints[-1].name} is at step "
                         f"{step} of trainer.max_steps {max_steps} (still training, or stopped early); let it finish "
                         f"(fit again with --ckpt_path last) before converting it")
    return FinishedRun(config, [], checkpoints[-1], int(seed) if isinstance(seed, int) else 0, step)


def _comparison_run(run_dir: Path) -> FinishedRun:
    weights = run_dir / "final_weights.pt"
    if not weights.is_file():
        raise FileNotFoundError(f"--from-run: {run_dir} is a comparison run without final_weights.pt (only the "
                                "first seed keeps its weights unless the comparison keeps them all)")
    result = run_dir / "result.json"
    if not result.is_file():
        raise ValueError(f"--from-run: {run_dir} is unfinished: it has no result.json yet (its comparison is still "
                         f"training it, or was stopped; run that comparison again to finish it)")
    req = RunRequest.read(run_dir / "request.json")
    steps = json.loads(result.read_text()).get("steps", 0)
    overrides = list(req.overrides) + ([f"--trainer.max_steps={req.max_steps}"] if req.max_steps else [])
    return FinishedRun(Path(req.config), overrides, weights, int(req.seed), int(steps))


def _task_state_dict(weights: Path, out: Path) -> Path:
    """The run's task weights as a plain state dict file (what the comparison's runs save)."""
    if weights.suffix != ".ckpt":
        return weights
    state = torch.load(weights, map_location="cpu", weights_only=False)["state_dict"]
    return atomic_torch_save(state, out / "msa_weights.pt")


def _without_subcommand_keys(config: Path, out: Path) -> Path:
    """A copy of a saved run config without the ``fit`` subcommand's own keys (``ckpt_path``,
    ``weights_only``: ``Trainer.fit``'s arguments), which a config for building the model does not
    take; the config itself when it has none."""
    loaded = yaml.safe_load(config.read_text()) or {}
    built_by_the_cli = {"self", "model", "train_dataloaders", "val_dataloaders", "datamodule"}
    fit_keys = (set(inspect.signature(Trainer.fit).parameters) - built_by_the_cli) & set(loaded)
    if not fit_keys:
        return config
    for key in fit_keys:
        loaded.pop(key)
    return atomic_write_text(out / "run_config.yaml", yaml.safe_dump(loaded, sort_keys=False))


def _with_run_data(convert_config: str, run: FinishedRun, out: Path) -> Path:
    """A copy of ``convert_config`` whose ``data:`` is the run's own (after its overrides): a video run
    is converted on its training clips (labels unused; its validation clips measure the conversion)."""
    config = yaml.safe_load(shipped_file(convert_config, "--convert-config").read_text())
    config["data"] = task_data_section(run.config, run.overrides)
    return atomic_write_text(out / "convert_config.yaml", yaml.safe_dump(config, sort_keys=False))


def _check_softmax(run: FinishedRun) -> dict:
    """The run's backbone config; raises unless every block of its plan is softmax attention."""
    backbone = task_backbone_config(run.config, run.overrides)
    depth = configured_depth(backbone["init_args"])
    plan = AttentionPlan.coerce(backbone["init_args"].get("plan"))
    if set(plan.resolve(depth)) != {"msa"}:
        raise ValueError(f"--from-run: the run ({run.config}) already runs {plan.describe(depth)}; conversion starts "
                         "from a softmax (msa) model")
    return backbone


def _started_from(backbone: dict, run: FinishedRun) -> str:
    """What the table's header says the run started from: its backbone's own ``pretrained`` weights."""
    pretrained = (backbone.get("init_args") or {}).get("pretrained")
    first = f"{pretrained} (the run's own start)" if pretrained else "no pretrained weights (the run's own start)"
    return f"{first}; the run itself: {run.weights}"


def _validate_the_run(job: ComparisonJob, run: FinishedRun, weights: Path, out: Path) -> None:
    """The run's own model, validated as it is: the first row."""
    msa = job.recipes[0]
    req = RunRequest(recipe=msa.name, seed=run.seed, config=str(run.config.resolve()), overrides=job.options.overrides,
                     plan_name="msa", max_steps=None)
    req.key = req.identity()
    print(f"[from-run] validating the run's model ({run.weights})", flush=True)
    job.progress.start(msa.name, run.seed)
    given = evaluate_given(req, run_folder(out, msa.name, run.seed), str(weights), run.steps)
    job.progress.finish(msa.name, run.seed, given, reused=False)
    job.add_runs(msa, [given], [req])


def _convert(backbone: dict, run: FinishedRun, weights: Path, options: FromRunOptions, plan: dict,
             overrides: list[str]) -> tuple[Path, dict]:
    """Stage 1 (and 2) on the run's training images (a video run: its clips), labels unused."""
    if is_video_backbone(backbone):
        task_data: list[str] = []
        convert_config = options.convert_config or str(_with_run_data(convert_config_for(backbone), run, options.out))
    else:
        task_data = task_data_arguments(run.config, overrides)
        convert_config = options.convert_config or convert_config_for(backbone, images="task")
    stage = converted_checkpoint(backbone, plan, str(weights), convert_config, options.convert_steps, task_data)
    if options.align_steps:
        stage = aligned_checkpoint(backbone, plan, str(weights), stage, options.align_config or ALIGN_CONFIG,
                                   run.config, overrides, options.align_steps)
    return stage


def convert_run(run: FinishedRun, options: FromRunOptions) -> list[dict]:
    """Convert ``run`` into ``options.plan``, fine-tune, fine-tune the run itself again for the same
    steps (the control), time the three, and write the report under ``options.out``. Returns the
    report's rows (the run's model first)."""
    with tempfile.TemporaryDirectory() as scratch:  # checked before anything is written under out
        checked = _check_softmax(replace(run, config=_without_subcommand_keys(run.config, Path(scratch))))
    parse_recipes(f"msa,{options.plan}{FROM_MSA}", depth=configured_depth(checked["init_args"]))  # names a bad --plan
    run = replace(run, config=_without_subcommand_keys(run.config, options.out))
    backbone = _check_softmax(run)
    job = prepare_job(ComparisonOptions(
        config=run.config, plans=f"msa,{options.plan}{FROM_MSA},msa{CONTINUED}", pretrained="none", seeds=[run.seed],
        max_steps=options.steps or 0, rerun=options.rerun, out=options.out, speed_size=options.speed_size,
        overrides=run.overrides, start_note=_started_from(backbone, run)))
    _, converted, continued = job.recipes
    weights = _task_state_dict(run.weights, run_folder(options.out, "msa", run.seed))
    _validate_the_run(job, run, weights, options.out)
    stage = _convert(backbone, run, weights, options, converted.plan_fields(configured_depth(backbone["init_args"])),
                     job.options.overrides)
    job.add_conversion(converted, stage)
    job.train(converted, [RunStart(str(stage[0]), str(weights))])
    job.train(continued, [RunStart(str(weights), str(weights))])
    return job.report(*job.speed())


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="hydra-dense-convert", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from-run", required=True, metavar="RUN_DIR", help="the finished MSA run's folder")
    p.add_argument("--plan", default=DEFAULT_PLAN, help=f"the Hydra plan to convert into (default {DEFAULT_PLAN}; "
                                                        "hybrid6+mean+dwc7 keeps more accuracy at less speed)")
    p.add_argument("--steps", type=int, default=None, help="fine-tune steps after the conversion, and of the control "
                                                           "(default: the run's trainer.max_steps)")
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
    convert_run(run, FromRunOptions(out, args.plan, args.steps, args.convert_config, args.convert_steps,
                                    args.align_steps, args.align_config, args.speed_size, args.rerun))
    return 0
