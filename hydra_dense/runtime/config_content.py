"""A config file's identity for reuse: its content, whatever its comments, layout or key order."""
from __future__ import annotations

import json

import yaml

__all__ = ["config_content", "config_identities"]


def config_content(text: str) -> str:
    """``text`` (a YAML config) as canonical text: the parsed YAML dumped with sorted keys, so that a
    comment, the layout or the order of keys does not make another config. Text that does not parse
    stays as it is (whatever reads it next names the fault)."""
    try:
        return "yaml:" + json.dumps(yaml.safe_load(text), sort_keys=True, default=str)
    except yaml.YAMLError:
        return text


def config_identities(text: str) -> tuple[str, str]:
    """What a config is identified by for reuse: its content (:func:`config_content`), then its raw
    text, the form keys kept on disk may have been made from (so those stay valid)."""
    return config_content(text), text
