"""The embedded data sets (demo scenes, clips, tiles, natural images): which ones a config reads, and
preparing them once before anything runs. A config names one by the folder its data paths point at
under the cache (``~/.cache/hydra_dense/data/digit_scenes``, ...)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

import yaml

from ..runtime.shipped import find_shipped
from . import demo_context, demo_detection, demo_instances, demo_segmentation, demo_video, natural_images

__all__ = ["EMBEDDED", "data_paths", "embedded_roots", "prepare_embedded_data", "string_values"]

# folder name under the cache -> what writes it there, or at the given root (cached, idempotent)
EMBEDDED: dict[str, Callable[[Optional[Path]], object]] = {
    "digit_scenes": lambda root: demo_segmentation.prepare(root),
    "digit_scenes_448": lambda root: demo_segmentation.prepare_large(root),
    "context_presence": lambda root: demo_context.prepare("presence", root),
    "context_relation": lambda root: demo_context.prepare("relation", root),
    "context_presence_whole": lambda root: demo_context.prepare_whole("presence", root),
    "context_relation_whole": lambda root: demo_context.prepare_whole("relation", root),
    "moving_digits": lambda root: demo_video.prepare(root),
    "deepforest_trees": lambda root: demo_detection.prepare(root),
    "digit_instances": lambda root: demo_instances.prepare(root),
    "natural_images": lambda root: natural_images.prepare(root),
    "natural_images_all": lambda root: natural_images.prepare(root, all_frames=True),
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


def embedded_roots(config: Path) -> dict[str, set[Optional[Path]]]:
    """The embedded data sets a config reads, each with where to prepare it: the folder the config
    names when it lies in a toolkit cache (``.../hydra_dense/data/<name>``, whichever cache that
    is), else None (``$HYDRA_DENSE_CACHE``'s). A user's own folder that happens to share a name is
    never written into."""
    roots: dict[str, set[Optional[Path]]] = {}
    for path in data_paths(config):
        parts = Path(path).expanduser().parts
        for i, part in enumerate(parts):
            if part in EMBEDDED:
                in_a_cache = i >= 2 and parts[i - 2: i] == ("hydra_dense", "data")
                roots.setdefault(part, set()).add(Path(*parts[: i + 1]) if in_a_cache else None)
    return roots


def prepare_embedded_data(config: Path) -> None:
    """Prepare the embedded data sets a config's data paths point at, where it reads them (cached,
    idempotent)."""
    for folder, roots in embedded_roots(config).items():
        for root in sorted(roots, key=str):
            EMBEDDED[folder](root)
