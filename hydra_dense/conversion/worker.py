"""``python -m hydra_dense.conversion.worker <request.json>``: one conversion a job asked for
(:class:`~hydra_dense.conversion.request.ConversionRequest`), with a progress line every few steps."""
from __future__ import annotations

import sys
from pathlib import Path

from ..cli import main as cli_main
from ..data.embedded import prepare_embedded_data
from ..runtime.progress import StepProgress
from ..runtime.refusal import plain_refusals
from .request import ConversionRequest

__all__ = ["convert"]


def convert(request: ConversionRequest) -> None:
    """Run ``request`` in this process (its embedded data prepared first)."""
    prepare_embedded_data(Path(request.config))
    cli_main(["fit", *request.cli_arguments()], callbacks=[StepProgress("conversion", every=request.progress_every)])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        raise ValueError("usage: python -m hydra_dense.conversion.worker <request.json>")
    convert(ConversionRequest.read(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(plain_refusals(main)())
