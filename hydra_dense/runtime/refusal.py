"""Entry points refuse plainly: a known refusal (a bad option, file, checkpoint or dataset, named by
the code that found it) prints ``error: <message>`` and exits 2, with no traceback. The traceback
comes back with ``--debug`` or ``HYDRA_DENSE_DEBUG=1`` (kept for the processes a job starts)."""
from __future__ import annotations

import errno
import functools
import os
import sys
from typing import Callable, Optional

__all__ = ["Refusal", "StepFailed", "DiskFull", "unwritable_message", "KNOWN_REFUSALS", "DEBUG_ENV", "plain_refusals", "debugging"]

DEBUG_ENV = "HYDRA_DENSE_DEBUG"


class Refusal(Exception):
    """A refusal that is not a ``ValueError`` / ``OSError`` by nature (a failed run of a job)."""


class StepFailed(Refusal, RuntimeError):
    """A process a job started (a run, a conversion) failed; it printed why itself."""


class DiskFull(Refusal, OSError):
    """A file could not be written because its disk (or quota) is full; the message names the file,
    the folder's free space and what was kept."""

    def __str__(self) -> str:
        return str(self.strerror)


# the errors the toolkit raises with a message naming the option, file or checkpoint at fault
KNOWN_REFUSALS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, FileExistsError, IsADirectoryError,
                                                   NotADirectoryError, PermissionError, Refusal)


# an OSError that means "this place cannot be written" is the user's to fix, named in one line
_UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)


def unwritable_message(err: OSError) -> str:
    """One line for an OSError of :data:`_UNWRITABLE`: the path, what the system said, what to do."""
    where = f"{err.filename}: " if err.filename else ""
    return (f"{where}cannot be written ({err.strerror or err}); give a folder this process can write "
            "(--out, --trainer.default_root_dir, or the cache's HYDRA_DENSE_CACHE)")


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def plain_refusals(main: Callable[[list[str]], Optional[int]],
                   on_interrupt: str = "") -> Callable[[Optional[list[str]]], int]:
    """``main(argv)`` as an entry point: ``--debug`` taken off the arguments (it sets
    ``HYDRA_DENSE_DEBUG=1``), a known refusal printed as one ``error:`` line with exit status 2, and
    Ctrl-C (SIGINT) as one ``[stopped]`` line with ``on_interrupt`` (how to go on) and exit status 130."""

    @functools.wraps(main)
    def entry(argv: Optional[list[str]] = None) -> int:
        args = list(sys.argv[1:] if argv is None else argv)
        if "--debug" in args:
            args = [a for a in args if a != "--debug"]
            os.environ[DEBUG_ENV] = "1"
        try:
            return int(main(args) or 0)
        except KNOWN_REFUSALS as err:
            if debugging():
                raise
            print(f"error: {str(err).strip() or type(err).__name__}", file=sys.stderr, flush=True)
            return 2
        except OSError as err:
            if debugging() or err.errno not in _UNWRITABLE:
                raise
            print(f"error: {unwritable_message(err)}", file=sys.stderr, flush=True)
            return 2
        except KeyboardInterrupt:
            if debugging():
                raise
            print(f"\n[stopped] interrupted{'; ' + on_interrupt if on_interrupt else ''}", file=sys.stderr, flush=True)
            return 130

    return entry
