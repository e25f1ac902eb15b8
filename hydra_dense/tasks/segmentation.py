"""Semantic segmentation: any backbone from configs/backbones + a decode head, trained with Lightning."""
from __future__ import annotations

from typing import Literal, Optional

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn
from lightning.pytorch.utilities import rank_zero_warn
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix

from ..backbones.pyramid import MultiLevelRescale
from ..data.normalisation import IMAGENET_MEAN, IMAGENET_STD
from ..drawing import overlay_panel
from ..heads.segmentation import FCNAuxHead, build_decode_head
from ..predict.outputs import save_label_png, save_overlay
from ..predict.sliding import sliding_window_labels
from ..runtime.atomic_file import atomic_save_image
from .base import DenseTask
from .class_names import class_names

__all__ = ["SegmentationTask", "iou_from_confusion"]


def _valid_extent(pad: torch.Tensor) -> tuple[int, int]:
    """``(h, w)`` of the valid top-left part of an image whose padding ``pad`` ``(H, W)`` (True =
    padding) is on the right and bottom, as the collate functions pad."""
    valid = ~pad
    rows, cols = valid.any(1).nonzero(), valid.any(0).nonzero()
    return (int(rows.max()) + 1 if len(rows) else 0), (int(cols.max()) + 1 if len(cols) else 0)


def iou_from_confusion(conf: torch.Tensor) -> torch.Tensor:
    """Per-class IoU from a ``(K, K)`` confusion matrix (rows = target); NaN for classes absent
    from both prediction and target (excluded from the mean, as mmseg does)."""
    conf = conf.double()
    tp = conf.diag()
    denom = conf.sum(0) + conf.sum(1) - tp
    return torch.where(denom > 0, tp / denom.clamp_min(1), torch.full_like(tp, float("nan")))


