"""Class names for the tasks' per-class tables, and what the model and its data must agree on
before anything runs: the kind of data, and the class count."""
from __future__ import annotations

import lightning as L

__all__ = ["class_names", "check_class_count", "check_data_kind"]


def class_names(task: L.LightningModule, num_classes: int, first: int = 0) -> list[str]:
    """The task's own ``class_names``, else its data module's, else ``class_<first..>``."""
    own = getattr(task, "class_names", None)
    if own:
        return list(own)
    dm = getattr(task.trainer, "datamodule", None) if task._trainer is not None else None
    names = getattr(dm, "class_names", None)
    return list(names) if names else [f"class_{i}" for i in range(first, first + num_classes)]


def check_class_count(task: L.LightningModule, data_classes: int | None, what: str = "classes") -> None:
    """Before training: the model's ``num_classes`` must be the data's, else an index error or a
    CUDA assert surfaces mid-run. ``data_classes`` None (unknown) skips the check."""
    model_classes = task.hparams.num_classes
    if data_classes is None or data_classes == model_classes:
        return
    dm = task.trainer.datamodule
    names = list(getattr(dm, "class_names", None) or [])
    shown = f" ({', '.join(map(str, names[:8]))}{', …' if len(names) > 8 else ''})" if names else ""
    raise ValueError(f"model.num_classes={model_classes} but the data ({type(dm).__name__} at "
                     f"{getattr(dm, 'root', '?')}) has {data_classes} {what}{shown}; set "
                     f"--model.init_args.num_classes={data_classes}")


def check_data_kind(task: L.LightningModule, needs: str) -> None:
    """Before anything runs: the data module gives ``needs`` batches (its ``provides``), else the first
    batch fails with a shape error that names neither. A data module that does not say is let through."""
    dm = getattr(task.trainer, "datamodule", None) if task._trainer is not None else None
    provides = getattr(dm, "provides", "")
    if dm is None or not provides or provides == needs:
        return
    raise ValueError(f"model.class_path {type(task).__name__} trains on {needs} data, but data.class_path "
                     f"{type(dm).__name__} gives {provides} data; use a {needs} data module (or a {provides} task)")
