"""A job's typed request, read back from the JSON file it wrote for a worker process."""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["request_fields"]


def request_fields(cls: type, path: Path, what: str) -> dict:
    """The fields of a ``cls`` dataclass written to ``path``; a key ``cls`` does not have is refused,
    naming the file (``what``: the kind of request, for the message)."""
    data = json.loads(Path(path).read_text())
    unknown = sorted(set(data) - set(cls.__dataclass_fields__))
    if unknown:
        raise ValueError(f"{path}: not a {what} (unknown keys {unknown})")
    return data
