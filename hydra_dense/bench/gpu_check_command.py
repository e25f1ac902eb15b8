"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

from ..runtime.atomic_file import atomic_write_text

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
    # imported after TRITON_INTERPRET is set: Triton reads it when it is imported
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
