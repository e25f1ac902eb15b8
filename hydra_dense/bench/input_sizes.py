"""Parsing benchmark specs: input sizes, dtypes, devices — with errors that name the value.

Plan names (``hybrid4+dwc3``, ``vitdet_hydra``, ...) are :func:`~hydra_dense.attention.plan_from_name`'s."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["InputSize", "parse_size", "parse_dtype", "parse_devices"]

_ALIASES = {"1080p": "1080x1920", "720p": "720x1280", "4k": "2160x3840"}


@dataclass(frozen=True)
class InputSize:
    """An image (``frames is None``) or clip size in pixels."""

    height: int
    width: int
    frames: Optional[int] = None

    def __str__(self) -> str:
        hw = f"{self.height}x{self.width}"
        return f"{self.frames}x{hw}" if self.frames else hw


def parse_size(text: str) -> InputSize:
    """``"224"`` -> 224x224; ``"HxW"``; ``"1080p"``; ``"FxHxW"`` (a clip of F frames)."""
    raw = text.strip().lower()
    raw = _ALIASES.get(raw, raw)
    if not re.fullmatch(r"\d+(x\d+){0,2}", raw):
        raise ValueError(f"bad size {text!r}: use S, HxW, FxHxW or one of {sorted(_ALIASES)}")
    parts = [int(p) for p in raw.split("x")]
    if any(p <= 0 for p in parts):
        raise ValueError(f"bad size {text!r}: every dimension must be positive")
    if len(parts) == 1:
        return InputSize(parts[0], parts[0])
    if len(parts) == 2:
        return InputSize(parts[0], parts[1])
    return InputSize(parts[1], parts[2], parts[0])


def parse_dtype(name: str) -> torch.dtype:
    table = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
             "fp16": torch.float16, "float16": torch.float16}
    if name not in table:
        raise ValueError(f"unknown dtype {name!r}; choose from fp32, bf16, fp16")
    return table[name]


def parse_devices(text: str) -> list[torch.device]:
    """Comma-separated devices. A single missing device is an error; when several are asked for,
    missing ones are skipped with a message."""
    names = [d.strip() for d in text.split(",") if d.strip()]
    ok = []
    for name in names:
        dev = torch.device(name)
        present = dev.type == "cpu" or (dev.type == "cuda" and torch.cuda.is_available()
                                        and (dev.index or 0) < torch.cuda.device_count())
        if present:
            ok.append(dev)
        elif len(names) == 1:
            raise ValueError(f"device {name!r} is not present on this machine (torch.cuda.is_available()="
                             f"{torch.cuda.is_available()})")
        else:
            print(f"skipping device {name!r}: not present on this machine")
    if not ok:
        raise ValueError(f"none of the devices {names} is present")
    return ok
