"""What the three tasks share: the checks before anything runs (the data module's kind and class
count against the model's), AdamW with layer-wise lr decay over the backbone and the task's own
modules at ``head_lr_mult``, the warm-up schedule, and distillation / file predictions (their
mixins)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .class_names import check_class_count, check_data_kind
from .distill import FeatureDistillation
from .file_predictions import FilePredictions
from .optim import make_optimizer

__all__ = ["DenseTask"]


class DenseTask(FeatureDistillation, FilePredictions):
    """Base of the segmentation, detection and video tasks (a ``LightningModule``).

    A task says what data it trains on (``data_kind``), which modules besides ``backbone`` it
    trains (:meth:`head_modules`) and how many classes its data module has (:meth:`data_classes`);
    its ``hparams`` hold ``lr``, ``weight_decay``, ``layer_decay``, ``head_lr_mult``,
    ``warmup_steps``, ``schedule`` (and ``milestones`` for a step schedule).
    """

    data_kind: str = ""
    class_word: str = "classes"  # what the data module's classes are called in errors

    def head_modules(self) -> list[nn.Module]:
        """The modules trained besides the backbone (decoder, necks, heads), at ``lr * head_lr_mult``."""
        raise NotImplementedError

    def data_classes(self, dm) -> Optional[int]:
        """The data module's class count (None: it does not say)."""
        return getattr(dm, "num_classes", None)

    def setup(self, stage: str) -> None:
        """Before anything runs: the data module's kind and class count against the model's."""
        check_data_kind(self, self.data_kind)
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is not None:
            check_class_count(self, self.data_classes(dm), self.class_word)

    def with_distillation(self, loss: torch.Tensor) -> torch.Tensor:
        """The training loss with the distillation term added, when the task distils."""
        distill = self.distillation_loss()
        return loss if distill is None else loss + distill

    def configure_optimizers(self):
        h = self.hparams
        milestones = tuple(h.get("milestones", (0.67, 0.89)))
        return make_optimizer(self.backbone, self.head_modules(), h.lr, h.weight_decay, h.layer_decay, h.head_lr_mult,
                              int(self.trainer.estimated_stepping_batches), h.warmup_steps, h.schedule,
                              milestones=milestones)
