"""The YAML files a command line names, read strictly before LightningCLI reads them: an empty file,
a key given twice (YAML keeps the last silently) and text that is no YAML are refused naming the
file, key and lines (the CLI's own message names neither file nor line's file)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional, Sequence

import yaml

__all__ = ["ConfigFileError", "check_config_file", "config_files_in_args", "setting_source"]


class ConfigFileError(ValueError):
    """A config file that a run would read wrongly or not at all."""


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping key given twice."""


def _strict_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigFileError(f"key {key!r} is given twice in one mapping (lines {seen[key] + 1} and "
                                  f"{key_node.start_mark.line + 1}); YAML would keep the last silently: remove one")
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def check_config_file(path: Path) -> None:
    """Refuse ``path`` (naming it) when it is empty, gives a key twice, or is not YAML (its line and
    column); a file that does not exist is left to the CLI, which names it."""
    path = Path(path).expanduser()
    if not path.is_file():
        return
    try:
        data = yaml.load(path.read_text(), Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigFileError as err:
        raise ConfigFileError(f"{path}: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigFileError(f"{path}: not valid YAML: {_yaml_problem(err)}") from None
    except UnicodeDecodeError as err:
        raise ConfigFileError(f"{path}: not UTF-8 text (byte {err.start}): a YAML config is a text file") from None
    if data is None:
        raise ConfigFileError(f"{path} is empty (no settings in it): give a config with trainer / model / data "
                              f"sections, e.g. one of configs/segmentation/*.yaml")


def _yaml_problem(err: yaml.YAMLError) -> str:
    """``line L, column C: <what>`` (1-based), with a hint where a tab indents a line."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(err, "problem", None) or str(err)
    if mark is not None and mark.buffer and mark.buffer[mark.pointer:mark.pointer + 1] == "\t":
        what += " (a tab: YAML indents with spaces only)"
    return where + what


def config_files_in_args(args: Iterable[str]) -> list[Path]:
    """The files of every ``--config FILE`` / ``--config=FILE`` / ``-c FILE`` in ``args``."""
    args, found = list(args), []
    for i, arg in enumerate(args):
        if arg in ("--config", "-c") and i + 1 < len(args):
            found.append(Path(args[i + 1]))
        elif arg.startswith("--config="):
            found.append(Path(arg.split("=", 1)[1]))
    return found



def setting_source(args: Sequence[str], key: str) -> Optional[str]:
    """Where the value of the dotted ``key`` (``trainer.max_steps``) that a run reads comes from: the
    last ``--config`` file in ``args`` whose YAML sets it, or ``--key`` itself where the command line
    gives it later (later arguments win). None when neither sets it."""
    args, source = list(args), None
    for i, arg in enumerate(args):
        if arg == f"--{key}" or arg.startswith(f"--{key}="):
            source = f"--{key}"
        elif arg in ("--config", "-c") and i + 1 < len(args) and _sets(Path(args[i + 1]), key):
            source = args[i + 1]
        elif arg.startswith("--config=") and _sets(Path(arg.split("=", 1)[1]), key):
            source = arg.split("=", 1)[1]
    return source


def _sets(path: Path, key: str) -> bool:
    try:
        node = yaml.safe_load(path.expanduser().read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
