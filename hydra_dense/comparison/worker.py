"""One comparison run (a recipe with one seed), in its own process so that its peak memory is its
own: ``python -m hydra_dense.comparison.worker <run_dir>/request.json`` writes ``<run_dir>/result.json``
(``--evaluate``: only add the ``eval_sizes`` scores a finished run lacks, from its saved weights;
``--resume``: go on from the ``last.ckpt`` a killed attempt of the same request left).

The request (:class:`~hydra_dense.comparison.request.RunRequest`) holds the task config, the CLI
overrides, the recipe's plan (or backbone YAML), the seed, and the weights to start from (the
pretrained MSA weights, or a converted checkpoint; for a backbone converted from a trained task
model, that model's head too).
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import torch

from ..attention.muting import global_term_blocks, muted
from ..bench.flops import count_flops
from ..bench.memory import peak_memory_mb
from ..bench.throughput import TrainClock
from ..heads.segmentation import global_pool_muted
from ..tasks.class_names import class_names
from ..runtime.atomic_file import atomic_torch_save, atomic_write_text
from ..runtime.progress import StepProgress
from ..runtime.refusal import plain_refusals
from .near_far import near_far_scores, near_far_table
from .request import RunRequest
from .run_setup import build_run, uses_pretrained

__all__ = ["run_one", "interrupted_checkpoint", "evaluate_given", "request_overrides", "load_task_head", "scores_at_sizes", "evaluate_saved",
           "score_global_zeroed", "score_head_pool_zeroed", "QUIET"]


# one line every 50 steps in the job's log instead of a progress bar (an endless line in a file)
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]


def request_overrides(req: RunRequest) -> list[str]:
    """The CLI overrides of a request: the user's, the seed, the backbone file, the start weights."""
    return req.cli_overrides(uses_pretrained(Path(req.config)))