class SegmentationTask(DenseTask):
    """Backbone -> (multi-level rescale) -> decode head -> logits ``(B, K, H, W)``.

    Args:
        backbone: a :class:`~hydra_dense.backbones.ViT` (YAML ``class_path``); its ``out_indices``
            give the levels (4 levels for ``uper``: rescaled to strides p/4, p/2, p, 2p).
        num_classes: classes (after ``reduce_zero_label``). ignore_index: label ignored by loss/metrics.
        decode_head: ``uper`` (UPerNet), ``linear`` or ``setr_naive`` (the light heads).
        head_channels: width of UPerNet / SETR heads. pool_scales: UPerNet's pyramid pooling bins
            (default (1, 2, 3, 6); without 1 the head has no global path, [] no pooling at all). aux_head / aux_weight: FCN auxiliary head.
        inference: ``whole`` image or ``slide`` (windows of ``slide_crop`` every ``slide_stride``,
            logits averaged) for images larger than the training crop. Predicting on files
            (``data.predict_files``) slides whenever an image is larger than ``slide_crop``.
        lr, weight_decay, layer_decay, head_lr_mult, warmup_steps, schedule: AdamW with layer-wise
            lr decay, linear warm-up then ``poly`` / ``cosine`` / ``step``; total steps from the trainer.
        num_overlays: validation images saved (and logged) as PNG overlays every validation.
        class_names: for the per-class IoU table (else taken from the data module).
        distill: ``{teacher: <MSA weights or a run's weights>, weight: 1.0, plan: msa}``: the frozen
            teacher's backbone features as an extra training loss (:mod:`~hydra_dense.tasks.distill`).
    """

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        decode_head: Literal["uper", "linear", "setr_naive"] = "uper",
        head_channels: int = 512,
        pool_scales: Optional[list[int]] = None,
        aux_head: bool = False,
        aux_weight: float = 0.4,
        ignore_index: int = 255,
        inference: Literal["whole", "slide"] = "whole",
        slide_crop: tuple[int, int] = (512, 512),
        slide_stride: tuple[int, int] = (341, 341),
        lr: float = 1e-4,
        weight_decay: float = 0.05,
        layer_decay: float = 0.65,
        head_lr_mult: float = 10.0,
        warmup_steps: int = 1500,
        schedule: Literal["poly", "cosine", "step", "constant"] = "poly",
        num_overlays: int = 4,
        class_names: Optional[list[str]] = None,
        distill: Optional[dict] = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["backbone"])
        self.backbone = backbone
        self.setup_distillation(distill)
        n_levels = len(getattr(backbone, "out_indices", [0]))
        dim = backbone.out_channels
        if decode_head == "uper":
            scales = {4: (4.0, 2.0, 1.0, 0.5), 3: (4.0, 2.0, 1.0), 2: (2.0, 1.0), 1: (1.0,)}.get(n_levels)
            if scales is None:
                raise ValueError(f"model.decode_head=uper takes 1-4 backbone levels, the backbone gives {n_levels}")
            self.neck: nn.Module = MultiLevelRescale(dim, scales)
        else:
            self.neck = nn.Identity()
        in_channels = [dim] * n_levels
        self.head = build_decode_head(decode_head, in_channels, num_classes, head_channels, pool_scales)
        self.aux = FCNAuxHead(in_channels, num_classes, head_channels // 2, level=-2 if n_levels > 1 else -1) \
            if aux_head else None
        self.class_names = class_names
        base = MetricCollection({
            "confmat": MulticlassConfusionMatrix(num_classes, ignore_index=ignore_index),
            "pixel_acc": MulticlassAccuracy(num_classes, average="micro", ignore_index=ignore_index),
        })
        self.val_metrics = base.clone(prefix="val_")
        self.test_metrics = base.clone(prefix="test_")
        self.last_per_class_iou: Optional[list[float]] = None
        self._unlabelled_batches = self._seen_batches = 0

    # ---- model -----------------------------------------------------------------------------
    def _levels(self, images: torch.Tensor, pad: Optional[torch.Tensor]) -> list[torch.Tensor]:
        maps = self.backbone(images, pad) if pad is not None else self.backbone(images)
        return self.neck(maps) if not isinstance(self.neck, nn.Identity) else maps

    def forward(self, images: torch.Tensor, pad: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``(B, 3, H, W)`` (+ padding mask ``(B, H, W)``) -> logits ``(B, K, H, W)``."""
        logits = self.head(self._levels(images, pad))
        return F.interpolate(logits, size=images.shape[-2:], mode="bilinear", align_corners=False)

    @torch.no_grad()
    def slide_labels(self, images: torch.Tensor, pad: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Labels ``(B, H, W)`` of normalised ``images`` by windows of ``slide_crop`` every
        ``slide_stride``, class scores averaged (mmseg's slide mode; :mod:`~hydra_dense.predict.sliding`).
        Each image is read within its own valid part (``pad`` False); its padding gets label 0."""
        labels = torch.zeros(images.shape[0], *images.shape[-2:], dtype=torch.long, device=images.device)
        crop, stride, K = tuple(self.hparams.slide_crop), tuple(self.hparams.slide_stride), self.hparams.num_classes
        for i, image in enumerate(images):
            h, w = _valid_extent(pad[i]) if pad is not None else image.shape[-2:]
            labels[i, :h, :w] = sliding_window_labels(self, image[:, :h, :w], crop, stride, K).long()
        return labels

    def predict_batch_labels(self, images: torch.Tensor, pad: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Labels ``(B, H, W)``: the whole image at once, or by sliding windows (``inference: slide``)."""
        if self.hparams.inference == "slide":
            return self.slide_labels(images, pad)
        return self(images, pad).argmax(1)

    # ---- steps -----------------------------------------------------------------------------
    def training_step(self, batch, batch_idx: int) -> Optional[torch.Tensor]:
        if batch is None:  # every sample of the batch was skipped (skip_bad)
            return None
        images, masks, pad, _ = batch
        levels = self._levels(images, pad)
        logits = F.interpolate(self.head(levels), size=images.shape[-2:], mode="bilinear", align_corners=False)
        if not (masks != self.hparams.ignore_index).any():
            # cross-entropy over no pixel is 0/0: name the cause instead of a NaN loss, and teach nothing
            self._unlabelled_batches += 1
            if self._unlabelled_batches == 1:
                rank_zero_warn(f"training step {self.global_step}: every mask pixel of the batch is ignore_index="
                               f"{self.hparams.ignore_index}, so it has no labelled pixel to learn from (skipped; "
                               f"if every batch is like this, check the masks' values and reduce_zero_label)")
            limit = min(20, self.trainer.max_steps) if self.trainer.max_steps > 0 else 20
            if self._seen_batches == 0 and self._unlabelled_batches >= limit:
                raise ValueError(f"the first {self._unlabelled_batches} training batches hold no labelled pixel: every "
                                 f"mask pixel is ignore_index={self.hparams.ignore_index} (check the masks' values, "
                                 f"num_classes and reduce_zero_label)")
            return (logits * 0).sum()
        self._seen_batches += 1
        loss = F.cross_entropy(logits, masks, ignore_index=self.hparams.ignore_index)
        self.log("train_loss", loss, prog_bar=True, batch_size=images.shape[0])
        if self.aux is not None:
            aux = F.interpolate(self.aux(levels), size=images.shape[-2:], mode="bilinear", align_corners=False)
            aux_loss = F.cross_entropy(aux, masks, ignore_index=self.hparams.ignore_index)
            self.log("train_aux_loss", aux_loss, batch_size=images.shape[0])
            loss = loss + self.hparams.aux_weight * aux_loss
        return self.with_distillation(loss)

    def _eval_step(self, batch, metrics: MetricCollection, batch_idx: int, save_overlays: bool) -> None:
        if batch is None:
            return
        images, masks, pad, idx = batch
        preds = self.predict_batch_labels(images, pad)
        metrics.update(preds, masks)
        if save_overlays and batch_idx < self.hparams.num_overlays and self.trainer.is_global_zero:
            self._save_overlay(images[0], masks[0], preds[0], int(idx[0]))

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, self.val_metrics, batch_idx, save_overlays=True)

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, self.test_metrics, batch_idx, save_overlays=False)

    def predict_step(self, batch, batch_idx: int):
        if isinstance(batch, dict):  # files: labels and overlays written, names returned
            return self.predict_files_guarded(batch, self._predict_file)
        if batch is None:
            return None
        images, _, pad, idx = batch
        return {"index": idx, "mask": self.predict_batch_labels(images, pad).to(torch.uint8)}

    def predict_labels(self, image: torch.Tensor) -> torch.Tensor:
        """One image ``(3, H, W)`` uint8 of any size -> labels ``(H, W)``: whole when it fits in
        ``slide_crop``, else by sliding window with memory set by the window, not the image."""
        height, width = image.shape[-2:]
        small = self.min_predict_side()
        if min(height, width) < small:  # below what the feature pyramid can take: enlarge, then back
            scale = small / min(height, width)
            size = (max(small, round(height * scale)), max(small, round(width * scale)))
            big = F.interpolate(image[None].float(), size=size, mode="bilinear", align_corners=False)
            labels = self.predict_labels(big[0].round().clamp(0, 255).to(torch.uint8))
            return F.interpolate(labels[None, None].float(), size=(height, width), mode="nearest")[0, 0].to(labels.dtype)
        mean, std = self._normalisation()
        crop = tuple(self.hparams.slide_crop)
        stride = tuple(self.hparams.slide_stride)
        if height <= crop[0] and width <= crop[1]:
            stride = crop  # a single window: the whole image
        return sliding_window_labels(lambda x: self(x.to(self.device)).cpu(), image.cpu(), crop, stride,
                                     self.hparams.num_classes, mean, std)

    def min_predict_side(self) -> int:
        """The smallest image side the model predicts directly: four patches, so that the coarsest
        pyramid level (1/32 of a patch-16 grid) still has a pixel."""
        patch = getattr(getattr(self.backbone, "patch_embed", None), "patch_size", 16)
        patch = patch[0] if isinstance(patch, (tuple, list)) else int(patch)
        return 4 * patch

    def _predict_file(self, image: torch.Tensor, index: int) -> str:
        labels = self.predict_labels(image)
        out = self.predictions
        save_label_png(labels, out.path(index, ".png"), self.hparams.num_classes)
        save_overlay(image, labels, out.path(index, "_overlay.jpg"), self.hparams.num_classes)
        out.add(index)
        return out.inputs.names[index]

    def _normalisation(self) -> tuple[tuple, tuple]:
        """The data module's ``mean`` / ``std`` (ImageNet's without one)."""
        hp = getattr(getattr(self.trainer, "datamodule", None), "hparams", None)
        return tuple(getattr(hp, "mean", IMAGENET_MEAN)), tuple(getattr(hp, "std", IMAGENET_STD))

    def _log_metrics(self, metrics: MetricCollection, prefix: str) -> None:
        out = metrics.compute()
        if int(out[f"{prefix}confmat"].sum()) == 0:
            split = "validation" if prefix == "val_" else "test"
            rank_zero_warn(f"{split}: no mask holds a labelled pixel (every pixel is ignore_index="
                           f"{self.hparams.ignore_index}), so {prefix}mIoU is undefined (nan) and {prefix}pixel_acc "
                           f"means nothing; check the {split} masks' values and reduce_zero_label")
        iou = iou_from_confusion(out[f"{prefix}confmat"])
        miou = torch.nanmean(iou)
        self.log(f"{prefix}mIoU", miou.float(), prog_bar=True, sync_dist=False)
        self.log(f"{prefix}pixel_acc", out[f"{prefix}pixel_acc"].float(), prog_bar=True)
        self.last_per_class_iou = iou.tolist()
        metrics.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_metrics(self.val_metrics, "val_")

    def on_test_epoch_end(self) -> None:
        self._log_metrics(self.test_metrics, "test_")

    def per_class_table(self) -> str:
        """Markdown table of the last evaluation's per-class IoU."""
        if self.last_per_class_iou is None:
            return "(not evaluated yet)"
        names = self._class_names()
        lines = ["| class | IoU (%) |", "|---|---|"]
        for name, v in zip(names, self.last_per_class_iou):
            lines.append(f"| {name} | {'–' if v != v else f'{100 * v:.1f}'} |")
        return "\n".join(lines)

    def _class_names(self) -> list[str]:
        return class_names(self, self.hparams.num_classes, first=0)

    # ---- overlays --------------------------------------------------------------------------
    def _save_overlay(self, image: torch.Tensor, mask: torch.Tensor, pred: torch.Tensor, index: int) -> None:
        mean, std = self._normalisation()
        panel = overlay_panel(image, mask, pred, self.hparams.num_classes, mean, std, self.hparams.ignore_index)
        out = self.run_dir / "overlays" / f"epoch{self.current_epoch:03d}_step{self.global_step:06d}_sample{index}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_image(Image.fromarray(panel), out)
        experiment = getattr(self.logger, "experiment", None)
        if hasattr(experiment, "add_image"):
            experiment.add_image(f"val_overlay/{index}", np.ascontiguousarray(panel.transpose(2, 0, 1)), self.global_step)

    # ---- what the base task needs --------------------------------------------------------------
    data_kind = "segmentation"

    def head_modules(self) -> list[nn.Module]:
        return [m for m in (self.neck, self.head, self.aux) if m is not None]
