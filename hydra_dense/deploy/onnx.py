"""A trained task as ONNX (and a ``torch.export`` program), checked against PyTorch in onnxruntime.

What is exported, per task:

- segmentation: images ``(B, 3, H, W)`` -> logits ``(B, K, H, W)``;
- video: clips ``(B, 3, T, H, W)`` -> logits ``(B, K)``;
- detection: images -> the feature pyramid (one map per level, strides 4–64).
  The torchvision detector around it (anchor generation, RoI heads, NMS with data-dependent
  output sizes) is not exported: run it in PyTorch on the exported features, or re-implement
  the post-processing in the deployment runtime.

The attention ops take their eager path under export (``torch.compiler.is_exporting``), so the
graph holds plain ONNX ops and no compiled kernels. Exports go through ``torch.export`` (the
dynamo-based ONNX exporter); sizes are fixed unless ``dynamic`` (height and width as symbols,
multiples of the patch), which holds for the detection pyramid only: UPerNet's pyramid pooling
and the video model's space-time position embeddings are traced for one size, so those two
export one file per size.

The detection pyramid takes the pixel padding mask as a second input, ``pad_mask`` ``(B, H, W)``
bool (True = padding, the valid part top-left, as torchvision pads a batch): padded tokens stay out
of attention and get zeros in the pyramid, and each image's position embeddings are resampled to
its own valid grid by a traced form of the eager resampling
(:meth:`~hydra_dense.backbones.ViT.traced_padded_positions`, which needs
``pos_embed_antialias: false``; without it the pyramid exports without the mask input, and says
so). Segmentation and video models take batches of one size without padding (their predict paths
never pad: sliding windows, fixed clips).
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..runtime.atomic_file import atomic_target
from ..tasks import DetectionTask, SegmentationTask, VideoClassificationTask

__all__ = ["ExportSpec", "export_wrapper", "example_inputs", "export_onnx", "onnx_parity"]


class _Logits(nn.Module):
    """The task's own forward (segmentation: images -> logits; video: clips -> logits)."""

    def __init__(self, task: nn.Module) -> None:
        super().__init__()
        self.task = task

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.task(inputs)


class _DetectionPyramid(nn.Module):
    def __init__(self, task: nn.Module) -> None:
        super().__init__()
        self.pyramid = task.detector.backbone

    def forward(self, images: torch.Tensor, pad_mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, ...]:
        self.pyramid.set_image_sizes(None)
        return tuple(self.pyramid(images, pad_mask).values())


@dataclass
class ExportSpec:
    """What one export traces: the wrapped module, its input names and example shapes."""

    module: nn.Module
    input_names: list[str]
    output_names: list[str]
    patch: int
    frames: Optional[int] = None
    kind: str = "segmentation"
    notes: list[str] = field(default_factory=list)

    @property
    def pad_mask(self) -> bool:
        """Whether the graph takes the pixel padding mask ``(B, H, W)`` as its second input."""
        return "pad_mask" in self.input_names


def export_wrapper(task: nn.Module, dynamic: bool = False) -> ExportSpec:
    """The exportable part of a task (see the module doc), in eval mode; ``dynamic``: refused
    where the graph cannot follow the size (UPerNet's pyramid pooling)."""
    task = task.eval()
    if isinstance(task, SegmentationTask):
        if dynamic and task.hparams.decode_head == "uper":
            raise ValueError("--dynamic: the segmentation model's UPerNet head pools to fixed bins (adaptive "
                             "average pooling), which the exported graph computes for the traced size only; "
                             "export one file per input size (drop --dynamic)")
        spec = ExportSpec(_Logits(task), ["images"], ["logits"], task.backbone.patch_size)
    elif isinstance(task, DetectionTask):
        spec = ExportSpec(_DetectionPyramid(task), ["images"], [], task.backbone.patch_size, kind="detection")
        spec.output_names = [f"level_{name}" for name in _pyramid_names(task)]
        spec.notes.append("detection: backbone + feature pyramid exported; the torchvision detector heads "
                          "and NMS stay in PyTorch")
        if task.backbone.pos_embed_antialias:
            spec.notes.append("detection: no pad_mask input (the backbone has pos_embed_antialias: true, which the "
                              "traced per-image position resampling cannot reproduce): feed unpadded batches")
        else:
            spec.input_names.append("pad_mask")
    elif isinstance(task, VideoClassificationTask):
        if dynamic:
            raise ValueError("--dynamic: the video model's exported graph holds its space-time position "
                             "embeddings for the traced clip size only (onnxruntime fails at other sizes); "
                             "export one file per clip size (drop --dynamic)")
        bb = task.backbone
        frames = bb.pos_grid[0] * bb.tubelet_size  # the clip length its position embeddings were learned at
        spec = ExportSpec(_Logits(task), ["clips"], ["logits"], bb.patch_size, frames=frames, kind="video")
    else:
        raise TypeError(f"export: no export for {type(task).__name__}; segmentation, detection and video tasks are "
                        "exported")
    spec.module.eval()
    return spec


