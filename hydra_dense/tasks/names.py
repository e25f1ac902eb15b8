"""Class names for the tasks' per-class tables."""
from __future__ import annotations

import lightning as L

__all__ = ["class_names"]


def class_names(task: L.LightningModule, num_classes: int, first: int = 0) -> list[str]:
    """The task's own ``class_names``, else its data module's, else ``class_<first..>``."""
    own = getattr(task, "class_names", None)
    if own:
        return list(own)
    dm = getattr(task.trainer, "datamodule", None) if task._trainer is not None else None
    names = getattr(dm, "class_names", None)
    return list(names) if names else [f"class_{i}" for i in range(first, first + num_classes)]
