"""An OpenMMLab config (mmseg segmentor / mmdet detector, its datasets and evaluator) trained by
Lightning, so it gets hydra_dense's CLI, DDP, checkpoints and resume.

    python tools/train.py fit --config configs/mm/seg_digits_tiny.yaml
"""
from __future__ import annotations

import numbers
from pathlib import Path
from typing import Literal, Optional

import lightning as L
import torch
from torch.utils.data import DataLoader

from ..tasks.optim import adamw_with_schedule
from . import register

__all__ = ["MMTask", "MMDataModule", "load_mm_config"]


def load_mm_config(config: str | Path, cfg_options: Optional[dict] = None):
    """``mmengine.Config`` of ``config`` with ``cfg_options`` merged (dotted keys), its default
    scope (``mmseg`` / ``mmdet``) made current and our modules registered."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    path = Path(config).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"mm config {path} does not exist")
    cfg = Config.fromfile(str(path))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    scope = cfg.get("default_scope")
    if scope not in ("mmseg", "mmdet"):
        raise ValueError(f"{path}: default_scope must be 'mmseg' or 'mmdet', got {scope!r}")
    init_default_scope(scope)
    register()
    for key in list(cfg.keys()):
        _expand_paths(cfg[key])
    return cfg


def _expand_paths(node) -> None:
    """``~`` in ``data_root`` / ``ann_file`` values (mm datasets and evaluators join paths as given)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("data_root", "ann_file") and isinstance(v, str):
                node[k] = str(Path(v).expanduser())
            else:
                _expand_paths(v)
    elif isinstance(node, (list, tuple)):
        for v in node:
            _expand_paths(v)


class MMTask(L.LightningModule):
    """The ``model`` of an mm config, trained with its own data preprocessor and losses.

    Args:
        config: mmseg / mmdet config file (python), e.g. ``configs/mm/mmseg_upernet_hydra_tiny_digits.py``.
        cfg_options: overrides merged into it (``{"model.decode_head.num_classes": 5}``).
        lr, weight_decay, warmup_steps, schedule: AdamW, linear warm-up, then poly / cosine /
            constant over the trainer's steps (the config's ``optim_wrapper`` / ``param_scheduler``
            are mmengine-Runner settings and are not used).

    Validation uses the config's ``val_evaluator`` (mmseg ``IoUMetric``, mmdet ``CocoMetric``...),
    whose results are gathered over DDP ranks by mmengine; its metrics are logged as ``val_<name>``.
    """

    def __init__(self, config: str, cfg_options: Optional[dict] = None, lr: float = 1e-4,
                 weight_decay: float = 0.05, warmup_steps: int = 100,
                 schedule: Literal["poly", "cosine", "constant"] = "poly") -> None:
        super().__init__()
        self.save_hyperparameters()
        from mmengine.registry import MODELS

        self.cfg = load_mm_config(config, cfg_options)
        self.model = MODELS.build(self.cfg.model)
        self.model.init_weights()
        self._evaluator = None
        # mmseg's IoUMetric reports percentages, hydra_dense logs fractions (as torchmetrics does)
        self._metric_scale = 0.01 if self.cfg.default_scope == "mmseg" else 1.0

    @property
    def backbone(self):
        """The hydra_dense ViT inside the mm model (``set_plan`` swaps its attention, as for our tasks)."""
        return self.model.backbone.vit

    def forward(self, images: torch.Tensor):
        """Normalised ``(B, 3, H, W)`` -> the model's predictions (``predict`` with minimal metadata);
        what the comparison job times and counts FLOPs of."""
        from mmengine.structures import BaseDataElement

        h, w = images.shape[-2:]
        meta = dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w), batch_input_shape=(h, w),
                    scale_factor=(1.0, 1.0))
        if self.cfg.default_scope == "mmseg":
            from mmseg.structures import SegDataSample as Sample
        else:
            from mmdet.structures import DetDataSample as Sample
        samples: list[BaseDataElement] = [Sample(metainfo=meta) for _ in range(len(images))]
        return self.model.predict(images, samples)

    def images_of(self, batch: dict) -> torch.Tensor:
        """The normalised image tensor of a data-loader batch (the config's data preprocessor)."""
        return self.model.data_preprocessor(batch, False)["inputs"]

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        data = self.model.data_preprocessor(batch, training=True)
        loss, log_vars = self.model.parse_losses(self.model(**data, mode="loss"))
        n = len(batch["inputs"])
        self.log_dict({f"train_{k}": float(v) for k, v in log_vars.items() if k != "loss"}, batch_size=n)
        self.log("train_loss", loss.detach(), prog_bar=True, batch_size=n)
        return loss

    def _evaluator_for(self, split: str):
        from mmengine.evaluator import Evaluator

        if self._evaluator is None:
            self._evaluator = Evaluator(self.cfg.get(f"{split}_evaluator"))
            dm = self.trainer.datamodule
            self._evaluator.dataset_meta = dm.datasets[split].metainfo
        return self._evaluator

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        outputs = self.model.val_step(batch)
        self._evaluator_for("val").process(data_samples=outputs, data_batch=batch)

    def on_validation_epoch_end(self) -> None:
        if self._evaluator is None:
            return
        size = len(self.trainer.datamodule.datasets["val"])
        metrics = self._evaluator.evaluate(size)  # gathers over ranks, drops the sampler's padding
        for k, v in metrics.items():
            if isinstance(v, numbers.Real):  # numpy scalars too (IoUMetric returns float32)
                name = k.split("/")[-1]
                self.log(f"val_{name}", float(v) * self._metric_scale, prog_bar=True)
                if name in ("bbox_mAP", "bbox_mAP_50"):  # the names hydra_dense's DetectionTask logs
                    self.log(f"val_{name.removeprefix('bbox_')}", float(v), prog_bar=False)

    def predict_step(self, batch: dict, batch_idx: int):
        return self.model.test_step(batch)

    def configure_optimizers(self):
        h = self.hparams
        params = [p for p in self.model.parameters() if p.requires_grad]
        decay = [p for p in params if p.ndim > 1]
        no_decay = [p for p in params if p.ndim <= 1]
        groups = [dict(params=decay, weight_decay=h.weight_decay), dict(params=no_decay, weight_decay=0.0)]
        return adamw_with_schedule(groups, h.lr, int(self.trainer.estimated_stepping_batches), h.warmup_steps,
                                   h.schedule)


