"""The embedded data sets (demo scenes, clips, tiles, natural images): which ones a config reads, and
preparing them once before anything runs. A config names one by the folder its data paths point at
under the cache (``~/.cache/hydra_dense/data/digit_scenes``, ...)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import yaml

from ..runtime.shipped import find_shipped
from . import demo_detection, demo_instances, demo_segmentation, demo_video, natural_images

__all__ = ["EMBEDDED", "prepare_embedded_data", "data_paths", "string_values"]

# folder name under the cache -> what writes it (cached, idempotent); looked up when called
EMBEDDED: dict[str, Callable[[], object]] = {
    "digit_scenes": lambda: demo_segmentation.prepare(),
    "digit_scenes_448": lambda: demo_segmentation.prepare_large(),
    "moving_digits": lambda: demo_video.prepare(),
    "deepforest_trees": lambda: demo_detection.prepare(),
    "digit_instances": lambda: demo_instances.prepare(),
    "natural_images": lambda: natural_images.prepare(),
    "natural_images_all": lambda: natural_images.prepare(all_frames=True),
}


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
    loaded = yaml.safe_load(Path(config).read_text()) or {}
    data = loaded.get("data") if isinstance(loaded.get("data"), dict) else {}
    found = string_values(data.get("init_args", {}))
    for section in (loaded.get("model"), data):
        mm_config = ((section or {}).get("init_args") or {}).get("config") if isinstance(section, dict) else None
        if isinstance(mm_config, str) and mm_config.endswith(".py"):
            path = find_shipped(mm_config)
            if path is not None:
                found += re.findall(r"""['"]([^'"\n]+)['"]""", path.read_text())
    return found


def prepare_embedded_data(config: Path) -> None:
    """Prepare the embedded data sets a config's data paths point at (cached, idempotent)."""
    folders = {part for path in data_paths(config) for part in Path(path).parts}
    for folder, prepare in EMBEDDED.items():
        if folder in folders:
            prepare()
