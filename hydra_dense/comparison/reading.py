"""What a comparison table says, in a few sentences under it: which plan keeps MSA's accuracy at the
most speed, whether the task needs global mixing at all (MSA against a backbone with no global
path), and what each global path carries (the backbone's global term, the head's global bin).

Every gap is judged against the seed-to-seed spread: a gap counts when it is more than the tolerance
(1 point unless the job's ``--reading-tolerance`` says otherwise: the accuracy a user gives up for
speed) and more than twice the larger of the two rows' sample std; with one seed the sentence says
that no spread was measured."""
from __future__ import annotations

import math
import re
from typing import Optional

__all__ = ["read_table", "TOLERANCE"]

# the default points below MSA still read as MSA's accuracy (and a cost of zeroing a path read as
# nothing) when the seeds spread less than this
TOLERANCE = 1.0
# attention kinds in which a token sees only its neighbourhood (or nothing): a plan made of these alone
# has no global path (``local+dwc7``, ViTDet's windows alone, ``none``)
_NEIGHBOURHOOD_KINDS = {"local", "window", "none"}


def _has_global_path(attention: str) -> bool:
    """Whether a plan, as ``describe_plan`` writes it (``window x8, msa@[2, 5, 8, 11]``), has a block
    whose tokens reach the whole image."""
    parts = re.split(r",\s*(?![^\[]*\])", attention)  # commas between blocks, not inside ``@[...]``
    kinds = {re.split(r" x\d|@", part.strip())[0].split("+")[0] for part in parts if part.strip()}
    return not kinds <= _NEIGHBOURHOOD_KINDS


def _seeds(row: dict) -> int:
    return len(str(row.get("seeds", "")).split(","))


def _spread(*rows: dict) -> Optional[float]:
    """The larger sample std of the rows' scores; None where a row has one seed (no spread measured)."""
    if any(_seeds(r) < 2 for r in rows):
        return None
    return max(float(r.get("score_std", 0.0)) for r in rows)


def _known(value) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _speed(row: dict, msa: dict, sizes: tuple[str, str]) -> tuple[float, str]:
    """The row's speed as a multiple of MSA's (at the large size ``sizes[1]`` where it was timed, else
    at the evaluation size ``sizes[0]``) and its words."""
    for key, size in (("speedup_big", sizes[1]), ("speedup", sizes[0])):
        if _known(row.get(key)) and _known(msa.get(key)) and msa[key] > 0:
            ratio = float(row[key]) / float(msa[key])
            return ratio, f"{ratio:.2f}x MSA's speed" + (f" at {size}" if size else "")
    return float("nan"), "not timed"


def _spread_words(spread: Optional[float], seeds: int) -> str:
    return "1 seed: no spread measured" if spread is None else f"{seeds} seeds, std up to {spread:.1f}"


def _baseline(rows: list[dict]) -> Optional[dict]:
    return next((r for r in rows if r["plan"] == "msa"), None)


def _points(tolerance: float) -> str:
    """A user's tolerance as they gave it: one decimal, more where they asked for finer (0.25 stays 0.25)."""
    return f"{tolerance:.1f}" if tolerance == round(tolerance, 1) else f"{tolerance:g}"


def _nothing(tolerance: float) -> str:
    return f"nothing that counts (under {_points(tolerance)} points or twice its seed spread)"


def _closest_to_msa(rows: list[dict], msa: dict, sizes: tuple[str, str], tolerance: float) -> str:
    """The fastest plan whose score is within reach of MSA's (``tolerance`` or twice the spread), if it
    runs faster than MSA."""
    within = []
    for row in rows:
        if row is msa or not _known(row.get("score")):
            continue
        spread = _spread(row, msa)
        reach = max(tolerance, 2 * spread) if spread is not None else tolerance
        if row["score"] - msa["score"] >= -reach:
            within.append((_speed(row, msa, sizes), row, reach))
    if not within:
        best = max((r for r in rows if r is not msa and _known(r.get("score"))), key=lambda r: r["score"], default=None)
        if best is None:
            return ""
        return (f"No plan keeps MSA's accuracy: the closest, `{best['plan']}`, scores {best['score']:.1f} against "
                f"MSA's {msa['score']:.1f} ({_spread_words(_spread(best, msa), _seeds(best))}; "
                f"{_speed(best, msa, sizes)[1]}).")
    (speed, speed_words), row, reach = max(within, key=lambda w: w[0][0] if _known(w[0][0]) else 0.0)
    if _known(speed) and speed <= 1.0:
        level = ", ".join(f"`{r['plan']}`" for _, r, _ in within)
        return f"No plan faster than MSA keeps its accuracy (level with it but no faster: {level})."
    spread = _spread(row, msa)
    level = (f"within {_points(tolerance)} points of MSA" if reach == tolerance else
             f"level with MSA within the seed spread (std up to {spread:.1f}: a gap under {reach:.1f} is luck here)")
    seeds = "" if reach > tolerance else f" ({_spread_words(spread, _seeds(row))})"
    return (f"Fastest plan {level}: `{row['plan']}`, {row['score']:.1f} against MSA's {msa['score']:.1f}{seeds}, "
            f"{speed_words}.")


