"""Conversion images: image folders and / or the training split of a task YAML, labels unused.

:class:`ConversionImages` is :class:`~hydra_dense.data.unlabeled.UnlabeledImageDataModule` plus
``task_config``: a task's own config names its training images, so a conversion can read them
(labels never read) without a second list of files. Resolving a task YAML needs the CLI's parser,
which is why this lives above ``data/``.
"""
from __future__ import annotations

import contextvars
from pathlib import Path
from typing import Optional, Sequence, Union

import yaml
from jsonargparse import Namespace

from ..cli import parse_config
from ..data.unlabeled import UnlabeledImageDataModule
from ..runtime.class_path import imported_class

__all__ = ["ConversionImages", "task_training_images", "task_data_section"]


class ConversionImages(UnlabeledImageDataModule):
    """Unlabeled images for :class:`~hydra_dense.conversion.ConversionTask`.

    Args:
        root: folder(s) searched recursively for images (any size).
        val_root: held-out folder(s); without it, every ``val_every``-th image of ``root`` is held out.
        task_config: a task YAML (e.g. ``configs/segmentation/demo_digits.yaml``), instead of or
            besides ``root``: its ``data:`` module is built and the image files of its training split
            are used (labels are never read).
        task_overrides: CLI overrides applied to ``task_config`` first, as the task's own run had them
            (e.g. ``["--data.init_args.root=/data/ADEChallengeData2016"]``).

    The other arguments (``crop_size``, ``batch_size``, ...) are
    :class:`~hydra_dense.data.unlabeled.UnlabeledImageDataModule`'s, passed on as they are.
    """

    def __init__(
        self,
        root: Union[str, list[str], None] = None,
        val_root: Union[str, list[str], None] = None,
        task_config: Optional[str] = None,
        task_overrides: Optional[list[str]] = None,
        **kwargs,
    ) -> None:
        if root is None and task_config is None:
            raise ValueError("data: give data.root (image folders), data.task_config (a task YAML) or both")
        files = task_training_images(task_config, task_overrides or []) if task_config else None
        super().__init__(root=root, val_root=val_root, train_files=files, **kwargs)

    def _listed_source(self) -> list[str]:
        task = self.hparams.get("task_config")
        return [f"task {task} (train split, labels unused)"] if task else []


def task_data_section(config: Union[str, Path], overrides: Sequence[str] = ()) -> dict:
    """The ``data:`` section (``class_path`` and ``init_args``) of a task YAML after ``overrides``."""
    path = Path(config).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"data.task_config: {path} does not exist")
    if overrides:
        parsed = parse_config(["--config", str(path), *overrides]).get("data")
        data = parsed.as_dict() if isinstance(parsed, Namespace) else parsed
    else:
        data = (yaml.safe_load(path.read_text()) or {}).get("data")
    if not isinstance(data, dict) or "class_path" not in data:
        raise ValueError(f"data.task_config: {path} has no data: section with a class_path")
    return {k: v for k, v in data.items() if not k.startswith("__")}  # jsonargparse's own bookkeeping


def task_training_images(config: Union[str, Path], overrides: Sequence[str] = ()) -> list[Path]:
    """Image files of the training split of the data module a task YAML (after ``overrides``) declares.

    The task's data module is built and set up for ``fit``; only its image paths are taken (masks and
    boxes are never opened). Video data modules have no image files to take.
    """
    path = Path(config).expanduser()
    data = task_data_section(path, overrides)
    name = str(data["class_path"]).rpartition(".")[2]
    data_class = imported_class(data["class_path"])
    if data_class is None:
        raise ValueError(f"data.task_config: {path}'s data class_path {data['class_path']!r} cannot be imported")
    # built in an empty context: LightningCLI hands its own init_args to save_hyperparameters
    # through a context variable, which would otherwise replace the task data module's
    dm = contextvars.Context().run(data_class, **data.get("init_args", {}))
    dm.setup("fit")
    dataset = dm.datasets["train"]
    if hasattr(dataset, "pairs"):  # segmentation: (image, mask) pairs; the masks are not opened
        files = [Path(p[0]) for p in dataset.pairs]
    elif hasattr(dataset, "records"):  # detection: the image of each record; boxes are not used
        files = [Path(r.path) for r in dataset.records]
    else:
        raise ValueError(f"data.task_config: {path}'s {name} has no image files to take (video data is not "
                         "supported; use data.root with extracted frames)")
    if not files:
        raise ValueError(f"data.task_config: the training split of {path} has no images")
    return files

