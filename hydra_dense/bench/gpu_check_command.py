"""The CUDA path in one run (under 8 minutes on one GPU): Triton kernels vs an fp64 reference,
their memory bandwidth, ViT-B speed, and a DDP training smoke run of each task.

    python tools/gpu_check.py                      # on a CUDA machine; report on stdout and in --out
    python tools/gpu_check.py --dry-run            # the same code at toy sizes on the CPU (CI runs this)
    python tools/gpu_check.py --sections numerics,bandwidth

Sections:
  numerics   Triton forward and backward vs eager Hydra in fp64; fp32 / bf16 / fp16; with and
             without padding masks; B x T x D up to 8 x 16384 x 768; the default (impl="auto")
             path must produce the kernel's bits.
  bandwidth  achieved GB/s of the kernels, as % of the device's peak, next to a plain copy.
  speed      ViT-B at 1024^2 and 1080p, bf16, batch 8: MSA (SDPA flash) vs Hydra vs no mixing,
             inference and a training step, with the FLOP-ideal ratio.
  training   tools/train.py fit of the segmentation, detection and video demo configs, all-Hydra
             with local mixing, one GPU under DDP (NCCL, bf16-mixed).

Exit status: 0 when every numerics and training check passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

__all__ = ["main"]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true",
                        help="toy sizes on the CPU: kernels in Triton's interpreter, gloo instead of NCCL")
    parser.add_argument("--sections", default="numerics,bandwidth,speed,training",
                        help="comma-separated subset of numerics,bandwidth,speed,training")
    parser.add_argument("--out", default="runs/gpu_check", help="folder for report.md and the training runs")
    args = parser.parse_args(argv)
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    # imported after TRITON_INTERPRET is set: Triton reads it when it is first imported, and the
    # package's training stack (Lightning, torch's compiler) imports it
    from ..runtime.atomic_file import atomic_write_text
    from .gpu_check import SECTIONS, run_gpu_check

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {unknown}; choose from {', '.join(SECTIONS)}")
    out = Path(args.out)
    report, ok = run_gpu_check(args.dry_run, out, sections,
                               progress=lambda name: print(f"[gpu_check] {name} ...", file=sys.stderr, flush=True))
    atomic_write_text(out / "report.md", report)
    print(report)
    print(f"report written to {out / 'report.md'}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