class MMDataModule(L.LightningDataModule):
    """The ``train_dataloader`` / ``val_dataloader`` datasets and pipelines of an mm config, in
    plain torch DataLoaders (Lightning adds the distributed samplers; mmengine's own samplers
    would shard a second time). ``data_options`` are merged into the config like the model's
    ``cfg_options`` (e.g. ``{"train_dataloader.dataset.data_root": "/data/ade"}``)."""

    def __init__(self, config: str, data_options: Optional[dict] = None, batch_size: Optional[int] = None,
                 num_workers: Optional[int] = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.cfg = load_mm_config(config, data_options)
        self.datasets: dict = {}

    def prepare_data(self) -> None:
        """The embedded demo data, when the config points at its default folders (cached)."""
        roots = {Path(str(self.cfg[f"{s}_dataloader"]["dataset"].get("data_root", ""))) for s in ("train", "val")
                 if self.cfg.get(f"{s}_dataloader")}
        for root in roots:  # prepare() is idempotent and writes where the config points
            if root.name == "digit_scenes":
                from ..data.demo_segmentation import prepare

                prepare(root)
            elif root.name == "digit_instances":
                from ..data.demo_instances import prepare as prepare_instances

                prepare_instances(root)

    def setup(self, stage: Optional[str] = None) -> None:
        from mmengine.registry import DATASETS

        for split in ("train", "val"):
            key = f"{split}_dataloader"
            if split not in self.datasets and self.cfg.get(key):
                self.datasets[split] = DATASETS.build(self.cfg[key]["dataset"])

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        from mmengine.dataset import pseudo_collate

        spec = self.cfg[f"{split}_dataloader"]
        workers = self.hparams.num_workers if self.hparams.num_workers is not None else spec.get("num_workers", 0)
        batch = self.hparams.batch_size if (self.hparams.batch_size and split == "train") else spec["batch_size"]
        return DataLoader(self.datasets[split], batch_size=batch, shuffle=shuffle, num_workers=workers,
                          collate_fn=pseudo_collate, drop_last=shuffle, persistent_workers=workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)
