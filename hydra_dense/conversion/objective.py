"""The conversion objective: per block, the converted attention against the frozen softmax one.

For every block ``i`` of a ViT, the attention branch adds ``ls1(attn(norm1(x_i)))`` to the residual
stream. The teacher (the MSA model) is run once; its per-block branch inputs ``norm1(x_i)`` and
outputs are recorded. Each converted student block then runs its own attention on the *teacher's*
input, so every block learns independently of the errors of the blocks before it (Hedgehog /
LoLCATs' layer-wise attention transfer). The error is measured after LayerScale: what actually
reaches the residual stream. The same holds for a joint space-time :class:`~hydra_dense.backbones.VideoViT`
on clips ``(B, 3, T, H, W)``: its blocks are the same, over a ``(t, h, w)`` token grid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import nn

from ..attention import TokenLayout
from ..backbones.video_vit import VideoViT

__all__ = ["TeacherTrace", "trace_teacher", "student_branch_outputs", "squared_error_sums", "final_tokens",
           "final_and_levels", "relative_mse"]


@dataclass
class TeacherTrace:
    """What the teacher did on one batch: per traced block, the attention branch's input and output
    ``(B, N, D)``, the token layout, the final normed tokens ``(B, N, D)``, and the features a task
    head reads (:func:`final_and_levels`), one ``(B, N, D)`` per level."""

    inputs: dict[int, torch.Tensor]
    outputs: dict[int, torch.Tensor]
    layout: TokenLayout
    final: torch.Tensor
    levels: list[torch.Tensor]


@torch.no_grad()
def trace_teacher(teacher: nn.Module, inputs: torch.Tensor, blocks: Sequence[int],
                  pad_mask: Optional[torch.Tensor] = None) -> TeacherTrace:
    """Run ``teacher`` (a :class:`~hydra_dense.backbones.ViT` on images ``(B, 3, H, W)`` or a joint
    :class:`~hydra_dense.backbones.VideoViT` on clips ``(B, 3, T, H, W)``) and record the attention
    branch of every block in ``blocks``."""
    branch_in: dict[int, torch.Tensor] = {}
    outputs: dict[int, torch.Tensor] = {}
    layouts: list[TokenLayout] = []

    def record_input(i: int, args: tuple) -> None:
        branch_in[i] = args[0]
        layouts.append(args[1])  # every block sees the same layout: (tokens, layout) is the call

    handles = []
    for i in blocks:
        blk = teacher.blocks[i]
        handles.append(blk.attn.register_forward_pre_hook(lambda _m, args, i=i: record_input(i, args)))
        handles.append(blk.ls1.register_forward_hook(lambda _m, _a, out, i=i: outputs.__setitem__(i, out)))
    try:
        final, levels = final_and_levels(teacher, inputs, pad_mask)
    finally:
        for h in handles:
            h.remove()
    return TeacherTrace(branch_in, outputs, layouts[0], final, levels)


def student_branch_outputs(student: nn.Module, trace: TeacherTrace, blocks: Sequence[int]) -> dict[int, torch.Tensor]:
    """Each student block's attention branch ``ls1(attn(.))`` on the teacher's input to that block."""
    return {i: student.blocks[i].ls1(student.blocks[i].attn(trace.inputs[i], trace.layout)) for i in blocks}


def final_tokens(vit: nn.Module, inputs: torch.Tensor, pad_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The final normed tokens ``(B, N, D)`` of ``vit``'s own stream (images or, for a VideoViT, clips)."""
    if isinstance(vit, VideoViT):
        return vit.forward_tokens(inputs)[0]
    outs, _ = vit.forward_tokens(inputs, pad_mask)
    return vit.norm(outs[-1])


def final_and_levels(vit: nn.Module, inputs: torch.Tensor,
                     pad_mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One pass of ``vit``'s own stream: the final normed tokens ``(B, N, D)`` and the patch tokens a
    task head reads, ``(B, h*w, D)`` per entry of ``out_indices`` (normed when ``out_norm``; the maps
    of :meth:`~hydra_dense.backbones.ViT.forward`, prefix tokens left out as there). A VideoViT's
    heads read its final normed tokens: one level."""
    if isinstance(vit, VideoViT):
        final = vit.forward_tokens(inputs)[0]
        return final, [final]
    outs, layout = vit.forward_tokens(inputs, pad_mask)
    prefix = layout.num_prefix_tokens
    levels = [(vit.norm(outs[i]) if vit.out_norm else outs[i])[:, prefix:] for i in vit.out_indices]
    return vit.norm(outs[-1]), levels


def relative_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``mean((pred - target)^2) / mean(target^2)`` in fp32: a scale-free error (0 = equal)."""
    return (pred.float() - target.float()).square().mean() / target.float().square().mean().clamp_min(1e-12)


def squared_error_sums(pred: torch.Tensor, target: torch.Tensor,
                       pad: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``sum((pred - target)^2)`` and ``sum(target^2)`` over valid tokens, in fp32.

    ``pred``, ``target``: ``(B, N, D)``; ``pad``: optional bool ``(B, N)``, True = padded token.
    The relative error of a block is ``sqrt(first / second)`` accumulated over a whole split.
    """
    diff = (pred.float() - target.float()).square()
    ref = target.float().square()
    if pad is not None:
        keep = (~pad).unsqueeze(-1).float()
        diff, ref = diff * keep, ref * keep
    return diff.sum(), ref.sum()
