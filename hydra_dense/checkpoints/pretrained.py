"""Load timm-format ViT state dicts (timm, DeiT, MAE, DINOv2) into hydra_dense backbones.

The checkpoint's position embeddings are resampled to the model's grid, its patch-embedding
kernel to the model's patch size, and keys that only a classifier has (heads, distillation
token, MAE decoder) are dropped and reported. Any attention plan loads the same weights.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Union

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from timm.layers import resample_abs_pos_embed, resample_patch_embed
from torch import nn

log = logging.getLogger(__name__)

__all__ = ["read_state_dict", "read_checkpoint", "adapt_vit_state_dict", "load_pretrained", "LoadReport",
           "CheckpointError", "is_plan_added"]

# Keys a backbone never needs: classifier heads, DeiT distillation, MAE decoder, DINO masks.
_DROP_PREFIXES = ("head.", "head_dist.", "dist_token", "mask_token", "decoder", "fc_norm.", "attn_pool.",
                  "pre_logits.")
_WRAPPERS = ("state_dict", "model", "module", "model_ema", "teacher", "student")
_PREFIXES = ("module.", "model.", "backbone.", "encoder.", "teacher.backbone.")
_PREFIXED_QKV = re.compile(r"^(.*?)blocks\.\d+\.attn\.qkv\.weight$")


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not match the model."""


def is_plan_added(key: str) -> bool:
    """Parameters a plan adds that start as a no-op (zero-initialised local mixing, a unit global
    gain): new, not missing."""
    return ".local.conv." in key or ".local_window." in key or key.endswith(".global_log_gain")


@dataclass
class LoadReport:
    """What :func:`load_pretrained` did: keys missing from / unexpected in the checkpoint and
    the adaptations made (resampling, dropped keys)."""

    source: str
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    adapted: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"loaded {self.source}"]
        new = [f"{len(self.new)} tensors ({self.new[0]} ...) that start as a no-op (local mixing at zero, "
               "global gains at 1)"] if self.new else []
        for title, keys in (("adapted", self.adapted), ("new in this plan", new),
                            ("missing (kept at init)", self.missing), ("unexpected (ignored)", self.unexpected)):
            if keys:
                lines.append(f"  {title}: " + ", ".join(keys))
        return "\n".join(lines)


def read_state_dict(path: Union[str, Path]) -> dict[str, torch.Tensor]:
    """Read a state dict from ``.pth`` / ``.pt`` / ``.bin`` / ``.ckpt`` / ``.safetensors``.

    Unwraps the usual containers (``state_dict``, ``model``, ``module``, ``teacher`` …) and
    strips a common prefix (``module.``, ``backbone.`` …) when the ViT keys sit under one.
    """
    return read_checkpoint(path)[0]


