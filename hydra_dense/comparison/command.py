"""The main job: train and evaluate MSA, Hydra, hybrid, local-mixing and converted backbones the same
way, over several seeds, side by side.

    python -m hydra_dense.comparison.command                    # = tools/compare.py, ./run.sh demo: the embedded demo
    python tools/compare.py --plans msa,hydra,hydra+dwc3,hydra+dwc3@converted --seeds 0,1,2
    python tools/compare.py --config configs/segmentation/demo_digits_large.yaml   # the large-token track
    python tools/compare.py --config configs/segmentation/ade20k_upernet_vit_b16.yaml \\
        --plans msa,hydra,hybrid2 --data.init_args.root=/data/ADEChallengeData2016
    python tools/compare.py --list-plans                      # every accepted plan name

Every recipe gets the same config, data and schedule; only the backbone's attention plan changes
(``--plans``; ``+dwc3`` adds local mixing, ``local+dwc7`` is the local branch alone, ``@converted``
converts the MSA weights first: the pretrained ones, or for a task trained from scratch the
comparison's own ``msa`` run; ``@aligned`` adds whole-network alignment to the MSA features after
that conversion; ``@distilled`` fine-tunes that conversion with the MSA weights' backbone features
as an extra loss; ``@from_msa`` converts the comparison's fine-tuned ``msa`` run of each seed and
fine-tunes again, ``msa@continued`` fine-tunes that run again without conversion; ``+mean``
averages Hydra's ``kv`` over tokens, ``+gain`` learns a per-channel gain on its global term;
``--eval-sizes 224,448`` validates every run again at those sizes) or the backbone file
(``--backbones a.yaml,b.yaml``). Each (recipe, seed) trains in a fresh process, so its peak memory
is its own; a finished run is reused when exactly the same run is asked for again. Extra
``--key=value`` arguments are LightningCLI overrides. Outputs in ``--out``: ``table.md`` /
``table.csv`` (mean ± std over seeds; ``global_cost``: what zeroing the global term costs),
``runs.csv`` (every seed), ``per_class.md``, ``accuracy_vs_speed.png`` (Pareto front with error
bars), ``curves.png``, ``report.html``, ``summary.json``, and each run's folder.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Optional, Sequence

import yaml

from ..conversion.cache import ALIGN_CONFIG, DEFAULT_CONVERT_CONFIG, TASK_CONVERT_CONFIG, VIDEO_CONVERT_CONFIG
from ..bench.input_sizes import parse_size
from ..data.demo_context import distance_folder
from .recipes import recipe_names
from ..runtime.class_path import names_subclass_of
from ..runtime.progress import silence_known_noise
from ..runtime.refusal import plain_refusals
from ..runtime.shipped import find_shipped
from ..tasks import SegmentationTask
from .job import run_comparison
from .demo_defaults import (CONTEXT_PLANS, CONVERTIBLE_PLANS, DEFAULT_PLANS, DEMO_CONFIG, DEMO_DEFAULTS, DEMO_PLANS,
                            DETECTION_CONVERT_CONFIG, DETECTION_DEMO_CONFIG, DINOV2_BACKBONE_FILE, LARGE_DEMO_CONFIG,
                            LARGE_DEMO_PLANS, VIDEO_DEMO_CONFIG, VIDEO_DEMO_PLANS)
from .options import ComparisonOptions
from .reading import TOLERANCE

__all__ = ["main", "entry", "parse_args", "ComparisonOptions", "DEMO_CONFIG", "DEFAULT_PLANS", "DEMO_PLANS",
           "LARGE_DEMO_CONFIG", "LARGE_DEMO_PLANS", "CONTEXT_PLANS", "CONVERTIBLE_PLANS", "VIDEO_DEMO_CONFIG", "VIDEO_DEMO_PLANS", "DETECTION_DEMO_CONFIG",
           "DETECTION_CONVERT_CONFIG"]

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=DEMO_CONFIG)
    p.add_argument("--plans", help=f"recipes to compare, the first is the reference (see --list-plans); default "
                                   f"{DEMO_PLANS} for the segmentation and detection demos, {LARGE_DEMO_PLANS} for the "
                                   f"large-token track, {CONTEXT_PLANS} for the context tracks, {CONVERTIBLE_PLANS} for other segmentation configs on the "
                                   f"DINOv2 ViT-S/14 backbone, {VIDEO_DEMO_PLANS} for the video demo, {DEFAULT_PLANS} for "
                                   f"other configs")
    p.add_argument("--list-plans", action="store_true", help="print every accepted plan name, one per line")
    p.add_argument("--backbones", help="comma-separated backbone YAMLs instead of --plans")
    p.add_argument("--pretrained", default="auto", help="auto (DINOv2 ViT-S/14 if available), none, or a path")
    p.add_argument("--max-steps", type=int, default=None, help="override trainer.max_steps (default: the config's)")
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
                   help=f"stage-2 config of @aligned recipes (whole-network alignment; default {ALIGN_CONFIG}); the "
                        f"task's training images join its images")
    p.add_argument("--align-steps", type=int, default=None, help="alignment steps (default: its config's max_steps)")
    p.add_argument("--convert-args", default="", help="extra CLI overrides for the conversion, split as a shell would (quote a value with spaces)")
    p.add_argument("--speed-size", default="1024",
                   help="input of the big-input speed column: S or HxW for images, FxHxW for clips (default "
                        "32x224x224 for video); 0 skips it")
    p.add_argument("--eval-sizes", default="",
                   help="also validate every run with its validation images resized to these short sides, e.g. "
                        "224,448: the same model on 4x / 16x the tokens (segmentation)")
    p.add_argument("--speed-batch", type=int, default=8)
    p.add_argument("--speed-repeats", type=int, default=5)
    p.add_argument("--reading-tolerance", type=float, default=TOLERANCE,
                   help="points of the score a faster plan may lose against MSA and still be recommended under the "
                        "table, and the least gap or cost the reading counts (besides twice the seeds' spread; "
                        f"default {TOLERANCE})")
    return p


def _integers(p: argparse.ArgumentParser, option: str, value: str) -> list[int]:
    bad = [s for s in str(value).split(",") if s.strip() and not s.strip().lstrip("-").isdigit()]
    if bad:
        p.error(f"{option}: expected comma-separated integers such as 0,1,2, got {value!r} "
                f"({', '.join(map(repr, bad))} is not an integer)")
    return [int(s) for s in str(value).split(",") if s.strip()]


def _tolerance(p: argparse.ArgumentParser, value: float) -> float:
    if not value >= 0:
        p.error(f"--reading-tolerance: expected points >= 0 (how much accuracy may be given up for speed), got {value}")
    return value


def _default_plans(config: str, backbones: Optional[str], pretrained: str,
                   overrides: Sequence[str] = ()) -> tuple[str, Optional[str]]:
    """The recipes (and conversion config) a config gets when ``--plans`` is not given: each demo's
    own (:data:`~hydra_dense.comparison.demo_defaults.DEMO_DEFAULTS`); a segmentation config on the
    DINOv2 backbone gets the context tracks' rows when its data is a context set (it ships each
    pixel's distance to its cue), the recipe and its control otherwise; ``DEFAULT_PLANS`` elsewhere."""
    demo = next((d for name, d in DEMO_DEFAULTS.items()
                 if (shipped := find_shipped(name)) is not None and Path(config).resolve() == shipped.resolve()), None)
    convert = demo.convert_config if demo else None
    if backbones:
        return DEFAULT_PLANS, convert
    if demo is not None and (pretrained != "none" or not demo.pretrained_only):
        return demo.plans, convert
    if pretrained != "none" and _segments_on_the_dinov2_backbone(Path(config)):
        root = _data_root(Path(config), overrides)
        is_context_set = root is not None and distance_folder(root).is_dir()
        return (CONTEXT_PLANS if is_context_set else CONVERTIBLE_PLANS), convert
    return DEFAULT_PLANS, convert


