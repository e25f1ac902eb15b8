"""A clear message when the OpenMMLab stack is missing or was built for another torch."""
from __future__ import annotations

INSTALL = "run tools/install_mm.sh (builds mmcv 2.1.0 for this torch once per machine, then mmseg / mmdet)"


def require_mm() -> None:
    """Raise ImportError saying how to install, instead of an ImportError deep inside mmseg."""
    try:
        import mmcv
    except ImportError as err:
        raise ImportError(f"hydra_dense.mm needs mmcv 2.1.0 with compiled ops: {INSTALL}") from err
    try:
        import mmcv.ops  # noqa: F401 - the compiled extension, which mmseg / mmdet import at start
    except (ImportError, OSError) as err:
        raise ImportError(f"mmcv {mmcv.__version__} is installed but its compiled ops do not load with this "
                          f"torch ({type(err).__name__}: {err}); it was probably built for another torch: "
                          f"{INSTALL}") from err
    for name in ("mmengine", "mmseg", "mmdet"):
        try:
            __import__(name)
        except ImportError as err:
            raise ImportError(f"hydra_dense.mm needs {name}: {INSTALL}") from err
