"""A finished comparison run's model built again from its ``request.json`` and loaded from its saved
weights: what the diagnostics that take a trained model apart start from."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import torch

from .request import RunRequest
from .run_setup import build_run
from .worker import request_overrides

__all__ = ["NotASavedRun", "saved_run"]


class NotASavedRun(ValueError):
    """The folder is no finished run with saved weights; the message names the file at fault."""


def saved_run(run: Path, extra_overrides: Sequence[str] = (), work_dir: str = "diagnostic"):
    """``(request, result, model, datamodule, trainer)`` of the finished run in ``run``: the task
    built from the run's config and overrides (the pretrained start left out: the saved weights
    replace it) plus ``extra_overrides``, its weights loaded; Lightning writes under ``run/work_dir``."""
    run = Path(run)
    for name in ("request.json", "result.json"):
        if not (run / name).is_file():
            raise NotASavedRun(f"{run / name} does not exist (a finished tools/compare.py run folder)")
    req, result = RunRequest.read(run / "request.json"), json.loads((run / "result.json").read_text())
    if not Path(result.get("weights") or "").is_file():
        raise NotASavedRun(f"{run} saved no weights (final_weights.pt)")
    if not Path(req.config).is_file():
        raise NotASavedRun(f"{run / 'request.json'} names the config {req.config}, which no longer exists")
    overrides = [o for o in request_overrides(req) if "pretrained=" not in o]
    overrides += ["--trainer.enable_progress_bar=false", *extra_overrides]
    model, dm, trainer = build_run(Path(req.config), overrides, run / work_dir, req.plan_name)
    model.load_state_dict(torch.load(result["weights"], map_location="cpu", weights_only=True))
    return req, result, model, dm, trainer
