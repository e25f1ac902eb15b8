"""Where the shipped configs are, and how a job starts another one.

Shipped files (``configs/...``) are looked up in one order: the path as given (absolute, or relative
to the working folder), then the source checkout the package runs from (a clone, installed with
``pip install -e`` or on ``PYTHONPATH``), then ``<prefix>/share/hydra_dense/`` where a plain
``pip install`` puts them (``[options.data_files]`` in setup.cfg). A job starts another job as
``python -m hydra_dense.<module>``, never a tool by its path.
"""
from __future__ import annotations

import os
import sys
from types import ModuleType
from pathlib import Path
from typing import Optional

__all__ = ["source_root", "shipped_roots", "shipped_file", "find_shipped", "job_command", "job_environment"]

_PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding the hydra_dense package


def source_root() -> Optional[Path]:
    """The source checkout the package runs from (it holds ``configs/``), or None when installed."""
    return _PACKAGE_PARENT if (_PACKAGE_PARENT / "configs").is_dir() else None


def shipped_roots() -> list[Path]:
    """The folders a shipped path such as ``configs/convert/x.yaml`` is looked up under, in order."""
    roots = [source_root(), Path(sys.prefix) / "share" / "hydra_dense"]
    return [r for r in roots if r is not None and r.is_dir()]


def find_shipped(path: str | os.PathLike) -> Optional[Path]:
    """``path`` as given when it is a file, else the first shipped copy of it; None when none is."""
    given = Path(path).expanduser()
    if given.is_file():
        return given
    if given.is_absolute():
        return None
    return next((root / given for root in shipped_roots() if (root / given).is_file()), None)


def shipped_file(path: str | os.PathLike, option: str) -> Path:
    """:func:`find_shipped`, raising naming ``option`` when there is no such file."""
    found = find_shipped(path)
    if found is None:
        raise FileNotFoundError(f"{option}: {path} does not exist")
    return found


def job_environment() -> dict:
    """The environment of a job a job starts: this one, with the package's own folder first on
    ``PYTHONPATH`` (a checkout that is not installed still imports itself)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_PARENT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                                  if p and p != str(_PACKAGE_PARENT)])
    return env


def job_command(module: ModuleType, *args: str) -> list[str]:
    """``python -m <module> args...`` with this interpreter: the caller imports the module it starts,
    so the process edge shows in the import graph."""
    spec = getattr(module, "__spec__", None)  # a module run as ``python -m`` is named __main__, its spec is not
    return [sys.executable, "-m", spec.name if spec is not None else module.__name__, *args]