def _pyramid_names(task: nn.Module) -> list[str]:
    with torch.no_grad():
        size = 2 * task.backbone.patch_size * 4
        task.detector.backbone.set_image_sizes(None)
        return list(task.detector.backbone(torch.zeros(1, 3, size, size)).keys())


def example_inputs(spec: ExportSpec, height: int, width: int, batch: int = 1, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Random inputs of one size (``height`` and ``width`` multiples of the patch). With a padding
    mask input, a batch of two: the first image whole, the second padded at the bottom and right
    by a part of a patch and more (so partly padded patches are in the check too)."""
    for name, value in (("height", height), ("width", width)):
        if value % spec.patch:
            raise ValueError(f"--size: {name} {value} is not a multiple of the patch size {spec.patch}; "
                             f"use {math.ceil(value / spec.patch) * spec.patch} (the model pads to it)")
    gen = torch.Generator().manual_seed(seed)
    if spec.kind == "video":
        return (torch.randn(batch, 3, spec.frames, height, width, generator=gen),)
    if not spec.pad_mask:
        return (torch.randn(batch, 3, height, width, generator=gen),)
    batch = max(batch, 2)
    pad_mask = torch.zeros(batch, height, width, dtype=torch.bool)
    valid_h, valid_w = max(1, height * 3 // 4 - 1), max(1, width * 2 // 3 - 1)
    pad_mask[1:, valid_h:] = True
    pad_mask[1:, :, valid_w:] = True
    images = torch.randn(batch, 3, height, width, generator=gen).masked_fill(pad_mask[:, None], 0.0)
    return images, pad_mask


def _dynamic_shapes(spec: ExportSpec, max_size: int) -> dict:
    """Height and width as symbols (multiples of the patch, up to ``max_size`` pixels); with a
    padding mask, the batch size too (the mask's dims follow the images')."""
    h = torch.export.Dim("grid_h", min=1, max=max_size // spec.patch)
    w = torch.export.Dim("grid_w", min=1, max=max_size // spec.patch)
    params = list(inspect.signature(spec.module.forward).parameters)
    first = 3 if spec.kind == "video" else 2
    if not spec.pad_mask:
        return {params[0]: {first: spec.patch * h, first + 1: spec.patch * w}}
    b = torch.export.Dim("batch", min=1, max=256)
    return {params[0]: {0: b, 2: spec.patch * h, 3: spec.patch * w}, params[1]: {0: b, 1: spec.patch * h, 2: spec.patch * w}}


def export_onnx(spec: ExportSpec, inputs: Sequence[torch.Tensor], out: Path, dynamic: bool = False,
                max_size: int = 4096, program: Optional[Path] = None) -> Path:
    """Trace ``spec.module`` on ``inputs`` with ``torch.export`` and write ONNX to ``out``
    (written to a temporary name, renamed when complete); ``program``: also save the
    ``torch.export`` program there (``.pt2``)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    args = tuple(inputs)
    shapes = _dynamic_shapes(spec, max_size) if dynamic else None
    with torch.no_grad():
        onnx_program = torch.onnx.export(spec.module, args, input_names=spec.input_names,
                                         output_names=spec.output_names or None, dynamic_shapes=shapes,
                                         dynamo=True, external_data=False)
    if program is not None:
        try:
            torch.export.save(onnx_program.exported_program, str(program))
        except Exception as err:  # noqa: BLE001 - the .pt2 is optional; the ONNX file is the product
            program.unlink(missing_ok=True)
            spec.notes.append(f"torch.export program not saved: {type(err).__name__}: {str(err)[:200]}")
    with atomic_target(out) as tmp:
        onnx_program.save(str(tmp))
    return out


def onnx_parity(path: Path, spec: ExportSpec, inputs: Sequence[torch.Tensor], threads: Optional[int] = None) -> float:
    """Largest absolute difference between onnxruntime (CPU) and PyTorch on ``inputs``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {name: t.numpy() for name, t in zip(spec.input_names, inputs)}
    got = session.run(None, feed)
    with torch.no_grad():
        want = spec.module(*inputs)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    if len(got) != len(want):
        raise RuntimeError(f"{path}: {len(got)} outputs, PyTorch gives {len(want)}")
    return max(float(np.abs(g - w.numpy()).max()) for g, w in zip(got, want))
