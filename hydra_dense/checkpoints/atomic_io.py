"""Checkpoints written so that a kill at any moment leaves the previous one intact."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import lightning
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from ..runtime.atomic_file import atomic_write

__all__ = ["AtomicCheckpointIO"]


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` through :func:`~hydra_dense.runtime.atomic_file.atomic_write`: a temporary file
    next to the target, fsync, then ``os.replace``.

    Lightning's default goes through an fsspec transaction whose temporary file is in the system
    temp dir: on a cluster that is another file system than the checkpoint folder, so the final
    move is a copy into the target path - a kill or a full ``/tmp`` during that copy leaves a
    truncated checkpoint (and ``/tmp`` must hold a whole checkpoint). Here the rename is within
    one directory, atomic on POSIX file systems; the directory is fsynced so the rename survives a
    node crash. A temporary file left by a killed writer is removed when ``--ckpt_path last``
    resumes that run. Remote URLs (``s3://``...) keep Lightning's behaviour.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Optional[Any] = None) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO.save_checkpoint takes no storage_options")
        if not _is_local(str(path)):
            return super().save_checkpoint(checkpoint, path, storage_options)
        target = Path(str(path).removeprefix("file://"))
        atomic_write(target, lambda f: torch.save(checkpoint, f), sync_folder=True)

    def load_checkpoint(self, path, map_location: Optional[Any] = None, weights_only: Optional[bool] = None) -> dict:
        """Lightning's loading; a checkpoint written by another script with ``state_dict`` alone (no
        ``pytorch-lightning_version``, which Lightning's migration reads) is taken as weights of
        the current Lightning version (the model's own check has already passed:
        :func:`~hydra_dense.checkpoints.resume.check_checkpoint_matches`)."""
        checkpoint = super().load_checkpoint(path, map_location=map_location, weights_only=weights_only)
        if isinstance(checkpoint, dict) and "state_dict" in checkpoint:
            checkpoint.setdefault("pytorch-lightning_version", lightning.__version__)
        return checkpoint
