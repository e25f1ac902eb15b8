"""One writer per folder: a job that writes a folder holds an exclusive lock on ``<folder>/.lock``
for as long as it writes, so a second job aimed at the same folder is refused at once instead of
mixing its files with the first one's. The lock is the kernel's (``flock``): a killed job's lock goes
with its process, and no stale lock is ever left to clear by hand."""
from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

__all__ = ["FolderBusy", "folder_lock", "holder_of"]

LOCK_NAME = ".lock"


class FolderBusy(ValueError):
    """Another process is writing the folder right now."""


def holder_of(folder: Path) -> Optional[str]:
    """``"pid N since HH:MM:SS"`` of the process holding ``folder``'s lock, or None when none does."""
    path = Path(folder) / LOCK_NAME
    if not path.is_file():
        return None
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            return fh.read().strip() or "another process"
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


@contextmanager
def folder_lock(folder: Path, what: str) -> Iterator[None]:
    """Hold ``folder``'s lock (creating the folder) while the body runs; refuse with
    :class:`FolderBusy` naming ``what`` and the holder when another process holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fh = open(folder / LOCK_NAME, "a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise FolderBusy(f"{folder} is being written by {what} right now ({holder}); wait for it to end, or "
                             f"use another folder") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}\n")
        fh.flush()
        yield
    finally:
        fh.close()  # closing releases the lock
