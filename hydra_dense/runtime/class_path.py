"""Classes named in configs (``class_path: package.module.Name``), imported and compared as classes.

A config names its task, backbone and data module by import path. Asking what kind of thing it is
(a video backbone? a segmentation task?) is a question about the class, so a user's subclass
answers as its base does: the class is imported and checked with ``issubclass``, never by its name.
"""
from __future__ import annotations

import importlib
from typing import Optional

__all__ = ["imported_class", "names_subclass_of"]


def imported_class(class_path: object) -> Optional[type]:
    """The class at ``class_path`` (``package.module.Name``); None when it does not import or is no class."""
    module, _, name = str(class_path).rpartition(".")
    if not module:
        return None
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None
    return found if isinstance(found, type) else None


def names_subclass_of(class_path: object, base: type) -> bool:
    """Whether ``class_path`` imports as ``base`` or a subclass of it (False when it does not import)."""
    cls = imported_class(class_path)
    return cls is not None and issubclass(cls, base)
