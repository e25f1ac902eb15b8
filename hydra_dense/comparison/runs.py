"""One comparison run (a recipe with one seed) in its own worker process, reused when finished."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Optional

from ..runtime.atomic_file import atomic_write_text
from ..runtime.folder_lock import folder_lock
from ..runtime.refusal import StepFailed
from ..runtime.shipped import job_command, job_environment
from . import worker
from .progress import JobProgress
from .request import RunRequest

__all__ = ["run_or_reuse", "run_folder", "read_finished", "RunClash"]


def run_folder(out: Path, recipe: str, seed: int) -> Path:
    """Where the comparison in ``out`` keeps one recipe's run of one seed."""
    return Path(out) / recipe / f"seed{seed}"


def _same_request_was_started(req: RunRequest, run_dir: Path) -> bool:
    """Whether ``run_dir`` holds an unfinished attempt of exactly this request (a killed job)."""
    old = run_dir / "request.json"
    try:
        return req.is_key(json.loads(old.read_text()).get("key"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False


def _train_in_subprocess(req: RunRequest, run_dir: Path, rerun: bool) -> dict:
    """Train ``req`` in a worker process. A finished result already there (``--rerun``) stays until
    the worker replaces it with the new one, so a rerun killed half-way loses nothing."""
    run_dir.mkdir(parents=True, exist_ok=True)
    resume = not rerun and _same_request_was_started(req, run_dir)
    atomic_write_text(run_dir / "request.json", json.dumps(req.as_json(), indent=1))
    mode = ["--resume"] if resume else []
    started = time.time()
    proc = subprocess.run(job_command(worker, *mode, str(run_dir / "request.json")), env=job_environment())
    done = run_dir / "result.json"
    if proc.returncode != 0 or not done.is_file() or done.stat().st_mtime < started - 1:
        raise StepFailed(f"run {req.recipe} seed {req.seed} failed (exit {proc.returncode}; its message is above); "
                         f"its request is {run_dir / 'request.json'}")
    return json.loads((run_dir / "result.json").read_text())


class RunClash(ValueError):
    """A finished run of another request sits where this one would be written."""


def _request_difference(old: dict, new: dict) -> str:
    """What differs between two run requests, as ``field: old -> new`` (the config's parsed content
    when no field does)."""
    skip = ("key", "save_weights", "eval_sizes")
    changed = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
               if k not in skip and old.get(k) != new.get(k)]
    return "; ".join(changed) or f"the content of {new.get('config')} changed"


def read_finished(done: Path) -> Optional[dict]:
    """A finished run's result, or None when there is none or it is half-written (a killed writer)."""
    if not done.is_file():
        return None
    try:
        return json.loads(done.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        print(f"[compare] {done} is not complete (a run killed while writing it): running it again",
              flush=True)
        return None


def run_or_reuse(req: RunRequest, run_dir: Path, rerun: bool, progress: JobProgress) -> dict:
    """The finished run at ``run_dir`` when it was made by exactly this request, else a new one. A
    finished run of another request there is refused (:class:`RunClash`) unless ``rerun``; a run
    folder another comparison is writing right now is refused (:class:`FolderBusy`)."""
    with folder_lock(run_dir, "another comparison"):
        return _run_or_reuse(req, run_dir, rerun, progress)


def _run_or_reuse(req: RunRequest, run_dir: Path, rerun: bool, progress: JobProgress) -> dict:
    req.key = req.identity()
    done = run_dir / "result.json"
    progress.start(req.recipe, req.seed)
    result = None if rerun else read_finished(done)
    if result is not None and not req.is_key(result.get("key")):
        old = run_dir / "request.json"
        before = json.loads(old.read_text()) if old.is_file() else {}
        raise RunClash(f"{run_dir} holds a finished run of another request "
                       f"({_request_difference(before, req.as_json())}); use another --out, or --rerun to replace it")
    if result is not None and (not req.save_weights or Path(result.get("weights", "")).is_file()):
        print(f"[compare] {req.recipe} seed {req.seed}: reusing {done}", flush=True)
        result = _add_eval_sizes(req, run_dir, result)
        progress.finish(req.recipe, req.seed, result, reused=True)
        return result
    result = _train_in_subprocess(req, run_dir, rerun)
    progress.finish(req.recipe, req.seed, result, reused=False)
    return result


def _add_eval_sizes(req: RunRequest, run_dir: Path, result: dict) -> dict:
    """A reused run lacking some ``--eval-sizes`` scores gets them from its saved weights (a fresh process)."""
    lacking = [s for s in req.eval_sizes if str(s) not in result.get("scores_at", {})]
    if not lacking:
        return result
    if not Path(result.get("weights", "")).is_file():
        print(f"[compare] {req.recipe} seed {req.seed}: no saved weights to evaluate at {lacking}; "
              "--rerun trains it again", flush=True)
        return result
    atomic_write_text(run_dir / "request.json", json.dumps(req.as_json(), indent=1))
    proc = subprocess.run(job_command(worker, "--evaluate", str(run_dir / "request.json")),
                          env=job_environment())
    if proc.returncode != 0:
        raise StepFailed(f"evaluating {run_dir} at {lacking} failed (exit {proc.returncode}; its message is above)")
    return json.loads((run_dir / "result.json").read_text())
