#!/usr/bin/env python
"""Data-parallel scaling report: measured training throughput with 1..N processes, and the
per-step gradient all-reduce cost of the ViT-B recipes at 8 and 64 GPUs (on paper).

    python tools/scaling.py                                   # demo segmentation, 1 vs 2 CPU processes (gloo)
    python tools/scaling.py --config configs/segmentation/ade20k_upernet_vit_b16.yaml \
        --cluster gpu_ddp --procs 1,2,4,8 --data.init_args.root=/data/ADEChallengeData2016   # one GPU node

Writes ``scaling.md`` / ``scaling.csv`` (measured) and ``comm_cost.md`` / ``comm_cost.csv`` (paper)
in ``--out``. Extra ``--key=value`` arguments are LightningCLI overrides of the measured config.
"""
import argparse
import sys
from pathlib import Path


from hydra_dense.bench.report import markdown_table, write_csv
from hydra_dense.bench.scaling import BUSBW_SOURCES, comm_cost_rows, measure_scaling

COMM_CONFIGS = ["configs/segmentation/ade20k_upernet_vit_b16.yaml", "configs/detection/coco_mask_rcnn_vitdet_b16.yaml",
                "configs/video/k400_vit_b16_joint_hydra.yaml"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/segmentation/demo_digits.yaml")
    ap.add_argument("--cluster", default="cpu_gloo", help="trainer settings: configs/cluster/<name>.yaml")
    ap.add_argument("--procs", default="1,2", help="process counts (GPUs with --cluster gpu_ddp)")
    ap.add_argument("--steps", type=int, default=20, help="timed training steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    ap.add_argument("--busbw-intra", type=float, default=BUSBW_SOURCES["intra"][0], help="GB/s inside a node")
    ap.add_argument("--busbw-inter", type=float, default=BUSBW_SOURCES["inter"][0], help="GB/s across nodes")
    ap.add_argument("--skip-measure", action="store_true", help="only the on-paper communication table")
    ap.add_argument("--out", default="runs/scaling")
    args, overrides = ap.parse_known_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if "demo_digits" in args.config:
        from hydra_dense.data.demo_segmentation import prepare

        prepare()

    repo = Path(__file__).resolve().parent.parent
    rows = comm_cost_rows([repo / c for c in COMM_CONFIGS], busbw_intra=args.busbw_intra,
                          busbw_inter=args.busbw_inter)
    note = (f"\nAssumed all_reduce busbw: {args.busbw_intra:g} GB/s inside a node (8 GPUs), {args.busbw_inter:g} GB/s "
            f"across nodes (64 GPUs = 8 nodes).\nSources: {BUSBW_SOURCES['intra'][1]}; {BUSBW_SOURCES['inter'][1]}.\n"
            "DDP all-reduces fp32 gradients (also under bf16-mixed: the parameters stay fp32); a bf16 "
            "compression hook would halve it. Buckets overlap with the backward pass, so this bounds the "
            "added step time from above.\n")
    (out / "comm_cost.md").write_text(markdown_table(rows) + "\n" + note)
    write_csv(rows, out / "comm_cost.csv")
    print(markdown_table(rows) + "\n" + note)
    if args.skip_measure:
        return 0

    procs = [int(p) for p in args.procs.split(",")]
    measured = measure_scaling(args.config, procs, args.cluster, args.steps, args.warmup, overrides)
    table = markdown_table(measured)
    (out / "scaling.md").write_text(f"`{' '.join(sys.argv)}`\n\n{table}\n")
    write_csv(measured, out / "scaling.csv")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
