"""Finding the checkpoint to resume from, and checking it fits the model before anything runs."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import torch
from lightning.pytorch.utilities import rank_zero_only
from torch import nn

from .identity import IDENTITY_KEY, model_identity, plan_mismatch, task_mismatch

__all__ = ["find_resume_checkpoint", "check_checkpoint_matches", "CheckpointMismatchError", "remove_stale_temporaries",
           "read_saved_settings"]

RESUME_PATTERNS = ("last*.ckpt", "hpc_ckpt_*.ckpt")


class CheckpointMismatchError(ValueError):
    """The checkpoint's weights do not fit the configured model (names or shapes)."""


def find_resume_checkpoint(root: str | Path) -> Optional[Path]:
    """Newest ``last*.ckpt`` (periodic / final) or ``hpc_ckpt_*.ckpt`` (SLURM requeue) under ``root``.

    Lightning puts every run in a new ``version_N`` folder, so its own ``ckpt_path="last"`` does not
    look at the run that was killed; this searches the whole ``default_root_dir``."""
    root = Path(root)
    if not root.is_dir():
        return None
    found = [p for pattern in RESUME_PATTERNS for p in root.rglob(pattern) if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def remove_stale_temporaries(root: str | Path) -> int:
    """Delete ``.*.ckpt.tmp-*`` files under ``root`` - half-written checkpoints of a killed run
    (see :class:`~hydra_dense.runtime.AtomicCheckpointIO`); call only when resuming that run."""
    root = Path(root)
    if not root.is_dir():
        return 0
    stale = list(root.rglob(".*.ckpt.tmp-*"))
    for path in stale:
        path.unlink(missing_ok=True)
    return len(stale)


def _load(path: str | Path, weights_only: bool) -> object:
    """A checkpoint file's contents; errors naming the file when it is missing or unreadable."""
    p = Path(path)
    if p.is_dir():
        inside = sorted(q.name for q in p.glob("*.ckpt"))[:5]
        hint = f" it holds {', '.join(inside)}" if inside else " it holds no .ckpt file"
        raise IsADirectoryError(f"--ckpt_path: {p} is a folder, not a checkpoint file;{hint} (or give --ckpt_path last "
                                f"to resume the newest checkpoint under trainer.default_root_dir)")
    if not p.is_file():
        raise FileNotFoundError(f"--ckpt_path: checkpoint {p} does not exist")
    try:
        return torch.load(p, map_location="cpu", weights_only=weights_only, mmap=True)
    except Exception as err:  # noqa: BLE001 - any failure here means an unreadable file
        raise CheckpointMismatchError(f"--ckpt_path: {p} is not a readable checkpoint (truncated or not written by "
                                      f"torch.save? {type(err).__name__}: {str(err).splitlines()[0]})") from err


def read_saved_settings(path: str) -> dict:
    """The task settings a Lightning checkpoint saved (``hyper_parameters``); raises naming the file
    when it is missing or unreadable (e.g. truncated)."""
    ckpt = _load(path, weights_only=True)
    return dict(ckpt.get("hyper_parameters") or {}) if isinstance(ckpt, dict) else {}


@rank_zero_only
def _warn_once(text: str) -> None:
    """One line on stderr, from rank 0 only."""
    print(text, file=sys.stderr, flush=True)


def _shape_list(keys, limit: int = 5) -> str:
    keys = sorted(keys)
    more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def check_checkpoint_matches(model: nn.Module, path: str | Path, resumes_training: bool = False) -> None:
    """Raise :class:`CheckpointMismatchError` (or ``FileNotFoundError``) naming the file and the
    first mismatching parameters, when ``path`` cannot be loaded into ``model``; with
    ``resumes_training`` (``fit``) also when it holds weights only (no optimizer state to resume)."""
    path = Path(path)
    ckpt = _load(path, weights_only=False)
    state = ckpt.get("state_dict") if isinstance(ckpt, dict) else None
    if state is None:
        raise CheckpointMismatchError(f"--ckpt_path: {path} is not a Lightning checkpoint (no 'state_dict'); "
                                      "plain backbone weights go to the backbone's `pretrained:` instead")
    if resumes_training and "optimizer_states" not in ckpt:
        raise CheckpointMismatchError(f"--ckpt_path: {path} holds weights only (no optimizer or loop state), so fit "
                                      "cannot resume from it; validate, test and predict take it as it is")
    saved = dict(ckpt.get(IDENTITY_KEY) or {})
    saved.setdefault("task", (ckpt.get("hyper_parameters") or {}).get("_class_path"))
    problem = task_mismatch(saved, model)
    if problem:
        raise CheckpointMismatchError(f"--ckpt_path: {path} does not match the configured {type(model).__name__}: "
                                      f"{problem}")
    own = model.state_dict()
    missing = set(own) - set(state)
    unexpected = set(state) - set(own)
    shapes = {k: (tuple(state[k].shape), tuple(own[k].shape)) for k in set(own) & set(state)
              if hasattr(state[k], "shape") and tuple(state[k].shape) != tuple(own[k].shape)}
    if not (missing or unexpected or shapes):
        problem = plan_mismatch(saved, model)  # the same tensors, another attention in some blocks
        if problem:
            raise CheckpointMismatchError(f"--ckpt_path: {path} does not match the configured "
                                          f"{type(model).__name__}: {problem}")
        assumed = model_identity(model).get("plan")
        if not saved.get("attention") and assumed:  # written elsewhere: nothing says which plan it ran
            _warn_once(f"warning: --ckpt_path: {path} records no attention plan (not written by hydra_dense); it is "
                       f"assumed to be the config's [{assumed}]")
        return
    lines = [f"--ckpt_path: {path} does not match the configured {type(model).__name__} (trained with another "
             f"backbone, head or num_classes? {len(state)} tensors in the checkpoint, {len(own)} in the model):"]
    if missing:
        lines.append(f"  missing from the checkpoint: {_shape_list(missing)}")
    if unexpected:
        lines.append(f"  not in the model: {_shape_list(unexpected)}")
    if shapes:
        first = sorted(shapes)[:5]
        lines.append("  shape differs (checkpoint vs model): " +
                     ", ".join(f"{k} {shapes[k][0]} vs {shapes[k][1]}" for k in first) +
                     (f" (+{len(shapes) - 5} more)" if len(shapes) > 5 else ""))
    raise CheckpointMismatchError("\n".join(lines))