def read_checkpoint(path: Union[str, Path]) -> tuple[dict[str, torch.Tensor], dict]:
    """:func:`read_state_dict` plus the ``hydra_dense`` metadata a converted checkpoint carries
    (the attention each block was converted for; ``{}`` for any other checkpoint)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint {p} does not exist")
    try:
        if p.suffix == ".safetensors":
            obj = load_file(str(p))
        else:
            obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as err:
        raise CheckpointError(f"checkpoint {p} could not be read: {err}") from err
    meta = dict(obj["hydra_dense"]) if isinstance(obj, Mapping) and isinstance(obj.get("hydra_dense"), Mapping) else {}
    while isinstance(obj, Mapping) and not any(isinstance(v, torch.Tensor) for v in obj.values()):
        key = next((k for k in _WRAPPERS if isinstance(obj.get(k), Mapping)), None)
        if key is None:
            raise CheckpointError(f"checkpoint {p} holds no tensors (top-level keys: {sorted(obj)[:10]})")
        obj = obj[key]
    if not isinstance(obj, Mapping):
        raise CheckpointError(f"checkpoint {p} is not a state dict (got {type(obj).__name__})")
    sd = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    return _without_vit_prefix(sd), meta


def _without_vit_prefix(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The ViT's tensors with the prefix they sit under dropped (``backbone.`` in a segmentation task's
    weights, ``detector.backbone.vit.`` in a detection task's); tensors outside it (heads) are left out.
    A checkpoint holding more than one ViT (a teacher and a student) takes the first of ``_PREFIXES``."""
    prefixes = {m.group(1) for k in sd if (m := _PREFIXED_QKV.match(k))}
    if "" in prefixes or not prefixes:
        return sd
    if len(prefixes) == 1:
        (prefix,) = prefixes
        return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    for prefix in _PREFIXES:
        if not any(k.startswith("blocks.") for k in sd) and any(k.startswith(prefix + "blocks.") for k in sd):
            sd = {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    return sd


def _split_prefix(num_tokens: int) -> int:
    """Number of prefix (cls / register) entries in a pos-embed of ``num_tokens`` rows whose
    grid part is square."""
    for prefix in range(0, 9):
        n = num_tokens - prefix
        if n > 0 and math.isqrt(n) ** 2 == n:
            return prefix
    raise CheckpointError(f"pos_embed with {num_tokens} tokens has no square grid part")


def adapt_vit_state_dict(state_dict: Mapping[str, torch.Tensor], model: nn.Module) -> tuple[dict, list[str]]:
    """Map a timm-format ViT state dict onto ``model`` (a :class:`~hydra_dense.backbones.ViT`).

    Returns the adapted dict and a list of human-readable notes on what was changed.
    """
    own = model.state_dict()
    sd, notes = {}, []
    dropped = [k for k in state_dict if k.startswith(_DROP_PREFIXES) and k not in own]
    if dropped:
        notes.append(f"dropped {len(dropped)} classifier/decoder keys ({', '.join(sorted(dropped)[:4])}{'…' if len(dropped) > 4 else ''})")
    for key, val in state_dict.items():
        if key in dropped:
            continue
        if key in ("cls_token", "reg_token") and key not in own:
            notes.append(f"dropped {key} (the model has none)")
            continue
        sd[key] = val

    if "pos_embed" in sd and "pos_embed" in own:
        src, dst = sd["pos_embed"], own["pos_embed"]
        if src.shape != dst.shape:
            src_prefix = _split_prefix(src.shape[1])
            dst_prefix = 0 if getattr(model, "no_embed_class", False) else getattr(model, "num_prefix_tokens", 0)
            grid = src[:, src_prefix:]
            old = math.isqrt(grid.shape[1])
            new_hw = tuple(model.patch_embed.grid_size)
            grid = resample_abs_pos_embed(grid.float(), new_size=new_hw, old_size=(old, old), num_prefix_tokens=0,
                                          antialias=getattr(model, "pos_embed_antialias", True)).to(src.dtype)
            prefix = src[:, :min(src_prefix, dst_prefix)]
            if dst_prefix > prefix.shape[1]:
                prefix = torch.cat([prefix, dst.new_zeros(1, dst_prefix - prefix.shape[1], dst.shape[2])], 1)
            sd["pos_embed"] = torch.cat([prefix, grid], dim=1)
            notes.append(f"pos_embed resampled {old}x{old} -> {new_hw[0]}x{new_hw[1]} (prefix {src_prefix} -> {dst_prefix})")

    key = "patch_embed.proj.weight"
    if key in sd and key in own and sd[key].shape[-2:] != own[key].shape[-2:]:
        old = tuple(sd[key].shape[-2:])
        sd[key] = resample_patch_embed(sd[key].float(), list(own[key].shape[-2:])).to(sd[key].dtype)
        notes.append(f"patch_embed kernel resampled {old} -> {tuple(own[key].shape[-2:])}")

    for key in [k for k in sd if k.endswith(("rel_pos_h", "rel_pos_w")) and k in own]:
        if sd[key].shape != own[key].shape:
            sd[key] = F.interpolate(sd[key].T[None].float(), size=own[key].shape[0], mode="linear")[0].T
            notes.append(f"{key} interpolated to {own[key].shape[0]} positions")

    wrong = [f"{k} has shape {tuple(v.shape)} but the model expects {tuple(own[k].shape)}"
             for k, v in sd.items() if k in own and own[k].shape != v.shape]
    if wrong:
        raise CheckpointError(
            f"{len(wrong)} checkpoint tensors do not fit the model (different embed_dim / mlp_ratio?): "
            + "; ".join(wrong[:5]) + ("; …" if len(wrong) > 5 else "")
        )
    return sd, notes


def load_pretrained(
    model: nn.Module,
    source: Union[str, Path, Mapping[str, torch.Tensor]],
    strict: bool = False,
    verbose: bool = True,
) -> LoadReport:
    """Load a timm-format ViT checkpoint (a path or a state dict) into ``model``.

    ``strict=True`` raises :class:`CheckpointError` naming every missing and unexpected key;
    otherwise those are reported (logged) and the rest is loaded. Relative-position tables a
    plan adds (windowed blocks) count as missing only when ``strict``.
    """
    name = str(source) if not isinstance(source, Mapping) else "<state dict>"
    raw, meta = read_checkpoint(source) if not isinstance(source, Mapping) else (dict(source), {})
    sd, notes = adapt_vit_state_dict(raw, model)
    plan_problem = _converted_plan_mismatch(meta, model)
    if plan_problem and strict:
        raise CheckpointError(f"checkpoint {name} does not match the model's attention plan: {plan_problem}")
    result = model.load_state_dict(sd, strict=False)
    missing = [k for k in result.missing_keys if not is_plan_added(k)]
    report = LoadReport(name, missing, list(result.unexpected_keys), notes,
                        [k for k in result.missing_keys if is_plan_added(k)])
    if plan_problem:
        report.adapted.append(f"WARNING: {plan_problem}")
    if strict and (report.missing or report.unexpected):
        raise CheckpointError(
            f"checkpoint {name} does not match the model: missing keys {report.missing}; "
            f"unexpected keys {report.unexpected}"
        )
    if verbose:
        log.info("%s", report)
        if report.missing or report.unexpected or report.new or plan_problem:
            print(report)
    return report


def _converted_plan_mismatch(meta: Mapping, model: nn.Module) -> str:
    """'' when a converted checkpoint's blocks run the attention they were converted for in
    ``model`` (local mixing may be added or kept); else what differs, naming the blocks' keys."""
    converted = meta.get("converted_blocks")
    labels = meta.get("attention_kinds")
    mine = getattr(model, "block_labels", None)  # a planned backbone's labels, as resolved when built
    if not converted or not labels or not isinstance(mine, list):
        return ""
    if len(mine) != len(labels):
        return f"it was converted for {len(labels)} blocks, the model has {len(mine)}"
    wrong = [i for i in converted if mine[i].split("+")[0] != str(labels[i]).split("+")[0]]
    if not wrong:
        return ""
    shown = ", ".join(f"blocks.{i}.attn.qkv/proj ({labels[i]} vs {mine[i]})" for i in wrong[:4])
    return (f"{len(wrong)} block(s) were converted for another attention than the model runs: {shown}"
            f"{' ...' if len(wrong) > 4 else ''}; use the plan it was converted for ({meta.get('plan')})")
