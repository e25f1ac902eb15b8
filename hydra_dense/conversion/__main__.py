"""``python -m hydra_dense.conversion``: :mod:`~hydra_dense.conversion.command`."""
import sys

from .command import entry

if __name__ == "__main__":
    sys.exit(entry())
