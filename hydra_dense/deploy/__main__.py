"""``hydra-dense-export`` / ``tools/export.py``: a task YAML (+ checkpoint) -> ONNX, parity-checked.

    python tools/export.py --config configs/segmentation/demo_digits.yaml --ckpt_path last.ckpt \\
        --size 448x448 --out model.onnx [--dynamic --check-size 224x336] [--program]

Further ``--model.init_args...`` arguments override the config, as in tools/train.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

import lightning as L
import torch
from jsonargparse import ArgumentParser

from ..cli import parse_config
from ..runtime.atomic_file import atomic_write_text
from ..runtime.refusal import plain_refusals
from ..checkpoints.resume import check_checkpoint_matches
from .onnx import example_inputs, export_onnx, export_wrapper, onnx_parity


def _size(text: str) -> tuple[int, int]:
    try:
        h, w = (int(v) for v in text.lower().replace(",", "x").split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HxW (e.g. 512x512), got {text!r}") from None
    if h < 1 or w < 1:
        raise argparse.ArgumentTypeError(f"expected a positive HxW (e.g. 512x512), got {text!r}")
    return h, w


def _check_outputs(p: argparse.ArgumentParser, out: Path, program: bool) -> None:
    """``--out`` names the ONNX file (``.onnx``, so that its report ``<stem>.json`` and program
    ``<stem>.pt2`` never land on the file asked for) in a folder this process can write."""
    if out.suffix != ".onnx":
        p.error(f"--out {out}: name the model file with .onnx (its report is written beside it as "
                f"{out.with_suffix('.json').name}, which would otherwise replace or take another file's name)")
    folder = out.parent if str(out.parent) else Path(".")
    if folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
        p.error(f"--out {out}: cannot write into {folder} (permission denied)")
    for path in [out, out.with_suffix(".json")] + ([out.with_suffix(".pt2")] if program else []):
        if path.is_dir():
            p.error(f"--out {out}: {path} is a folder")


def build_task(config: str, ckpt_path: Optional[str], overrides: list[str]) -> torch.nn.Module:
    """The config's model with the checkpoint's weights (checked to match, named when not)."""
    cfg = parse_config(["--config", config, *overrides])
    model_cfg = cfg["model"]
    if ckpt_path:
        backbone = model_cfg["init_args"]["backbone"]
        if "init_args" in backbone and "pretrained" in backbone["init_args"]:
            backbone["init_args"]["pretrained"] = None  # the checkpoint holds the trained weights
    parser = ArgumentParser()
    parser.add_subclass_arguments(L.LightningModule, "model")
    instantiate = getattr(parser, "instantiate", None) or parser.instantiate_classes  # renamed in 4.49
    task = instantiate(parser.parse_object({"model": model_cfg.as_dict()})).model
    if ckpt_path:
        check_checkpoint_matches(task, ckpt_path)
        task.load_state_dict(torch.load(ckpt_path, map_location="cpu", weights_only=False)["state_dict"])
    return task.eval()


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="the task YAML the model was trained with")
    p.add_argument("--ckpt_path", default=None, help="Lightning checkpoint (default: the config's weights)")
    p.add_argument("--size", type=_size, required=True, help="HxW to trace at (multiples of the patch)")
    p.add_argument("--out", required=True, type=Path, help="the .onnx file to write")
    p.add_argument("--dynamic", action="store_true", help="height and width as symbols (backbone, detection pyramid)")
    p.add_argument("--check-size", type=_size, action="append", default=[],
                   help="further HxW to check parity at (with --dynamic)")
    p.add_argument("--program", action="store_true", help="also save the torch.export program (<out>.pt2)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest accepted |onnxruntime - PyTorch|")
    p.add_argument("--allow-untrained", action="store_true",
                   help="export without --ckpt_path: the config's own weights (random, or a pretrained backbone "
                        "under an untrained head)")
    args, overrides = p.parse_known_args(argv)
    if args.check_size and not args.dynamic:
        p.error("--check-size needs --dynamic (a fixed-size export runs at --size only)")
    if args.ckpt_path is None and not args.allow_untrained:
        p.error("no --ckpt_path: the export would hold the config's untrained weights; give the trained checkpoint, "
                "or --allow-untrained to export those weights anyway")
    _check_outputs(p, args.out, args.program)

    missing = [m for m in ("onnx", "onnxscript", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        p.error(f"exporting needs {', '.join(missing)}, from the export extra: pip install -e \".[export]\" "
                "(or pip install 'hydra_dense[export]')")
    task = build_task(args.config, args.ckpt_path, overrides)
    spec = export_wrapper(task, dynamic=args.dynamic)
    sizes = [args.size, *args.check_size]
    inputs = [example_inputs(spec, h, w) for h, w in sizes]  # size errors before the slow export
    start = time.perf_counter()
    program = args.out.with_suffix(".pt2") if args.program else None
    export_onnx(spec, inputs[0], args.out, dynamic=args.dynamic, program=program)
    seconds = time.perf_counter() - start
    errors = {}
    for (h, w), x in zip(sizes, inputs):
        try:
            errors[f"{h}x{w}"] = onnx_parity(args.out, spec, x)
        except Exception as err:  # noqa: BLE001 - onnxruntime refusing a size is a failed check
            print(f"[export] onnxruntime failed at {h}x{w}: {str(err)[:300]}", file=sys.stderr)
            errors[f"{h}x{w}"] = float("inf")
    report = dict(onnx=str(args.out), program=str(program) if program else None, kind=spec.kind,
                  inputs=spec.input_names, outputs=spec.output_names, dynamic=args.dynamic,
                  export_seconds=round(seconds, 1), max_abs_error=errors, tolerance=args.tolerance, notes=spec.notes)
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(report, indent=1))
    for size, err in errors.items():
        print(f"[export] {args.out} at {size}: onnxruntime vs PyTorch max |error| {err:.2e} "
              f"({'ok' if err <= args.tolerance else 'ABOVE'} tolerance {args.tolerance:g})")
    for note in spec.notes:
        print(f"[export] {note}")
    if max(errors.values()) > args.tolerance:
        print(f"[export] parity failed: {args.out} differs from PyTorch by more than {args.tolerance:g}", file=sys.stderr)
        return 1
    return 0


# ``hydra-dense-export`` / ``tools/export.py``: main, refusing plainly (runtime/refusal.py)
entry = plain_refusals(main)


if __name__ == "__main__":
    sys.exit(entry())
