"""Backbone YAML files checked before the config parser reads them: a misspelt key or an unknown
attention kind inside a nested ``backbone: file.yaml`` otherwise reaches the user as the parser's
"Config file loop detected", which names neither the key nor the allowed values. A plan written
inside a ``--config`` is checked here too, so its error names that file and the key path, and a plan
given as an option names the option."""
from __future__ import annotations

import difflib
import inspect
import re
import typing
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

import yaml
from jsonargparse import ArgumentParser

from ..attention import AttentionPlan
from ..runtime.class_path import imported_class
from .sizes import configured_depth

__all__ = ["check_backbone_file", "check_inline_plans", "backbone_files_in_args", "BackboneFileError"]


class BackboneFileError(ValueError):
    """A backbone YAML that cannot build its backbone, naming the file and the key."""


def check_backbone_file(path: Path) -> None:
    """Raise :class:`BackboneFileError` naming ``path``, the key and the allowed values when its
    ``class_path`` cannot be imported, an ``init_args`` key is not a constructor argument, or its
    ``plan`` is not a valid attention plan."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise BackboneFileError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(data, dict) or "class_path" not in data:
        raise BackboneFileError(f"{path}: a backbone file needs class_path and init_args (e.g. class_path: "
                                "hydra_dense.backbones.ViT)")
    cls = imported_class(data["class_path"])
    if cls is None:
        raise BackboneFileError(f"{path}: class_path {data['class_path']!r} cannot be imported")
    name = cls.__name__
    init_args = data.get("init_args") or {}
    if not isinstance(init_args, dict):
        raise BackboneFileError(f"{path}: init_args must be a mapping of {name}'s arguments")
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    allowed = [k for k in params if k != "self" and params[k].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                                             inspect.Parameter.VAR_KEYWORD)]
    for key in init_args:
        if key not in params and not takes_any:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise BackboneFileError(f"{path}: init_args.{key} is not an argument of {name}{hint}; its arguments: "
                                    f"{', '.join(allowed)}")
    # the plan is checked by AttentionPlan below, which names the bad kind and the kinds there are
    _check_types(path, cls, {k: v for k, v in init_args.items() if k in params and k != "plan"})
    if "plan" in init_args:
        _check_plan(f"{path}: init_args", init_args, resolve=True)


# where a backbone's arguments sit in a task config, and the option that sets its plan
_BACKBONE_ARGS = "model.init_args.backbone.init_args"
_PLAN_OPTION = f"--{_BACKBONE_ARGS}.plan"


def check_inline_plans(args: Iterable[str]) -> None:
    """Raise :class:`BackboneFileError` naming the config and ``model.init_args.backbone.init_args.plan``
    when a backbone written inside a ``--config`` has a plan with an unknown key or value, or naming
    the option when ``--model.init_args.backbone.init_args.plan`` has one. A config's plan is
    resolved over its blocks only when the same mapping gives ``size`` or ``depth`` (another config
    may set them); an option's plan is not (its blocks are counted when the model is built)."""
    args = list(args)
    for path, backbone in _config_backbones(args):
        init_args = backbone.get("init_args") if isinstance(backbone, dict) else None
        if isinstance(init_args, dict) and "plan" in init_args:
            _check_plan(f"{path}: {_BACKBONE_ARGS}", init_args,
                        resolve="size" in init_args or "depth" in init_args)
    for value in _option(args, _PLAN_OPTION):
        try:
            plan = yaml.safe_load(value)
        except yaml.YAMLError:
            continue  # the parser names an unreadable value itself
        _check_plan(f"--{_BACKBONE_ARGS}", {"plan": plan}, resolve=False)


def _check_plan(where: str, init_args: dict, resolve: bool) -> None:
    """``init_args["plan"]`` as :class:`AttentionPlan` reads it, resolved over the configured depth
    when ``resolve``; an error names ``where`` and the key."""
    try:
        depth = configured_depth(init_args) if resolve else None
    except ValueError as err:
        raise BackboneFileError(f"{where}.size: {err}") from None
    try:
        plan = AttentionPlan.coerce(init_args["plan"])
        if depth is not None:
            plan.resolve(depth)
    except (ValueError, TypeError) as err:
        raise BackboneFileError(f"{where}.plan: {err}") from None


def _check_types(path: Path, cls: type, init_args: dict) -> None:
    """Each value against its constructor annotation (jsonargparse's own check, the one LightningCLI
    runs later), reported as one line naming the key, the value and the type it needs."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(cls, fail_untyped=False, sub_configs=True)
    try:
        parser.parse_object(init_args)
    except Exception as err:  # noqa: BLE001 - jsonargparse's ArgumentError, or a type it cannot adapt
        match = re.search(r'key "([^"]+)"', str(err))
        key = match.group(1) if match else None
        if key is None or key not in init_args:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise BackboneFileError(f"{path}: init_args: {first}") from None
        hints = typing.get_type_hints(cls.__init__)
        wanted = _type_text(hints.get(key))
        raise BackboneFileError(f"{path}: init_args.{key} is {init_args[key]!r}, but {cls.__name__} takes {wanted} "
                                f"there") from None


def _type_text(annotation) -> str:
    """``Optional[int]`` -> ``an int (or null)``; other annotations as typing prints them."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = len(args) < len(typing.get_args(annotation))
    base = args[0] if optional and len(args) == 1 else annotation
    text = {int: "an int", float: "a number", bool: "true or false", str: "a string"}.get(base, str(base).replace("typing.", ""))
    return text + (" (or null)" if optional else "")


def _option(args: Sequence[str], name: str) -> list[str]:
    """Every value of ``--name value`` / ``--name=value`` in ``args``."""
    out = []
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith(name + "="):
            out.append(arg.split("=", 1)[1])
    return out


def backbone_files_in_args(args: Iterable[str]) -> list[Path]:
    """The backbone YAML files a command line names: ``--model.init_args.backbone=<file>`` and
    ``backbone: <file>`` inside each ``--config`` (relative to that config), existing files only."""
    args = list(args)
    found: list[Path] = []
    for value in _option(args, "--model.init_args.backbone"):
        found.append(Path(value).expanduser())
    for path, backbone in _config_backbones(args):
        if isinstance(backbone, str):
            found.append((path.parent / backbone).expanduser() if not Path(backbone).is_absolute() else Path(backbone))
    return [p for p in found if p.suffix in (".yaml", ".yml") and p.is_file()]


def _config_backbones(args: Iterable[str]) -> Iterator[tuple[Path, object]]:
    """Each readable ``--config`` / ``-c`` file of ``args`` with its ``model.init_args.backbone``
    entry (a file name, a mapping, or None)."""
    args = list(args)
    for config in _option(args, "--config") + _option(args, "-c"):
        path = Path(config).expanduser()
        try:
            data = yaml.safe_load(path.read_text()) if path.is_file() else None
        except yaml.YAMLError:
            continue  # the parser names a broken config itself
        yield path, _backbone_entry(data)


def _backbone_entry(data) -> Optional[object]:
    if not isinstance(data, dict):
        return None
    model = data.get("model")
    if not isinstance(model, dict):
        return None
    return (model.get("init_args") or {}).get("backbone") if isinstance(model.get("init_args"), dict) else None
