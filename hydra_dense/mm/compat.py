"""mmengine 0.10.7 next to torch 2.14, without editing installed packages."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os

__all__ = ["patch_mmengine_package_lookup"]


def _is_installed(package: str) -> bool:
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def _installed_path(package: str) -> str:
    """Folder of the module that distribution ``package`` installs (``mmsegmentation`` -> ``.../mmseg``)."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"{package} is not installed (needed for a '{package}::' base config)")
        return os.path.dirname(spec.origin)
    location = str(dist.locate_file(""))
    top = (dist.read_text("top_level.txt") or "").split()
    for name in (package, *top):
        path = os.path.join(location, name)
        if os.path.isdir(path):
            return path
    raise ModuleNotFoundError(f"cannot find the module folder of the {package} distribution in {location}")


def patch_mmengine_package_lookup() -> None:
    """mmengine resolves ``mmdet::`` / ``mmseg::`` base configs with ``pkg_resources``, which
    setuptools 70 removed - and torch 2.14 requires setuptools >= 77. Same answers from importlib
    (the import names ``mmdet`` / ``mmseg`` are what configs use), patched into mmengine's config
    module only when ``pkg_resources`` is missing."""
    try:
        import pkg_resources  # noqa: F401
        return
    except ImportError:
        pass
    import mmengine.config.config as config_module
    import mmengine.utils.package_utils as package_utils

    for module in (config_module, package_utils):
        module.is_installed = _is_installed
        module.get_installed_path = _installed_path


def _numpy_safe_globals() -> list:
    """numpy objects OpenMMLab checkpoints keep in their ``meta`` (scores, class arrays)."""
    import numpy as np

    core = getattr(np, "_core", None) or np.core
    found = [core.multiarray._reconstruct, core.multiarray.scalar, np.ndarray, np.dtype]
    found += [type(np.dtype(t)) for t in ("float64", "float32", "int64", "int32", "bool", "uint8")]
    return found


def patch_mmengine_checkpoint_loading() -> None:
    """mmengine 0.10.7 calls ``torch.load`` without ``weights_only``; torch >= 2.6 then refuses the
    numpy values in OpenMMLab checkpoints' ``meta`` (``load_from``, ``init_cfg=Pretrained``).
    Local checkpoints are loaded with ``weights_only=True`` and numpy's array / scalar types
    allow-listed - still no arbitrary code from a checkpoint."""
    import torch
    from mmengine.runner.checkpoint import CheckpointLoader

    def load_from_local(filename, map_location=None):
        filename = os.path.expanduser(filename)
        if not os.path.isfile(filename):
            raise FileNotFoundError(f"{filename} can not be found.")
        with torch.serialization.safe_globals(_numpy_safe_globals()):
            return torch.load(filename, map_location=map_location, weights_only=True)

    CheckpointLoader.register_scheme(prefixes="", force=True)(load_from_local)
