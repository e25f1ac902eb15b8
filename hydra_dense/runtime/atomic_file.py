"""Files that appear whole or not at all: written next to the target, then renamed onto it.

The one atomic writer of the project: checkpoints, converted weights, exports, result files and
reports all go through it. The temporary file sits in the target's own folder (a rename within
one folder is atomic on POSIX file systems; the system temp dir may be another file system, where
the final move would be a copy) and is named ``.<name>.tmp-<unique>``, so that a file left by a
killed writer is recognisable (``--ckpt_path last`` removes stale ``.*.ckpt.tmp-*`` files).
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Union

import torch

__all__ = ["atomic_target", "atomic_write", "atomic_write_text", "atomic_torch_save", "atomic_savefig"]


@contextmanager
def atomic_target(path: Union[str, Path], sync_folder: bool = False) -> Iterator[Path]:
    """A uniquely named temporary path in ``path``'s folder to write to; on leaving the block the
    file is fsynced and ``os.replace``-d onto ``path`` (on an error it is removed instead).

    Processes writing the same ``path`` at once (DDP ranks, parallel test workers) never mix.
    ``sync_folder``: also fsync the folder, so that the rename survives a node crash (checkpoints).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes it 0600: give it the mode an open() would
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_folder:
        _fsync_folder(path.parent)


def atomic_write(path: Union[str, Path], write: Callable[[BinaryIO], object], sync_folder: bool = False) -> None:
    """Call ``write(fh)`` on a binary file that becomes ``path`` only once it is complete."""
    with atomic_target(path, sync_folder) as tmp, open(tmp, "wb") as fh:
        write(fh)


def atomic_write_text(path: Union[str, Path], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all; returns ``path``."""
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
    return Path(path)


def atomic_torch_save(obj: object, path: Union[str, Path]) -> Path:
    """``torch.save(obj, path)``, whole or not at all; returns ``path``."""
    atomic_write(path, lambda fh: torch.save(obj, fh))
    return Path(path)


def atomic_savefig(fig, path: Union[str, Path], **kwargs) -> Path:
    """``fig.savefig(path, **kwargs)`` (a matplotlib figure; the format from ``path``'s suffix), whole
    or not at all; returns ``path``."""
    path = Path(path)
    kwargs.setdefault("format", path.suffix.lstrip(".") or "png")
    atomic_write(path, lambda fh: fig.savefig(fh, **kwargs))
    return path


def _umask() -> int:
    """The process's umask (read by setting it, so set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some file systems do not open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