def load_task_head(model, path: str) -> list[str]:
    """Load every non-backbone tensor (head, norms, decoder) of the task weights at ``path`` into
    ``model``; the backbone is left as it is. Returns the loaded names; raises naming what is missing."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    # where the task keeps its ViT: ``backbone.`` (segmentation, video), ``detector.backbone.vit.`` (detection)
    backbone = next(name + "." for name, module in model.named_modules() if module is model.backbone)
    head = {k: v for k, v in state.items() if not k.startswith(backbone)}
    wanted = [k for k in model.state_dict() if not k.startswith(backbone)]
    missing = [k for k in wanted if k not in head]
    if missing:
        raise KeyError(f"{path}: the task weights lack {', '.join(missing[:6])}; they are not this task's model")
    model.load_state_dict({k: head[k] for k in wanted}, strict=False)
    return wanted


def scores_at_sizes(model, dm, trainer, sizes: list[int], metric: str) -> dict[str, float]:
    """The validation ``metric`` (%) with validation images resized to each short side in ``sizes``:
    the same model on more (or fewer) tokens than it was trained on."""
    if not sizes:
        return {}
    if "val_size" not in dm.hparams:
        raise ValueError(f"--eval-sizes: {type(dm).__name__} has no val_size to resize validation inputs with; "
                         "evaluating at other sizes works for segmentation data modules")
    original, scores = dm.hparams.val_size, {}
    try:
        for size in sizes:
            dm.hparams.val_size = int(size)
            dm.datasets.pop("val", None)
            dm.setup("validate")
            scores[str(size)] = 100 * float(trainer.validate(model, datamodule=dm, verbose=False)[0][metric])
    finally:
        dm.hparams.val_size = original
        dm.datasets.pop("val", None)
    return scores


def score_global_zeroed(model, dm, trainer, metric: str) -> float:
    """The validation ``metric`` (%) with the global term set to zero in every block that has one
    beside local mixing (:func:`~hydra_dense.attention.muting.global_term_blocks`): what the global
    term carries. NaN for a model without such a term."""
    blocks = global_term_blocks(model.backbone)
    if not blocks:
        return float("nan")
    with muted(model.backbone, blocks, "global"):
        return 100 * float(trainer.validate(model, datamodule=dm, verbose=False)[0][metric])


def score_head_pool_zeroed(model, dm, trainer, metric: str) -> float:
    """The validation ``metric`` (%) with the decode head's global pooling bin zeroed
    (:func:`~hydra_dense.heads.segmentation.global_pool_muted`): what the head's own path to the
    whole image carries. NaN for a head without one (linear, UPerNet without scale 1, detection)."""
    head = getattr(model, "head", None)
    if head is None:
        return float("nan")
    with global_pool_muted(head) as has_pool:
        if not has_pool:
            return float("nan")
        return 100 * float(trainer.validate(model, datamodule=dm, verbose=False)[0][metric])


def evaluate_saved(req: RunRequest, run_dir: Path) -> dict:
    """Add the ``eval_sizes`` scores a finished run lacks, from its saved weights; returns the result."""
    result = json.loads((run_dir / "result.json").read_text())
    sizes = [s for s in req.eval_sizes if str(s) not in result.get("scores_at", {})]
    if sizes:
        model, dm, trainer = build_run(Path(req.config), request_overrides(req), run_dir / "eval_sizes",
                                          req.plan_name)
        model.load_state_dict(torch.load(result["weights"], map_location="cpu", weights_only=True))
        result.setdefault("scores_at", {}).update(scores_at_sizes(model, dm, trainer, sizes, result["metric"]))
        atomic_write_text(run_dir / "result.json", json.dumps(result, indent=1, default=float))
    return result


def interrupted_checkpoint(run_dir: Path) -> Optional[Path]:
    """The newest ``last.ckpt`` a killed attempt of this run left under ``run_dir``, or None."""
    found = sorted(run_dir.glob("lightning_logs/version_*/checkpoints/last.ckpt"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def run_one(req: RunRequest, run_dir: Path, resume: bool = False) -> dict:
    """Train, validate and measure one recipe/seed as ``req`` says; returns (and writes) the result.
    ``resume``: go on from the ``last.ckpt`` an interrupted attempt of the same request left."""
    start = interrupted_checkpoint(run_dir) if resume else None
    if start is not None:
        print(f"[compare] {req.recipe} seed {req.seed}: resuming from {start}", flush=True)
    model, dm, trainer = build_run(Path(req.config), request_overrides(req) + QUIET, run_dir, req.plan_name,
                                      weights=req.converted, strict_weights=True)
    if req.head_from:  # converted from a trained task model: its head fits the converted features
        load_task_head(model, req.head_from)
    clock = TrainClock()
    trainer.callbacks += [clock, StepProgress(f"{req.recipe} seed {req.seed}")]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    t0 = time.time()
    peak = peak_memory_mb(lambda: trainer.fit(model, datamodule=dm, ckpt_path=start), device)
    train = dict(train_img_s=clock.images / max(clock.seconds, 1e-9), peak_train_mem_mb=peak,
                 train_min=(time.time() - t0) / 60, steps=trainer.global_step)
    return _validate_and_describe(req, run_dir, model, dm, trainer, train)


def evaluate_given(req: RunRequest, run_dir: Path, weights: str, steps: int) -> dict:
    """The result of a model trained elsewhere (the task weights at ``weights``, ``steps`` steps):
    validated and described like a trained run, with no training figures."""
    model, dm, trainer = build_run(Path(req.config), request_overrides(req) + QUIET, run_dir, req.plan_name)
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    train = dict(train_img_s=float("nan"), peak_train_mem_mb=float("nan"), train_min=float("nan"), steps=steps)
    return _validate_and_describe(replace(req, save_weights=False), run_dir, model, dm, trainer, train, weights)


def _metric_keys(metrics: dict) -> tuple[Optional[str], Optional[str]]:
    """The task's main metric (mIoU, mAP, top-1) and its second one among the validation metrics."""
    key = next((k for k in ("val_mIoU", "val_mAP", "val_top1") if k in metrics), None)
    key2 = next((k for k in metrics if k in ("val_pixel_acc", "val_mAP_50") or
                 (k.startswith("val_top") and k != "val_top1")), None)
    return key, key2