def _needs_global_mixing(rows: list[dict], msa: dict, tolerance: float) -> str:
    """MSA against the best backbone with no global path (local mixing or windows alone), if any ran."""
    local = [r for r in rows if not _has_global_path(str(r.get("attention", ""))) and _known(r.get("score"))]
    if not local:
        return ""
    best = max(local, key=lambda r: r["score"])
    gap, spread = msa["score"] - best["score"], _spread(best, msa)
    far = ""
    if _known(msa.get("score_far")) and _known(best.get("score_far")):
        far = f"; far from the cue {msa['score_far']:.1f} against {best['score_far']:.1f}"
    said = f"MSA {msa['score']:.1f} against {best['score']:.1f} for `{best['plan']}`, which has no global path{far}"
    if spread is None:
        return (f"Global mixing: {said}; {gap:.1f} apart in 1 seed (3 seeds tell whether that is beyond the "
                f"seed-to-seed spread).")
    if gap > max(tolerance, 2 * spread):
        return (f"The task needs global mixing: {said} ({_seeds(best)} seeds, {gap:.1f} apart, more than twice "
                f"the spread {spread:.1f}).")
    return (f"The task is decided locally: {said} ({_seeds(best)} seeds, std up to {spread:.1f}); no global term "
            f"can show its worth here.")


def _carried(rows: list[dict], path: str, what: str, tolerance: float) -> str:
    """What zeroing a global path at evaluation costs, in the rows where it was measured."""
    carrying, idle = [], []
    for row in rows:
        cost = row.get(f"{path}_cost")
        if not _known(cost):
            continue
        std = float(row.get(f"{path}_cost_std", 0.0)) if _seeds(row) > 1 else None
        if cost > max(tolerance, 2 * std if std is not None else 0.0):
            shown = f"{cost:.1f} ± {std:.1f}" if std is not None else f"{cost:.1f} (1 seed)"
            carrying.append(f"{shown} in `{row['plan']}`")
        else:
            idle.append(f"`{row['plan']}`")
    if not carrying and not idle:
        return ""
    if not carrying:
        return f"{what}, zeroed at evaluation, costs {_nothing(tolerance)} in any plan."
    nothing = f"; {_nothing(tolerance)} in {', '.join(idle)}" if idle else ""
    return f"{what}, zeroed at evaluation, costs {', '.join(carrying)}{nothing}."


def read_table(rows: list[dict], small: str = "", big: str = "", tolerance: float = TOLERANCE) -> list[str]:
    """The table's reading, one sentence a line (none without an ``msa`` row to read against).
    ``rows``: :func:`~hydra_dense.comparison.report.aggregate`'s, with their speed added; ``small`` /
    ``big``: the input sizes their ``speedup`` / ``speedup_big`` were timed at; ``tolerance``: the
    points (of the table's score) a gap or a cost must exceed to count, besides twice the seeds' spread."""
    if not tolerance >= 0:
        raise ValueError(f"reading tolerance: expected points >= 0, got {tolerance!r}")
    msa = _baseline(rows)
    if msa is None or not _known(msa.get("score")):
        return []
    sentences = [_closest_to_msa(rows, msa, (small, big), tolerance), _needs_global_mixing(rows, msa, tolerance),
                 _carried(rows, "global", "The backbone's global term", tolerance),
                 _carried(rows, "head_pool", "The head's global pooling bin", tolerance)]
    return [s for s in sentences if s]
