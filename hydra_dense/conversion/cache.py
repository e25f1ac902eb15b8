"""Converted backbones for ``<plan>@converted`` recipes: run once per (source weights, backbone + plan,
conversion config, steps, extra arguments), cached, and reused by every seed and later comparison."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Literal, Optional

import torch
import yaml
from jsonargparse import Namespace

from ..attention import AttentionPlan
from ..backbones import VideoViT
from ..cli import parse_config
from ..data.embedded import prepare_embedded_data, string_values
from ..data.sources import cache_dir
from ..runtime.atomic_file import atomic_write_text
from ..runtime.class_path import names_subclass_of
from ..runtime.config_content import config_identities
from ..runtime.refusal import StepFailed
from ..runtime.shipped import job_command, job_environment, shipped_file
from . import worker as conversion_worker
from .request import ConversionRequest

__all__ = ["converted_checkpoint", "aligned_checkpoint", "task_backbone_config", "convert_config_for",
           "task_data_arguments", "is_video_backbone", "DEFAULT_CONVERT_CONFIG", "VIDEO_CONVERT_CONFIG",
           "TASK_CONVERT_CONFIG", "ALIGN_CONFIG"]

DEFAULT_CONVERT_CONFIG = "configs/convert/dinov2_s14_hydra_dwc3.yaml"
TASK_CONVERT_CONFIG = "configs/convert/dinov2_s14_task_images.yaml"
VIDEO_CONVERT_CONFIG = "configs/convert/video_demo_hydra_dwc3.yaml"
ALIGN_CONFIG = "configs/convert/dinov2_s14_align.yaml"


def is_video_backbone(backbone_cfg: dict) -> bool:
    """Whether a backbone config's ``class_path`` is a :class:`~hydra_dense.backbones.VideoViT` (or subclass)."""
    return names_subclass_of(backbone_cfg["class_path"], VideoViT)


def convert_config_for(backbone_cfg: dict, images: Literal["natural", "task"] = "natural") -> str:
    """The conversion config (its data and schedule) for a task backbone: the video demo's clips for
    a VideoViT; for an image ViT the natural images (``@converted``) or the task's own training
    images, labels unused (``@from_msa``, ``--from-run``)."""
    if is_video_backbone(backbone_cfg):
        return VIDEO_CONVERT_CONFIG
    return DEFAULT_CONVERT_CONFIG if images == "natural" else TASK_CONVERT_CONFIG


def task_data_arguments(config: Path, overrides: list[str]) -> list[str]:
    """The conversion's data arguments that read a task config's training images (after its
    overrides), as the task saw them; labels are never read."""
    return [f"--data.init_args.task_config={Path(config).resolve()}",
            f"--data.init_args.task_overrides={json.dumps(list(overrides))}"]


