"""ViT size presets, shared by the image and the video ViT."""
from __future__ import annotations

from typing import Optional

__all__ = ["VIT_SIZES", "vit_dims", "configured_depth"]

VIT_SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(embed_dim=192, depth=12, num_heads=3),
    "small": dict(embed_dim=384, depth=12, num_heads=6),
    "base": dict(embed_dim=768, depth=12, num_heads=12),
    "large": dict(embed_dim=1024, depth=24, num_heads=16),
}


def vit_dims(size: Optional[str], embed_dim: Optional[int], depth: Optional[int], num_heads: Optional[int],
             owner: str = "ViT") -> dict[str, int]:
    """``embed_dim`` / ``depth`` / ``num_heads`` of a preset (``tiny`` ... ``large``), each overridden
    when given; ``size=None`` needs all three. Errors name ``owner`` (the class being built)."""
    if size is not None and size not in VIT_SIZES:
        raise ValueError(f"{owner}: unknown size {size!r}; choose from {sorted(VIT_SIZES)} or give "
                         "embed_dim/depth/num_heads")
    dims = dict(VIT_SIZES[size]) if size is not None else {}
    dims.update({k: v for k, v in (("embed_dim", embed_dim), ("depth", depth), ("num_heads", num_heads))
                 if v is not None})
    missing = {"embed_dim", "depth", "num_heads"} - set(dims)
    if missing:
        raise ValueError(f"{owner}: size=None needs {sorted(missing)}")
    if dims["embed_dim"] % dims["num_heads"]:
        raise ValueError(f"{owner}: embed_dim {dims['embed_dim']} is not divisible by num_heads {dims['num_heads']}")
    return dims


def configured_depth(init_args: dict) -> int:
    """The depth a backbone config builds: its ``depth``, else its ``size`` preset's (``base``, the
    constructors' default, when neither is given), without building it."""
    if init_args.get("depth") is not None:
        return int(init_args["depth"])
    size = init_args.get("size", "base")
    if size not in VIT_SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {sorted(VIT_SIZES)} or give embed_dim/depth/num_heads")
    return VIT_SIZES[size]["depth"]