def _data_root(config: Path, overrides: Sequence[str]) -> Optional[Path]:
    """The data root a config's runs read (``--data.init_args.root=`` on the command line wins), or
    None where the config gives none or cannot be read."""
    given = [o.split("=", 1)[1] for o in overrides if o.startswith("--data.init_args.root=")]
    if given:
        return Path(given[-1]).expanduser()
    init = _section(config, "data").get("init_args")
    root = init.get("root") if isinstance(init, dict) else None
    return Path(root).expanduser() if isinstance(root, str) else None


def _section(config: Path, name: str) -> dict:
    """One top-level mapping of a config file (``model``, ``data``); empty when the file cannot be
    read or has none (the job names the file's fault later)."""
    try:
        section = (yaml.safe_load(config.read_text()) or {}).get(name) or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return {}
    return section if isinstance(section, dict) else {}


def _segments_on_the_dinov2_backbone(config: Path) -> bool:
    """A segmentation config whose backbone file is the DINOv2 ViT-S/14 one (or a config that cannot
    be read: the job names its fault later)."""
    model = _section(config, "model")
    init = model.get("init_args")
    backbone = init.get("backbone") if isinstance(init, dict) else None
    return names_subclass_of(model.get("class_path"), SegmentationTask) and isinstance(backbone, str) \
        and Path(backbone).name == DINOV2_BACKBONE_FILE


