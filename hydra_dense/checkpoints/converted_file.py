"""Write a converted backbone: a timm-format checkpoint with the plan it was converted for, and the
per-block error table (Markdown + CSV). Files appear complete or not at all (temp file + rename)."""
from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..runtime.atomic_file import atomic_write
from .pretrained import CheckpointError, read_checkpoint

__all__ = ["write_converted", "refuse_replacing_another", "ConvertedFiles", "error_rows", "level_rows"]


@dataclass
class ConvertedFiles:
    checkpoint: Path
    markdown: Path
    csv: Path
    table: str


def error_rows(teacher: list[str], student: list[str], before: list[float], after: list[float]) -> list[dict]:
    """One row per block plus a ``mean`` row over the converted blocks."""
    rows = []
    for i, (t, s, b, a) in enumerate(zip(teacher, student, before, after)):
        converted = t != s
        rows.append(dict(block=str(i), teacher=t, student=s, converted=converted,
                         error_before=b if converted else float("nan"), error_after=a if converted else float("nan")))
    conv = [r for r in rows if r["converted"]]
    mean = lambda key: sum(r[key] for r in conv) / len(conv) if conv else float("nan")  # noqa: E731
    rows.append(dict(block="mean", teacher="", student=f"{len(conv)} converted", converted=True,
                     error_before=mean("error_before"), error_after=mean("error_after")))
    for r in rows:
        b, a = r["error_before"], r["error_after"]
        r["reduction"] = b / a if a and not math.isnan(a) and not math.isnan(b) else float("nan")
    return rows


def level_rows(levels: list[int], before: list[float], after: list[float]) -> list[dict]:
    """One row per feature level a task head reads (block ``i``'s output, normed as the head sees it)."""
    rows = []
    for i, b, a in zip(levels, before, after):
        rows.append(dict(block=f"features@{i}", teacher="features", student="own stream", converted=True,
                         error_before=b, error_after=a,
                         reduction=b / a if a and not math.isnan(a) and not math.isnan(b) else float("nan")))
    return rows


def _fmt(v) -> str:
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def refuse_replacing_another(out: Path, plan: dict, source: str) -> None:
    """Raise before a conversion starts when ``out`` already holds something its end would replace
    other than an earlier run of the same conversion (same ``plan`` and ``source``): another plan's
    converted weights, or a file that is not a converted checkpoint."""
    out = Path(out).expanduser()
    if not out.exists():
        return
    try:
        meta = read_checkpoint(out)[1]
    except CheckpointError:  # unreadable, or not a state dict: not ours to replace either way
        meta = {}
    if not meta:
        raise ValueError(f"model.output: {out} exists and is not a converted checkpoint; the conversion would "
                         f"replace it: give another --model.init_args.output, or move the file away")
    if meta.get("plan") != plan or meta.get("source") != source:
        raise ValueError(f"model.output: {out} holds another conversion (plan {meta.get('plan')}, source "
                         f"{meta.get('source')}) than this one (plan {plan}, source {source}), which would "
                         f"replace it: give another --model.init_args.output, or delete the file")


def write_converted(task, out: Path, data: str = "") -> ConvertedFiles:
    """Write ``task.backbone``'s weights + metadata to ``out`` and the error tables next to it."""
    out = Path(out)
    backbone = task.backbone
    depth = len(backbone.blocks)
    before, after = task.error_before.tolist(), task.error_after.tolist()
    meta = dict(format="hydra_dense.converted/1", source=str(task.source_path), plan=asdict(backbone.plan),
                attention_kinds=task.student_labels, teacher_kinds=task.teacher_labels,
                converted_blocks=list(task.blocks), steps=int(task.global_step), data=data,
                error_before=before, error_after=after,
                feature_error_before=float(task.feature_error_before), feature_error_after=float(task.feature_error_after),
                objective=task.hparams.objective, student_init=task.hparams.student_init,
                levels=list(getattr(backbone, "out_indices", [depth - 1])),
                level_error_before=task.level_error_before.tolist(), level_error_after=task.level_error_after.tolist())
    state = {k: v.detach().cpu().clone() for k, v in backbone.state_dict().items()}
    atomic_write(out, lambda fh: torch.save({"state_dict": state, "hydra_dense": meta}, fh))

    rows = error_rows(task.teacher_labels, task.student_labels, before, after)
    cols = ["block", "teacher", "student", "error_before", "error_after", "reduction"]
    head = (f"Per-block relative error ||student - teacher|| / ||teacher|| of the attention branch (after "
            f"LayerScale) on the held-out split (images or clips); {task.global_step} steps; source "
            f"{task.source_path}; data: {data}. Final normed tokens through the student's own stream "
            f"(every block's error compounded): {_fmt(meta['feature_error_before'])} -> "
            f"{_fmt(meta['feature_error_after'])}")
    if meta["objective"] == "features":
        head += (f". Objective: the whole student against the teacher's features at out_indices "
                 f"{meta['levels']} (started from {meta['student_init'] or 'the source'})")
    lines = [head, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if r["converted"] or depth <= 24:
            lines.append("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    for r in level_rows(meta["levels"], meta["level_error_before"], meta["level_error_after"]):
        lines.append("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    table = "\n".join(lines) + "\n"
    md = out.with_name(out.stem + "_errors.md")
    atomic_write(md, lambda fh: fh.write(table.encode()))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows + level_rows(meta["levels"], meta["level_error_before"], meta["level_error_after"]))
    path_csv = out.with_name(out.stem + "_errors.csv")
    atomic_write(path_csv, lambda fh: fh.write(buf.getvalue().encode()))
    return ConvertedFiles(out, md, path_csv, table)
