"""What model a checkpoint was trained as: the task class, the backbone class and size, and the
attention every block runs. Saved in every checkpoint (``hydra_dense_model``) and checked before a
checkpoint is resumed, validated, predicted with or exported: MSA, Hydra and every other plan share
parameter names, so without it a checkpoint would load silently into another plan."""
from __future__ import annotations

from typing import Any, Mapping, Optional

import lightning as L
from torch import nn

from ..runtime.class_path import imported_class

__all__ = ["IDENTITY_KEY", "ModelIdentityCheckpoint", "model_identity", "task_mismatch", "plan_mismatch", "short_class",
           "settings_differing", "same_class"]

IDENTITY_KEY = "hydra_dense_model"


def short_class(path: str) -> str:
    """``hydra_dense.tasks.segmentation.SegmentationTask`` -> ``SegmentationTask``."""
    return str(path).rsplit(".", 1)[-1]


def _class_path(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def model_identity(model: nn.Module) -> dict:
    """``task`` (class path), and for a model with a ``backbone``: its class, ``depth``, ``embed_dim``,
    ``attention`` (one label per block, e.g. ``hydra+mean+dwc7``) and ``plan`` (compact text)."""
    identity: dict[str, Any] = {"task": _class_path(model)}
    backbone = getattr(model, "backbone", None)
    if backbone is None:
        return identity
    blocks = getattr(backbone, "blocks", None)
    identity.update(backbone=_class_path(backbone), embed_dim=getattr(backbone, "embed_dim", None),
                    depth=len(blocks) if blocks is not None else None)
    if hasattr(backbone, "describe_plan"):  # a planned backbone: its plan as resolved when it was built
        identity.update(attention=backbone.block_labels, plan=backbone.describe_plan())
    return identity


def same_class(path: str, obj: Any) -> bool:
    """Whether the class at import path ``path`` is ``obj``'s class. Compared as classes, so that
    the two paths of one class (``hydra_dense.tasks.SegmentationTask``, re-exported, and
    ``hydra_dense.tasks.segmentation.SegmentationTask``) agree; as text when ``path`` does not import."""
    cls = imported_class(path)
    return str(path) == _class_path(obj) if cls is None else cls is type(obj)


def task_mismatch(saved: Mapping, model: nn.Module) -> Optional[str]:
    """What differs in the task or backbone class between a checkpoint's saved identity and ``model``."""
    mine = model_identity(model)
    if saved.get("task") and not same_class(saved["task"], model):
        return (f"it holds a {short_class(saved['task'])} ({saved['task']}), but the config builds a "
                f"{short_class(mine['task'])}; use the config the checkpoint was trained with")
    backbone = getattr(model, "backbone", None)
    if saved.get("backbone") and mine.get("backbone") and not same_class(saved["backbone"], backbone):
        return (f"it was trained with a {short_class(saved['backbone'])} backbone, the config builds a "
                f"{short_class(mine['backbone'])}")
    return None


def plan_mismatch(saved: Mapping, model: nn.Module) -> Optional[str]:
    """What differs in the attention each block runs (MSA, Hydra and the other plans share parameter
    names, so only the saved identity tells them apart)."""
    mine = model_identity(model)
    theirs, ours = saved.get("attention"), mine.get("attention")
    if not theirs or not ours or list(theirs) == list(ours):
        return None
    blocks = [i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b] if len(theirs) == len(ours) else []
    where = f" (blocks {blocks[:12]})" if blocks else f" ({len(theirs)} vs {len(ours)} blocks)"
    return (f"it was trained with the attention plan [{saved.get('plan')}], the config's backbone runs "
            f"[{mine.get('plan')}]{where}; resume or evaluate with the plan it was trained with, or start "
            f"other weights deliberately through the backbone's `pretrained:` or conversion")


class ModelIdentityCheckpoint(L.Callback):
    """Writes :func:`model_identity` into every checkpoint (plain strings and ints: LightningCLI reads
    checkpoints with ``weights_only=True``)."""

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        checkpoint[IDENTITY_KEY] = model_identity(pl_module)


def settings_differing(saved: Mapping, configured: Mapping) -> list[str]:
    """``key: checkpoint -> config`` for every task setting both name with different values."""
    def plain(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, Mapping):
            return {k: plain(x) for k, x in v.items()}
        return v

    out = []
    for key in sorted(set(saved) & set(configured)):
        if key.startswith("_") or key == "backbone":
            continue
        if plain(saved[key]) != plain(configured[key]):
            out.append(f"{key}: {saved[key]!r} -> {configured[key]!r}")
    return out