def _file_digest(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _data_fingerprint(config_text: str, extra: list[str]) -> str:
    """Hash of the image folders a conversion reads (relative paths, sizes, mtimes), so that a
    cached conversion is not reused after its images changed."""
    values = string_values(yaml.safe_load(config_text) or {})
    values += [a.split("=", 1)[1] for a in extra if "=" in a]
    h = hashlib.sha1()
    for value in values:
        folder = Path(value).expanduser()
        if value and folder.is_dir():
            for f in sorted(folder.rglob("*")):
                if f.is_file():
                    st = f.stat()
                    h.update(f"{f.relative_to(folder)}:{st.st_size}:{int(st.st_mtime)};".encode())
    return h.hexdigest()


def task_backbone_config(config: Path, overrides: list[str]) -> dict:
    """The backbone section (``class_path`` + ``init_args``) of a task config after its overrides,
    as the CLI resolves it (relative backbone YAML paths included), without building anything."""
    backbone = parse_config(["--config", str(config), *overrides])["model"]["init_args"]["backbone"]
    out = backbone.as_dict() if isinstance(backbone, Namespace) else dict(backbone)
    out = {k: v for k, v in out.items() if not k.startswith("__")}  # jsonargparse's own bookkeeping
    if "class_path" not in out:
        raise ValueError(f"{config}: the model's backbone has no class_path; conversion needs a hydra_dense ViT")
    return out


def _conversion_backbone(backbone_cfg: dict, plan: dict) -> dict:
    """The task's backbone config with ``plan``, its own start weights cleared (the conversion's
    source replaces them)."""
    backbone = json.loads(json.dumps(backbone_cfg))
    args = backbone.setdefault("init_args", {})
    args["plan"] = plan
    for start in ("pretrained", "pretrained_image"):
        if start in args:
            args[start] = None
    return backbone


def _conversion_keys(source: str, backbone: dict, config_text: str, steps: int, extra: list[str]) -> tuple[str, str]:
    """What identifies a conversion: the source weights' bytes, the backbone and plan, the config's
    content (:func:`~hydra_dense.runtime.config_content.config_identities`: not its comments, layout
    or key order), the steps, the extra arguments and the images it reads (names, sizes, times). Returns
    that key and the one made with the config's raw text instead, which caches on disk may carry."""
    common = dict(source=_file_digest(Path(source)), backbone=backbone, steps=steps, extra=extra,
                  data=_data_fingerprint(config_text, extra))

    def key(config: str) -> str:
        return hashlib.sha1(json.dumps(dict(common, config=config), sort_keys=True).encode()).hexdigest()[:16]

    by_content, by_text = (key(config) for config in config_identities(config_text))
    return by_content, by_text


def _cache_folder(root: Path, keys: tuple[str, str]) -> Path:
    """The conversion's folder under ``root``: its content key's, or the raw-text key's where only
    that one exists (a cached or half-done conversion kept under it is reused or resumed)."""
    by_content, by_text = (root / key for key in keys)
    return by_text if by_text.is_dir() and not by_content.is_dir() else by_content


def _run_conversion(backbone: dict, plan: dict, source: str, conv_cfg: Path, steps: int, extra: list[str],
                    folder: Path) -> tuple[list[str], float]:
    """A conversion worker process into ``folder`` (resumed there if it was interrupted), reading its
    :class:`ConversionRequest` from ``folder/request.json``; returns the conversion's command line
    (``hydra-dense-convert`` takes it as it is) and its minutes of wall time."""
    # every plan field written out: given as --model.init_args.backbone, this backbone's init_args are
    # merged into the conversion config's, so a field left out (e.g. local) would be taken from there
    backbone = dict(backbone, init_args=dict(backbone["init_args"], plan=asdict(AttentionPlan.coerce(plan))))
    backbone_yaml = atomic_write_text(folder / "backbone.yaml", yaml.safe_dump(backbone, sort_keys=False))
    request = ConversionRequest(config=str(conv_cfg), backbone_yaml=str(backbone_yaml), source=str(source),
                                folder=str(folder), steps=steps, overrides=list(extra))
    request_file = atomic_write_text(folder / "request.json", json.dumps(request.as_json(), indent=1))
    cmd = ["hydra-dense-convert", *request.cli_arguments()]
    print(f"\n=== converting {source} -> {plan} ({steps} steps; cached in {folder}) ===", flush=True)
    t0 = time.time()
    proc = subprocess.run(job_command(conversion_worker, str(request_file)), env=job_environment())
    if proc.returncode == 0 and not (folder / "converted.pth").is_file():
        raise StepFailed(f"the conversion ended without training a step (exit 0, no converted.pth in {folder}): most "
                         f"often its data gives no full training batch (fewer images than its batch_size; Lightning "
                         f"says 'No training batches' above); give it more images or a smaller batch: {' '.join(cmd)}")
    if proc.returncode != 0:
        raise StepFailed(f"conversion failed (exit {proc.returncode}; its message is above): {' '.join(cmd)}")
    return cmd, (time.time() - t0) / 60


def _readable(ckpt: Path) -> bool:
    """Whether a cached checkpoint loads (a copy cut short by a full disk or a killed copy does not)."""
    try:
        torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)
        return True
    except Exception:  # noqa: BLE001 - any failure to read it means it cannot be reused
        return False


def _conversion_info(ckpt: Path, minutes: float, cmd: list[str]) -> dict:
    """A converted checkpoint's own record, summed up: the per-block errors averaged over the
    converted blocks, the feature errors averaged over levels."""
    meta = torch.load(ckpt, map_location="cpu", weights_only=True)["hydra_dense"]
    blocks = meta["converted_blocks"]
    mean = lambda xs: sum(xs[i] for i in blocks) / len(blocks)  # noqa: E731
    level_mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return dict(minutes=minutes, steps=meta["steps"], data=meta["data"], error_before=mean(meta["error_before"]),
                error_after=mean(meta["error_after"]), feature_error_before=meta.get("feature_error_before"),
                feature_error_after=meta.get("feature_error_after"),
                level_error_before=level_mean(meta.get("level_error_before")),
                level_error_after=level_mean(meta.get("level_error_after")), objective=meta.get("objective", "blocks"),
                table=str(ckpt.with_name("converted_errors.md")), command=" ".join(cmd))