def _gflops_per_training_input(model, dm) -> float:
    """Forward GFLOPs of ``model`` on one training input: ``(1, 3, H, W)`` or ``(1, 3, T, H, W)``."""
    dm.setup("fit")
    sample = dm.datasets["train"][0]
    if isinstance(sample, dict):  # an OpenMMLab config (hydra_dense.mm): its own preprocessing
        x = model.images_of({k: [v] for k, v in sample.items()}).to(model.device)
    else:
        x = sample[0][None].to(model.device)
    model.eval()
    with torch.no_grad():
        return count_flops(lambda: model(x)) / 1e9


def _validate_and_describe(req: RunRequest, run_dir: Path, model, dm, trainer, train: dict,
                           weights: Optional[str] = None) -> dict:
    """Validate ``model`` (as it is, with its global term zeroed, with its head's global pool
    zeroed, and split near / far from a context track's cue), count its FLOPs on one
    training input, save its weights when asked, and write ``result.json``."""
    metrics = trainer.validate(model, datamodule=dm, verbose=False)[0]
    # read now: every evaluation below (other sizes, a path zeroed) validates again and leaves its own
    per_class = model.per_class_table() if hasattr(model, "per_class_table") else ""
    key, key2 = _metric_keys(metrics)
    scores_at = scores_at_sizes(model, dm, trainer, req.eval_sizes, key) if key else {}
    zeroed = score_global_zeroed(model, dm, trainer, key) if key else float("nan")
    head_zeroed = score_head_pool_zeroed(model, dm, trainer, key) if key else float("nan")
    split = near_far_scores(model, dm) if key == "val_mIoU" else None
    gflops = _gflops_per_training_input(model, dm)
    ckpt = run_dir / "final_weights.pt"
    if req.save_weights:  # the speed stage times these (detectors: NMS work depends on the scores)
        atomic_torch_save(model.state_dict(), ckpt)
    result = dict(
        recipe=req.recipe, seed=req.seed, key=req.key,
        attention=model.backbone.describe_plan(),
        metric=key or "", score=100 * metrics.get(key, float("nan")),
        metric2=key2 or "", score2=100 * metrics.get(key2, float("nan")), scores_at=scores_at,
        score_global_zeroed=zeroed, score_head_pool_zeroed=head_zeroed,
        score_near=split["near"] if split else float("nan"), score_far=split["far"] if split else float("nan"),
        near_far_per_class=split and {k: v for k, v in split.items() if k.endswith("per_class")}, **train,
        params_m=sum(p.numel() for p in model.parameters()) / 1e6, gflops_img=gflops,
        weights=weights or (str(ckpt) if ckpt.is_file() else ""),
        per_class=per_class + (near_far_table(class_names(model, model.hparams.num_classes, first=0), split) if split else ""),
    )
    atomic_write_text(run_dir / "result.json", json.dumps(result, indent=1, default=float))
    return result


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    mode = argv[0] if argv[:1] in (["--evaluate"], ["--resume"]) else ""
    argv = argv[1:] if mode else argv
    if len(argv) != 1:
        print("usage: python -m hydra_dense.comparison.worker [--evaluate | --resume] <run_dir>/request.json",
              file=sys.stderr)
        return 2
    path = Path(argv[0])
    if mode == "--evaluate":
        evaluate_saved(RunRequest.read(path), path.parent)
    else:
        run_one(RunRequest.read(path), path.parent, resume=mode == "--resume")
    return 0


if __name__ == "__main__":
    sys.exit(plain_refusals(main)())
