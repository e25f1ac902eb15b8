"""Files that appear whole or not at all: written next to the target, then renamed onto it."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

__all__ = ["atomic_write"]


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(fh)`` on a uniquely named temporary file in ``path``'s folder, fsync it, then
    ``os.replace`` it onto ``path``. A killed writer never leaves a half-written ``path``, and
    processes writing the same ``path`` at once (DDP ranks, parallel test workers) never mix;
    on failure the temporary file is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
