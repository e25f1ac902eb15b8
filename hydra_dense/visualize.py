"""Look at what the models do: segmentation overlays, detections, and Hydra vs MSA attention maps.

    # predicted masks over images, from a trained run
    python tools/visualize.py seg --config configs/segmentation/demo_digits.yaml \
        --ckpt runs/compare/msa/lightning_logs/version_0/checkpoints/last.ckpt --images a.jpg b.jpg --out viz/

    # predicted boxes (and Mask R-CNN masks) over images, from a trained detection run
    python tools/visualize.py det --config configs/detection/demo_trees.yaml \
        --ckpt runs/compare_det/hydra/lightning_logs/version_0/checkpoints/last.ckpt --images a.png --out viz/

    # attention of one query patch, per block: MSA model next to Hydra model (same image, same query)
    python tools/visualize.py attention --image a.jpg --query 4,5 \
        --msa runs/compare/msa/lightning_logs/version_0/checkpoints/last.ckpt \
        --hydra runs/compare/hydra/lightning_logs/version_0/checkpoints/last.ckpt --out attention.png

Hydra map: each token's share of the query's attention output, <phi(q_i)*phi(k_t)*v_t, out_i> / ||out_i||²
(sums to 1 like a softmax row; see hydra_dense/attention/maps.py). MSA map: softmax weights of
the query row averaged over heads. Without checkpoints, both models start from the converted
DINOv2 ViT-S/14 weights (when available), run as MSA and as all-Hydra.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib
import numpy as np
import torch
from PIL import Image

from hydra_dense.attention.maps import attention_maps
from hydra_dense.backbones import ViT
from hydra_dense.checkpoints import load_pretrained
from hydra_dense.cli import build_task
from hydra_dense.drawing import colorize, draw_detections
from hydra_dense.weights import DINOV2_VITS14_KWARGS, prepare_dinov2_vits14

from .data.normalisation import normalised_tensor


def load_image(path: str, size: int | None) -> tuple[np.ndarray, torch.Tensor]:
    try:
        img = Image.open(path).convert("RGB")
    except Exception as err:
        raise SystemExit(f"error: cannot read image {path}: {err}")
    if size:
        img = img.resize((size, size), Image.BILINEAR)
    arr = np.array(img)
    return arr, normalised_tensor(arr)


def backbone_from(ckpt: str | None, plan: str):
    """A DINOv2-layout ViT-S/14 with ``plan``; weights from a task checkpoint or DINOv2."""
    model = ViT(**DINOV2_VITS14_KWARGS, pos_embed_antialias=False, plan=plan, out_indices=[11]).eval()
    if ckpt:
        load_pretrained(model, ckpt, verbose=False)
    else:
        try:
            load_pretrained(model, prepare_dinov2_vits14(), verbose=False)
        except Exception as err:  # noqa: BLE001
            print(f"note: no pretrained weights ({err}); maps of a random network")
    return model


def cmd_attention(args) -> None:
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arr, x = load_image(args.image, args.size)
    msa = backbone_from(args.msa, "msa")
    hydra = backbone_from(args.hydra, "hydra")
    qy, qx = (int(v) for v in args.query.split(","))
    m_maps = {m["block"]: m for m in attention_maps(msa, x, (qy, qx))}
    h_maps = [m for m in attention_maps(hydra, x, (qy, qx)) if m["kind"] == "hydra"]
    p = msa.patch_size
    fig, axes = plt.subplots(2, len(h_maps), figsize=(2.2 * len(h_maps), 4.8), squeeze=False)
    for col, hm in enumerate(h_maps):
        for row, m in enumerate((m_maps[hm["block"]], hm)):
            ax = axes[row, col]
            heat = torch.nn.functional.interpolate(m["map"][None, None], scale_factor=p, mode="nearest")[0, 0]
            heat = heat[: arr.shape[0], : arr.shape[1]].numpy()
            ax.imshow(arr)
            lim = np.abs(heat).max() or 1.0
            ax.imshow(heat, cmap="magma" if m["kind"] == "msa" else "RdBu_r", alpha=0.6,
                      vmin=0 if m["kind"] == "msa" else -lim, vmax=lim)
            ax.scatter([qx * p + p / 2], [qy * p + p / 2], c="lime", s=25, marker="x")
            ax.set_title(f"{m['kind'].upper()} block {m['block']}", fontsize=8)
            ax.axis("off")
    fig.suptitle(f"query patch ({qy}, {qx}): MSA weights (top) vs Hydra token shares (bottom)")
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(out)


def task_from(args):
    """The task and data module of ``--config`` (+ overrides), in eval mode, with ``--ckpt``'s weights."""
    task, datamodule, _ = build_task(args.config, args.overrides)
    task.eval()
    if args.ckpt:
        task.load_state_dict(torch.load(args.ckpt, map_location="cpu", weights_only=True)["state_dict"])
    return task, datamodule