def _convert_arguments(p: argparse.ArgumentParser, text: str) -> list[str]:
    """``--convert-args`` split as a shell splits it, so a quoted value (a JSON list, a path with
    spaces) stays one argument."""
    try:
        return shlex.split(text)
    except ValueError as err:
        p.error(f"--convert-args {text!r}: {err}")
        raise


def parse_args(argv: Optional[list[str]] = None) -> tuple[ComparisonOptions, bool]:
    """The options of a comparison, and whether ``--list-plans`` was asked for."""
    p = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(argv[:-1]):  # its value starts with "--", which argparse would take for an option
        if a == "--convert-args":
            argv[i: i + 2] = [f"--convert-args={argv[i + 1]}"]
            break
    args, overrides = p.parse_known_args(argv)
    bad = [o for o in overrides if not o.startswith("--")]
    if bad:
        p.error(f"unexpected arguments {bad}; overrides look like --trainer.max_steps=10")
    seeds = _integers(p, "--seeds", args.seeds) or [args.seed]
    for option, value in (("--max-steps", args.max_steps), ("--convert-steps", args.convert_steps),
                          ("--align-steps", args.align_steps)):
        if value is not None and value < 1:
            p.error(f"{option} {value}: give 1 or more steps (leave it out to keep the config's)")
    if str(args.speed_size) not in ("0", ""):
        try:
            parse_size(args.speed_size)
        except ValueError as err:
            p.error(f"--speed-size: {err}")
    config = find_shipped(args.config) or Path(args.config)
    plans, convert = _default_plans(str(config), args.backbones, args.pretrained, overrides)
    options = ComparisonOptions(
        config=config, plans=args.plans or plans, backbones=args.backbones, pretrained=args.pretrained,
        max_steps=args.max_steps or 0, seeds=seeds, rerun=args.rerun, out=Path(args.out),
        convert_config=args.convert_config or convert, from_msa_convert_config=args.from_msa_convert_config,
        convert_steps=args.convert_steps, align_config=args.align_config, align_steps=args.align_steps,
        convert_args=_convert_arguments(p, args.convert_args), speed_size=args.speed_size,
        eval_sizes=_integers(p, "--eval-sizes", args.eval_sizes), speed_batch=args.speed_batch,
        speed_repeats=args.speed_repeats, reading_tolerance=_tolerance(p, args.reading_tolerance), overrides=overrides)
    return options, args.list_plans


def main(argv: Optional[list[str]] = None) -> int:
    silence_known_noise()
    options, list_plans = parse_args(argv)
    if list_plans:
        print("\n".join(recipe_names()))
        return 0
    run_comparison(options)
    return 0


# ``hydra-dense-compare`` / ``tools/compare.py``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main, on_interrupt="the same command goes on: finished runs are reused and an "
                                         "interrupted one resumes from its last checkpoint")


if __name__ == "__main__":
    sys.exit(entry())
