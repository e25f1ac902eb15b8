"""Recipes that start from the comparison's own fine-tuned ``msa`` run of the same seed.

``<plan>@from_msa``: that run's backbone is converted into ``<plan>`` (each converted block learns
to reproduce the fine-tuned softmax block on the task's training images, labels never read), its
task head kept, then the whole model is fine-tuned with the task's schedule. ``msa@continued``:
the same second fine-tune of the msa run without conversion, the control with the same labelled
steps. One conversion per seed, so the spread over seeds includes the msa runs' own.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Optional

import yaml

from ..backbones.sizes import configured_depth
from ..conversion.cache import convert_config_for, converted_checkpoint, task_backbone_config, task_data_arguments
from .recipes import Recipe
from .request import RunStart
from ..runtime.shipped import shipped_file

__all__ = ["msa_run_starts"]


def _reads_task_images(convert_config: str) -> bool:
    """Whether a conversion config's data are a task config's training images (``task_config:``)."""
    path = shipped_file(convert_config, "--from-msa-convert-config")
    data = (yaml.safe_load(path.read_text()) or {}).get("data") or {}
    return "task_config" in (data.get("init_args") or {})


def _summary(infos: list[dict]) -> dict:
    """One conversion info for a recipe converted once per seed: means over the seeds."""
    def mean(key: str) -> Optional[float]:
        values = [i.get(key) for i in infos]
        return statistics.fmean(values) if all(v is not None for v in values) else None

    return dict(infos[0], minutes=mean("minutes"), error_before=mean("error_before"), error_after=mean("error_after"),
                feature_error_before=mean("feature_error_before"), feature_error_after=mean("feature_error_after"),
                data=f"{infos[0]['data']}; teacher: the msa run of each seed ({len(infos)} conversions, means shown)",
                per_seed=infos)


def msa_run_starts(recipes: list[Recipe], msa_runs: list[dict], config: Path, overrides: list[str],
                   convert_config: Optional[str], steps: Optional[int],
                   extra: list[str]) -> tuple[dict[str, list[RunStart]], dict[str, tuple[Path, dict]]]:
    """For every ``@from_msa`` / ``@continued`` recipe: per seed, where its backbone and head start;
    and for ``@from_msa`` the conversion info (``converted_checkpoint``'s, averaged over seeds).

    ``msa_runs``: the ``msa`` recipe's results, one per seed in order, each with its ``weights``.
    """
    missing = [r["seed"] for r in msa_runs if not r.get("weights") or not Path(r["weights"]).is_file()]
    if missing:
        raise FileNotFoundError(f"@from_msa / @continued: the msa runs of seeds {missing} saved no weights")
    backbone = task_backbone_config(config, overrides)
    depth = configured_depth(backbone["init_args"])
    conv_cfg = convert_config or convert_config_for(backbone, images="task")
    if _reads_task_images(conv_cfg):  # its images: the comparison's own task, as that run saw it
        extra = [*extra, *task_data_arguments(config, overrides)]
    starts: dict[str, list[RunStart]] = {}
    conversions: dict[str, tuple[Path, dict]] = {}
    for recipe in recipes:
        if recipe.start == "continued":
            starts[recipe.name] = [RunStart(r["weights"], r["weights"]) for r in msa_runs]
        elif recipe.start == "from_msa":
            plan = recipe.plan_fields(depth)
            done = [converted_checkpoint(backbone, plan, r["weights"], conv_cfg, steps, extra) for r in msa_runs]
            starts[recipe.name] = [RunStart(str(ckpt), r["weights"]) for (ckpt, _), r in zip(done, msa_runs)]
            conversions[recipe.name] = (done[0][0], _summary([info for _, info in done]))
    return starts, conversions

