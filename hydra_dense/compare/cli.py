"""The comparison job's command line (``tools/compare.py``, ``hydra-dense-compare``): options, the
demos' default recipes, and :func:`main`. The job's text is the package's docstring."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

__all__ = ["main", "entry", "parse_args", "DEMO_CONFIG", "DEFAULT_PLANS", "DEMO_PLANS", "VIDEO_DEMO_CONFIG",
           "VIDEO_DEMO_PLANS", "DETECTION_DEMO_CONFIG", "DETECTION_CONVERT_CONFIG"]

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


def parse_args(argv: Optional[list[str]] = None) -> tuple[argparse.Namespace, list[str]]:
    from .conversion import DEFAULT_CONVERT_CONFIG, VIDEO_CONVERT_CONFIG
    from .run_setup import repo_root
    from .from_msa import TASK_CONVERT_CONFIG

    from . import __doc__ as job_text

    p = argparse.ArgumentParser(description=job_text, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    from .job import run_comparison

    run_comparison(args, overrides)
    return 0


def entry(argv: Optional[list[str]] = None) -> int:
    """``hydra-dense-compare`` / ``tools/compare.py``: :func:`main`, refusing plainly
    (:mod:`hydra_dense.runtime.refusal`)."""
    from ..runtime.refusal import plain_refusals

    return plain_refusals(main)(argv)
