"""How far a comparison is: which run of how many, time so far, an ETA for the runs left, and each
run's score and each recipe's mean ± std as soon as they are known."""
from __future__ import annotations

import statistics
import time
from typing import Optional

from ..runtime.progress import minutes

__all__ = ["JobProgress"]


class JobProgress:
    """Printed by the comparison's main process around each (recipe, seed) run.

    The ETA is the mean wall time of the runs trained so far in this job (reused runs cost
    nothing) times the runs still to train; conversions come on top (each says its own progress)."""

    def __init__(self, total_runs: int) -> None:
        self.total, self.started = int(total_runs), 0
        self.t0 = time.time()
        self.trained: list[float] = []
        self._run_t0: Optional[float] = None

    def _eta(self) -> str:
        left = self.total - self.started + 1
        if not self.trained:
            return f"{left} run(s) left"
        return f"{left} run(s) left, ETA {minutes(statistics.fmean(self.trained) * left)}"

    def start(self, recipe: str, seed: int) -> None:
        self.started += 1
        self._run_t0 = time.time()
        print(f"\n=== [{recipe}] seed {seed}: run {self.started}/{self.total} | elapsed {minutes(time.time() - self.t0)}"
              f" | {self._eta()} ===", flush=True)

    def finish(self, recipe: str, seed: int, result: dict, reused: bool) -> None:
        if not reused and self._run_t0 is not None:
            self.trained.append(time.time() - self._run_t0)
        metric = result.get("metric") or "score"
        took = "reused" if reused else minutes(time.time() - (self._run_t0 or time.time()))
        print(f"[compare] {recipe} seed {seed}: {metric} {result.get('score', float('nan')):.1f} ({took})", flush=True)

    @staticmethod
    def recipe_done(recipe: str, runs: list[dict]) -> None:
        scores = [r["score"] for r in runs if r.get("score") == r.get("score")]
        if not scores:
            return
        spread = f" ± {statistics.stdev(scores):.1f}" if len(scores) > 1 else ""
        print(f"[compare] {recipe}: {runs[0].get('metric') or 'score'} {statistics.fmean(scores):.1f}{spread} over "
              f"{len(scores)} seed(s)", flush=True)
