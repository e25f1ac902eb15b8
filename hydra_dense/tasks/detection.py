"""Object detection and instance segmentation: ViT (any attention plan) + simple pyramid + a
torchvision detector, trained with Lightning and scored with COCO mAP."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal, Optional, Sequence

import torch
from PIL import Image
from torch import nn
from torchmetrics.detection import MeanAveragePrecision

from ..data.normalisation import IMAGENET_MEAN, IMAGENET_STD
from ..drawing import draw_detections
from ..heads.detection import PaddedPyramidBackbone, build_detector
from ..runtime.atomic_file import atomic_save_image
from .base import DenseTask
from .class_names import class_names
from .coco_results import detections_to_coco, gather_results, write_coco_results
from .map_sync import gather_map_states

log = logging.getLogger(__name__)

__all__ = ["DetectionTask"]

# torchmetrics key -> logged name (``val_`` / ``test_`` prefix added); segm keys get ``mask_``
_LOGGED = {"map": "mAP", "map_50": "mAP_50", "map_75": "mAP_75", "map_small": "mAP_s", "map_medium": "mAP_m",
           "map_large": "mAP_l", "mar_100": "mAR_100"}


class DetectionTask(DenseTask):
    """A ViT backbone, ViTDet's simple feature pyramid and a torchvision detector.

    Args:
        backbone: a :class:`~hydra_dense.backbones.ViT` (YAML ``class_path``); its last
            ``out_indices`` map feeds the pyramid.
        num_classes: object classes, background excluded (checked against the data module).
        detector: ``mask_rcnn``, ``faster_rcnn``, ``retinanet`` or ``fcos``.
        pyramid_channels, pyramid_scales, top_block: the pyramid (scales 4, 2, 1, 0.5 = strides
            4–32 for patch 16; ``top_block`` adds a stride-64 level). RetinaNet / FCOS: use
            scales ``[2, 1, 0.5]`` + top_block (strides 8–64).
        anchor_sizes, aspect_ratios: one anchor base size per level (default 8x the stride).
        min_size, max_size, resize_train, resize_eval: the detector's own resize (ViTDet LSJ
            recipe: the data module resizes for training, evaluation resizes the longest side
            to 1024: ``min_size = max_size = 1024``).
        detections_per_img, score_thresh: post-processing. box_batch_size_per_image: RoIs sampled
            per image for the R-CNN box head in training (512 as detectron2; fewer is cheaper).
        lr, weight_decay, layer_decay, head_lr_mult, warmup_steps, schedule, milestones: AdamW
            with layer-wise lr decay, linear warm-up, then step (at ``milestones`` fractions of
            the run) / cosine / poly; total steps from the trainer.
        write_predictions: write each evaluation's detections as a COCO results json in the log dir.
        num_overlays: validation images drawn with their detections (PNG) per evaluation.
        class_names: names for the per-class AP table (else the data module's).
        distill: ``{teacher: <MSA weights or a run's weights>, weight: 1.0, plan: msa}``: the frozen
            teacher's backbone features as an extra training loss (:mod:`~hydra_dense.tasks.distill`).
    """

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        detector: Literal["mask_rcnn", "faster_rcnn", "retinanet", "fcos"] = "mask_rcnn",
        pyramid_channels: int = 256,
        pyramid_scales: Sequence[float] = (4.0, 2.0, 1.0, 0.5),
        top_block: bool = True,
        anchor_sizes: Optional[list[int]] = None,
        aspect_ratios: Sequence[float] = (0.5, 1.0, 2.0),
        min_size: int = 1024,
        max_size: int = 1024,
        resize_train: bool = False,
        resize_eval: bool = True,
        image_mean: Sequence[float] = IMAGENET_MEAN,
        image_std: Sequence[float] = IMAGENET_STD,
        detections_per_img: int = 100,
        score_thresh: float = 0.05,
        box_batch_size_per_image: int = 512,
        lr: float = 1e-4,
        weight_decay: float = 0.1,
        layer_decay: float = 0.7,
        head_lr_mult: float = 1.0,
        warmup_steps: int = 250,
        schedule: Literal["step", "cosine", "poly", "constant"] = "step",
        milestones: Sequence[float] = (0.89, 0.96),
        write_predictions: bool = True,
        num_overlays: int = 2,
        class_names: Optional[list[str]] = None,
        distill: Optional[dict] = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["backbone"])
        pyramid_backbone = PaddedPyramidBackbone(backbone, pyramid_channels, tuple(pyramid_scales), top_block)
        self.detector = build_detector(detector, pyramid_backbone, num_classes, anchor_sizes, aspect_ratios,
                                       min_size, max_size, image_mean, image_std, resize_train, resize_eval,
                                       detections_per_img, score_thresh, box_batch_size_per_image)
        self.setup_distillation(distill)
        self.with_masks = detector == "mask_rcnn"
        iou_type = ("bbox", "segm") if self.with_masks else "bbox"
        # synchronised by gather_map_states (uneven image counts per rank), not by torchmetrics
        self.val_map = MeanAveragePrecision(iou_type=iou_type, class_metrics=True, backend="pycocotools",
                                            sync_on_compute=False)
        self.test_map = MeanAveragePrecision(iou_type=iou_type, class_metrics=True, backend="pycocotools",
                                             sync_on_compute=False)
        self._eval_indices: list[int] = []
        self.class_names = class_names
        self.category_ids: Optional[list[int]] = None
        self._results: list[dict] = []
        self.last_per_class: Optional[dict[str, dict[int, float]]] = None
        self.last_predictions_path: Optional[Path] = None

    @property
    def backbone(self) -> nn.Module:
        """The ViT (what the comparison tools swap plans on)."""
        return self.detector.backbone.vit

    # ---- checks before training (the base task's, and the masks) ----------------------------
    data_kind = "detection"
    class_word = "categories"

    def setup(self, stage: str) -> None:
        super().setup(stage)
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None:
            return
        if self.with_masks and not getattr(getattr(dm, "hparams", None), "masks", True):
            raise ValueError("model.detector=mask_rcnn needs instance masks: set --data.init_args.masks=true")
        self.category_ids = list(getattr(dm, "category_ids", None) or range(1, self.hparams.num_classes + 1))

    # ---- model -----------------------------------------------------------------------------
    def forward(self, images: list[torch.Tensor] | torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """Images ``[(3, H_i, W_i)]`` (or a ``(B, 3, H, W)`` batch) float in [0, 1] -> detections per
        image (``boxes (N, 4)`` xyxy in input pixels, ``scores``, ``labels`` 1..K, Mask R-CNN
        ``masks (N, 1, H_i, W_i)`` probabilities)."""
        return self.detector(list(images))

    def training_step(self, batch, batch_idx: int) -> Optional[torch.Tensor]:
        if batch is None:  # every sample was skipped (skip_bad)
            return None
        images, targets, _ = batch
        targets = [{k: v for k, v in t.items() if k in ("boxes", "labels", "masks")} for t in targets]
        losses = self.detector(images, targets)
        loss = sum(losses.values())
        bs = len(images)
        for k, v in losses.items():
            self.log(f"train_{k}", v, batch_size=bs)
        self.log("train_loss", loss, prog_bar=True, batch_size=bs)
        return self.with_distillation(loss)

    def _metric_target(self, t: dict) -> dict:
        out = dict(boxes=t["boxes"], labels=t["labels"], iscrowd=t["iscrowd"].long())
        if self.with_masks:
            out["masks"] = t["masks"].bool()
        return out

    def _metric_pred(self, p: dict) -> dict:
        out = dict(boxes=p["boxes"].float(), scores=p["scores"].float(), labels=p["labels"])
        if self.with_masks:
            out["masks"] = p["masks"][:, 0] > 0.5
        return out

    def _eval_step(self, batch, metric: MeanAveragePrecision, batch_idx: int, split: str) -> None:
        if batch is None:
            return
        images, targets, idx = batch
        preds = self.detector(images)
        self._eval_indices.extend(int(i) for i in idx)
        metric.update([self._metric_pred(p) for p in preds], [self._metric_target(t) for t in targets])
        if self.hparams.write_predictions:
            cats = self.category_ids or list(range(1, self.hparams.num_classes + 1))
            for p, t in zip(preds, targets):
                self._results.extend(detections_to_coco(p, int(t["image_id"]), cats))
        if split == "val" and batch_idx < self.hparams.num_overlays and self.trainer.is_global_zero:
            self._save_overlay(images[0], preds[0], int(targets[0]["image_id"]))

    def validation_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, self.val_map, batch_idx, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._eval_step(batch, self.test_map, batch_idx, "test")

    def predict_step(self, batch, batch_idx: int) -> list:
        if isinstance(batch, dict):  # files: drawn PNGs written, detections kept for the json
            return self.predict_files_guarded(batch, self._predict_file)
        if batch is None:
            return []
        images, targets, _ = batch
        preds = self.detector(images)
        return [dict(image_id=int(t["image_id"]), **{k: v.cpu() for k, v in p.items()})
                for p, t in zip(preds, targets)]

    def _predict_file(self, image: torch.Tensor, index: int) -> str:
        pred = {k: v.cpu() for k, v in self.detector([image.to(self.device).float() / 255])[0].items()}
        out = self.predictions
        name = out.inputs.names[index]
        atomic_save_image(Image.fromarray(draw_detections(image, pred, self._class_names())), out.path(index, ".png"))
        cats = self.category_ids or list(range(1, self.hparams.num_classes + 1))
        out.add(index, [dict(r, file_name=name) for r in detections_to_coco(pred, index, cats)])
        return name

    def write_prediction_table(self, rows: list, folder: Path) -> Path:
        """COCO results (``image_id`` = the input's position in the sorted input list, plus its
        ``file_name``)."""
        return write_coco_results(sorted(rows, key=lambda r: (r["image_id"], -r["score"])), folder / "detections.json")

    def _finish_eval(self, metric: MeanAveragePrecision, split: str) -> None:
        gather_map_states(metric, self._eval_indices)
        self._eval_indices = []
        out = metric.compute()
        metric.reset()
        prefixes = (("bbox_", ""), ("segm_", "mask_")) if self.with_masks else (("", ""),)
        per_class: dict[str, dict[int, float]] = {}
        for src, dst in prefixes:
            for key, name in _LOGGED.items():
                value = out[f"{src}{key}"].float()
                # torchmetrics says -1 where a value is undefined (no object of that size)
                self.log(f"{split}_{dst}{name}", value if value >= 0 else torch.tensor(float("nan")),
                         prog_bar=key == "map", sync_dist=False)
            classes = out["classes"].flatten().tolist()
            values = out[f"{src}map_per_class"].flatten().tolist()
            per_class[dst or "box_"] = {int(c): float(v) for c, v in zip(classes, values)}
        self.last_per_class = per_class
        if self.hparams.write_predictions and self.trainer is not None and not self.trainer.sanity_checking:
            results = gather_results(self._results)
            if self.trainer.is_global_zero:
                path = self.run_dir / "predictions" / f"{split}_step{self.global_step:06d}.json"
                self.last_predictions_path = write_coco_results(results, path)
        self._results = []

    def on_validation_epoch_end(self) -> None:
        self._finish_eval(self.val_map, "val")

    def on_test_epoch_end(self) -> None:
        self._finish_eval(self.test_map, "test")

    def per_class_table(self) -> str:
        """Markdown table of the last evaluation's AP per class (box, and mask for Mask R-CNN)."""
        if not self.last_per_class:
            return "(not evaluated yet)"
        names = self._class_names()
        kinds = list(self.last_per_class)
        header = " | ".join(f"{'box' if k == 'box_' else 'mask'} AP (%)" for k in kinds)
        lines = [f"| class | {header} |", "|---|" + "---|" * len(kinds)]
        for label in range(1, self.hparams.num_classes + 1):
            cells = []
            for k in kinds:
                v = self.last_per_class[k].get(label)
                cells.append("–" if v is None or v < 0 else f"{100 * v:.1f}")
            lines.append(f"| {names[label - 1]} | {' | '.join(cells)} |")
        return "\n".join(lines)

    def _class_names(self) -> list[str]:
        return class_names(self, self.hparams.num_classes, first=1)

    def _save_overlay(self, image: torch.Tensor, pred: dict, image_id: int) -> None:
        panel = draw_detections(image, pred, self._class_names())
        out = self.run_dir / "overlays" / f"step{self.global_step:06d}_image{image_id}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_image(Image.fromarray(panel), out)

    # ---- optimisation (the base task's, over these modules) ----------------------------------
    def head_modules(self) -> list[nn.Module]:
        others = [m for name, m in self.detector.named_children() if name not in ("backbone", "transform")]
        return others + [self.detector.backbone.pyramid]
