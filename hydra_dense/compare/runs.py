"""One comparison run (a recipe with one seed) in its own worker process, reused when finished."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from .progress import JobProgress

__all__ = ["run_key", "run_or_reuse"]


def run_key(req: dict, config: Path) -> str:
    """Identity of a run: a finished run with the same key is reused instead of trained again."""
    # what a run is evaluated on afterwards (eval_sizes) does not make it another run
    ident = {k: v for k, v in req.items() if k != "eval_sizes"}
    text = json.dumps(dict(ident, config=config.read_text(), out=None, key=None, save_weights=None), sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _train_in_subprocess(req: dict, run_dir: Path) -> dict:
    from .run_setup import repo_root

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "result.json").unlink(missing_ok=True)
    (run_dir / "request.json").write_text(json.dumps(req, indent=1))
    proc = subprocess.run([sys.executable, "-m", "hydra_dense.compare.worker", str(run_dir / "request.json")],
                          cwd=repo_root(), env=dict(os.environ, PYTHONPATH=str(repo_root())))
    if proc.returncode != 0 or not (run_dir / "result.json").is_file():
        raise RuntimeError(f"[compare] run {req['recipe']} seed {req['seed']} failed (exit {proc.returncode}); "
                           f"its request is {run_dir / 'request.json'}")
    return json.loads((run_dir / "result.json").read_text())


def run_or_reuse(req: dict, run_dir: Path, config: Path, rerun: bool, progress: JobProgress) -> dict:
    req["key"] = run_key(req, config)
    done = run_dir / "result.json"
    progress.start(req["recipe"], req["seed"])
    if done.is_file() and not rerun:
        result = json.loads(done.read_text())
        if result.get("key") == req["key"] and (not req["save_weights"] or Path(result.get("weights", "")).is_file()):
            print(f"[compare] {req['recipe']} seed {req['seed']}: reusing {done}", flush=True)
            result = _add_eval_sizes(req, run_dir, result)
            progress.finish(req["recipe"], req["seed"], result, reused=True)
            return result
    result = _train_in_subprocess(req, run_dir)
    progress.finish(req["recipe"], req["seed"], result, reused=False)
    return result


def _add_eval_sizes(req: dict, run_dir: Path, result: dict) -> dict:
    """A reused run lacking some ``--eval-sizes`` scores gets them from its saved weights (a fresh process)."""
    from .run_setup import repo_root

    lacking = [s for s in req.get("eval_sizes") or [] if str(s) not in result.get("scores_at", {})]
    if not lacking:
        return result
    if not Path(result.get("weights", "")).is_file():
        print(f"[compare] {req['recipe']} seed {req['seed']}: no saved weights to evaluate at {lacking}; "
              "--rerun trains it again", flush=True)
        return result
    (run_dir / "request.json").write_text(json.dumps(req, indent=1))
    subprocess.run([sys.executable, "-m", "hydra_dense.compare.worker", "--evaluate", str(run_dir / "request.json")],
                   cwd=repo_root(), env=dict(os.environ, PYTHONPATH=str(repo_root())), check=True)
    return json.loads((run_dir / "result.json").read_text())
