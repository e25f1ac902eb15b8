"""Files that appear whole or not at all: written next to the target, then renamed onto it.

The one atomic writer of the project: checkpoints, converted weights, exports, result files and
reports all go through it. The temporary file sits in the target's own folder (a rename within
one folder is atomic on POSIX file systems; the system temp dir may be another file system, where
the final move would be a copy) and is named ``.<name>.tmp-<unique>``, so that a file left by a
killed writer is recognisable (``--ckpt_path last`` removes stale ``.*.ckpt.tmp-*`` files).
"""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Union

import torch

from .refusal import DiskFull

__all__ = ["atomic_target", "atomic_write", "atomic_write_text", "atomic_torch_save", "atomic_savefig",
           "atomic_save_image"]

_FULL = (errno.ENOSPC, errno.EDQUOT)


@contextmanager
def atomic_target(path: Union[str, Path], sync_folder: bool = False) -> Iterator[Path]:
    """A uniquely named temporary path in ``path``'s folder to write to; on leaving the block the
    file is fsynced and ``os.replace``-d onto ``path`` (on an error it is removed instead).

    Processes writing the same ``path`` at once (DDP ranks, parallel test workers) never mix.
    ``sync_folder``: also fsync the folder, so that the rename survives a node crash (checkpoints).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    except OSError as err:  # named by the file asked for, not by a temporary name the user never gave
        if err.errno in _FULL:
            raise _disk_full_refusal(path) from err
        raise type(err)(err.errno, err.strerror, str(path)) from err
    os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes it 0600: give it the mode an open() would
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if _disk_full(err):
            raise _disk_full_refusal(path) from err
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


def atomic_save_image(image, path: Union[str, Path], **kwargs) -> Path:
    """``image.save(path, **kwargs)`` (a PIL image; the format from ``path``'s suffix), whole or not at
    all; returns ``path``."""
    path = Path(path)
    kwargs.setdefault("format", {"jpg": "jpeg"}.get(path.suffix.lstrip(".").lower(), path.suffix.lstrip(".") or "png"))
    atomic_write(path, lambda fh: image.save(fh, **kwargs))
    return path


def _disk_full(err: BaseException) -> bool:
    """Whether ``err`` or an error it arose from is a full disk or quota (torch's zip writer reports
    one as a RuntimeError raised while handling the OSError)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, DiskFull) or (isinstance(err, OSError) and err.errno in _FULL):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def _disk_full_refusal(path: Path) -> DiskFull:
    try:
        free = f"{shutil.disk_usage(path.parent).free / 2**20:.1f} MB free"
    except OSError:
        free = "its free space unknown"
    kept = f"; the previous {path.name} is kept" if path.exists() else ""
    return DiskFull(errno.ENOSPC, f"{path}: not written, the disk holding {path.parent} is full ({free}){kept}; "
                                  "free some space (or write elsewhere) and go on from there (a training run: "
                                  "--ckpt_path last; a comparison: the same command)")


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