def converted_checkpoint(backbone_cfg: dict, plan: dict, source: str, convert_config: str, steps: Optional[int],
                         extra: Optional[list[str]] = None, out_root: Optional[Path] = None) -> tuple[Path, dict]:
    """``(checkpoint, info)`` of ``source`` converted into ``backbone_cfg`` with ``plan``, run once per
    key (:func:`_conversion_keys`) and cached.

    ``steps``: None = the conversion config's ``trainer.max_steps``. ``info``: ``minutes`` (wall time
    of the conversion that made it), ``steps``, ``data`` (the images or clips it used),
    ``error_before`` / ``error_after`` (mean per-block relative error on held-out inputs), ``table``
    (the per-block Markdown table) and ``cached`` (reused, not run now).
    """
    extra = list(extra or [])
    conv_cfg = shipped_file(convert_config, "--convert-config")
    backbone = _conversion_backbone(backbone_cfg, plan)
    text = conv_cfg.read_text()
    # the key fingerprints the images the conversion reads, so they must exist before it is taken
    # (otherwise a first run on a fresh machine caches its result under a key no later run computes)
    prepare_embedded_data(conv_cfg)
    steps = steps or ((yaml.safe_load(text) or {}).get("trainer") or {}).get("max_steps")
    if not steps:
        raise ValueError(f"{conv_cfg}: no trainer.max_steps; give the conversion's steps (--convert-steps)")
    folder = _cache_folder(out_root or cache_dir() / "converted", _conversion_keys(source, backbone, text, steps, extra))
    ckpt, info_path = folder / "converted.pth", folder / "conversion.json"
    if ckpt.is_file() and info_path.is_file():
        if _readable(ckpt):
            return ckpt, dict(json.loads(info_path.read_text()), cached=True)
        print(f"[compare] the cached conversion {ckpt} cannot be read (truncated or damaged): converting again "
              f"from the start", flush=True)
        info_path.unlink()
        ckpt.unlink()
        shutil.rmtree(folder / "run", ignore_errors=True)  # its finished last.ckpt would resume into no step
    cmd, minutes = _run_conversion(backbone, plan, source, conv_cfg, steps, extra, folder)
    info = _conversion_info(ckpt, minutes, cmd)
    atomic_write_text(info_path, json.dumps(info, indent=1))
    return ckpt, dict(info, cached=False)


def aligned_checkpoint(backbone_cfg: dict, plan: dict, source: str, stage1: tuple[Path, dict], align_config: str,
                       task_config: Optional[Path] = None, task_overrides: Optional[list[str]] = None,
                       steps: Optional[int] = None, extra: Optional[list[str]] = None) -> tuple[Path, dict]:
    """Stage 2 after :func:`converted_checkpoint`'s stage 1: the whole student, started from ``stage1``'s
    checkpoint, aligned to ``source``'s features at the backbone's ``out_indices`` (cached the same way).

    ``task_config``: its training images (labels unused) join the alignment config's images.
    The info: stage 2's, with ``minutes`` of both stages, ``error_before`` stage 1's (the per-block
    error of the plan before any conversion), ``stage1`` (stage 1's info) and ``error_text`` for tables.
    """
    first, first_info = stage1
    args = [f"--model.init_args.student_init={first}", *(extra or [])]
    if task_config is not None:
        args += task_data_arguments(task_config, list(task_overrides or []))
    ckpt, info = converted_checkpoint(backbone_cfg, plan, source, align_config, steps, args)
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    text = (f"blocks {fmt(first_info['error_before'])} -> {fmt(first_info['error_after'])} -> "
            f"{fmt(info['error_after'])}; features {fmt(info.get('level_error_before'))} -> "
            f"{fmt(info.get('level_error_after'))}")
    combined = dict(info, minutes=first_info["minutes"] + info["minutes"], error_before=first_info["error_before"],
                    stage1=first_info, error_text=text,
                    data=f"stage 1: {first_info['data']}; stage 2: {info['data']}")
    return ckpt, combined
