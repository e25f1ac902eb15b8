"""Video classification with a space-time ViT backbone (joint or divided, any attention plan)."""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy
from torchvision import tv_tensors
from torchvision.transforms import v2

from ..predict.outputs import top_k_row, write_csv
from .base import DenseTask
from .class_names import class_names

__all__ = ["VideoClassificationTask"]


class VideoClassificationTask(DenseTask):
    """``VideoViT`` -> pooled features -> dropout -> linear head; top-1 / top-5 from torchmetrics.

    Args:
        backbone: a :class:`~hydra_dense.backbones.VideoViT` (YAML ``class_path``).
        num_classes: classes. label_smoothing: cross-entropy smoothing.
        mixup_alpha / cutmix_alpha: batch mixing (0 disables; when both are set, one of the two
            is drawn per batch). head_dropout: dropout before the head.
        lr, weight_decay, layer_decay, head_lr_mult, warmup_steps, schedule: AdamW with
            layer-wise lr decay, warm-up then cosine (VideoMAE's fine-tuning recipe).
        distill: ``{teacher: <MSA weights or a run's weights>, weight: 1.0, plan: msa}``: the frozen
            teacher's backbone features as an extra training loss (:mod:`~hydra_dense.tasks.distill`).

    Test batches may hold several views per video ``(B, V, C, T, H, W)`` (clips x crops): their
    softmax scores are averaged per video before the metrics.
    """

    def __init__(
        self,
        backbone: nn.Module,
        num_classes: int,
        label_smoothing: float = 0.1,
        mixup_alpha: float = 0.0,
        cutmix_alpha: float = 0.0,
        head_dropout: float = 0.0,
        lr: float = 1e-3,
        weight_decay: float = 0.05,
        layer_decay: float = 0.75,
        head_lr_mult: float = 1.0,
        warmup_steps: int = 500,
        schedule: Literal["cosine", "poly", "step", "constant"] = "cosine",
        distill: Optional[dict] = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["backbone"])
        self.backbone = backbone
        self.setup_distillation(distill)
        self.fc_norm = nn.LayerNorm(backbone.embed_dim)
        self.head = nn.Sequential(nn.Dropout(head_dropout), nn.Linear(backbone.embed_dim, num_classes))
        nn.init.trunc_normal_(self.head[1].weight, std=0.02)
        nn.init.zeros_(self.head[1].bias)
        k = min(5, num_classes)
        base = MetricCollection({"top1": MulticlassAccuracy(num_classes, top_k=1, average="micro"),
                                 f"top{k}": MulticlassAccuracy(num_classes, top_k=k, average="micro")})
        mixers = ([v2.MixUp(alpha=mixup_alpha, num_classes=num_classes)] if mixup_alpha > 0 else []) + \
            ([v2.CutMix(alpha=cutmix_alpha, num_classes=num_classes)] if cutmix_alpha > 0 else [])
        self._mixer = v2.RandomChoice(mixers) if mixers else None
        self.val_metrics = base.clone(prefix="val_")
        self.test_metrics = base.clone(prefix="test_")

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        """``(B, C, T, H, W)`` -> logits ``(B, num_classes)``."""
        return self.head(self.fc_norm(self.backbone(clips)))

    def _mix(self, clips: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mixup or CutMix (one, drawn per batch) on clips ``(B, C, T, H, W)``, by torchvision's
        v2 transforms; the CutMix box is the same in every frame. Returns soft targets ``(B, K)``."""
        if self._mixer is None or clips.shape[0] < 2:
            return clips, F.one_hot(target, self.hparams.num_classes).float()
        video = tv_tensors.Video(clips.transpose(1, 2))  # torchvision's video layout: (B, T, C, H, W)
        mixed, soft = self._mixer(video, target)
        return mixed.as_subclass(torch.Tensor).transpose(1, 2), soft

    def training_step(self, batch, batch_idx: int) -> Optional[torch.Tensor]:
        if batch is None:
            return None
        clips, target, _ = batch
        clips, soft = self._mix(clips, target)
        loss = F.cross_entropy(self(clips), soft, label_smoothing=self.hparams.label_smoothing)
        self.log("train_loss", loss, prog_bar=True, batch_size=clips.shape[0])
        return self.with_distillation(loss)

    def _scores(self, clips: torch.Tensor) -> torch.Tensor:
        if clips.dim() == 6:  # (B, V, C, T, H, W): average the views' softmax per video
            B, V = clips.shape[:2]
            return self(clips.flatten(0, 1)).softmax(-1).reshape(B, V, -1).mean(1)
        return self(clips).softmax(-1)

    def validation_step(self, batch, batch_idx: int) -> None:
        if batch is not None:
            self.val_metrics.update(self._scores(batch[0]), batch[1])

    def test_step(self, batch, batch_idx: int) -> None:
        if batch is not None:
            self.test_metrics.update(self._scores(batch[0]), batch[1])

    def predict_step(self, batch, batch_idx: int):
        if batch is None:
            return None
        scores = self._scores(batch[0])
        if self.predictions is not None:  # files: top-5 per video into the run's CSV
            names = class_names(self, self.hparams.num_classes)
            for i, s in zip(batch[2].tolist(), scores.cpu()):
                self.predictions.add(i, [top_k_row(self.predictions.inputs.names[i], s, names)])
        return {"index": batch[2], "scores": scores}

    def write_prediction_table(self, rows: list, folder: Path) -> Path:
        return write_csv(rows, folder / "top5.csv")

    def on_validation_epoch_end(self) -> None:
        self.log_dict({k: v.float() for k, v in self.val_metrics.compute().items()}, prog_bar=True)
        self.val_metrics.reset()

    def on_test_epoch_end(self) -> None:
        self.log_dict({k: v.float() for k, v in self.test_metrics.compute().items()})
        self.test_metrics.reset()

    # ---- what the base task needs --------------------------------------------------------------
    data_kind = "video"

    def data_classes(self, dm) -> Optional[int]:
        names = getattr(dm, "class_names", None)
        return len(names) if names else None

    def head_modules(self) -> list[nn.Module]:
        return [self.fc_norm, self.head]