def cmd_seg(args) -> None:
    task, _ = task_from(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in args.images:
        arr, x = load_image(path, args.size)
        with torch.no_grad():
            pred = task.predict_batch_labels(x[None])[0]
        col = colorize(pred, task.hparams.num_classes)
        blend = (0.45 * arr + 0.55 * col).astype(np.uint8)
        dst = out / f"{Path(path).stem}_pred.png"
        Image.fromarray(np.concatenate([arr, blend], axis=1)).save(dst)
        print(dst)


def cmd_det(args) -> None:
    task, dm = task_from(args)
    names = getattr(dm, "class_names", None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in args.images:
        try:
            arr = np.array(Image.open(path).convert("RGB"))
        except Exception as err:
            raise SystemExit(f"error: cannot read image {path}: {err}")
        x = torch.from_numpy(arr).permute(2, 0, 1).float() / 255
        with torch.no_grad():
            pred = task([x])[0]
        panel = draw_detections(arr, pred, names, score_thresh=args.score)
        dst = out / f"{Path(path).stem}_det.png"
        Image.fromarray(np.concatenate([arr, panel], axis=1)).save(dst)
        print(f"{dst}: {int((pred['scores'] >= args.score).sum())} detections with score >= {args.score}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("attention", help="MSA vs Hydra attention maps of one query patch")
    a.add_argument("--image", required=True)
    a.add_argument("--query", default="3,3", help="patch grid position y,x")
    a.add_argument("--msa", help="checkpoint of the MSA model (task .ckpt or timm state dict)")
    a.add_argument("--hydra", help="checkpoint of the Hydra / hybrid model")
    a.add_argument("--size", type=int, default=112, help="resize the image to size x size (0: keep)")
    a.add_argument("--out", default="attention.png")
    s = sub.add_parser("seg", help="predicted masks over images")
    s.add_argument("--config", required=True)
    s.add_argument("--ckpt")
    s.add_argument("--images", nargs="+", required=True)
    s.add_argument("--size", type=int, default=0)
    s.add_argument("--out", default="viz")
    s.add_argument("overrides", nargs="*", help="LightningCLI overrides, e.g. --data.init_args.root=...")
    d = sub.add_parser("det", help="predicted boxes and masks over images")
    d.add_argument("--config", required=True)
    d.add_argument("--ckpt")
    d.add_argument("--images", nargs="+", required=True)
    d.add_argument("--score", type=float, default=0.5, help="draw detections with at least this score")
    d.add_argument("--out", default="viz")
    d.add_argument("overrides", nargs="*", help="LightningCLI overrides, e.g. --data.init_args.root=...")
    args, extra = p.parse_known_args(argv)  # --key=value overrides for LightningCLI
    if extra and args.cmd == "attention":
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    {"attention": cmd_attention, "seg": cmd_seg, "det": cmd_det}[args.cmd](args)
    return 0

