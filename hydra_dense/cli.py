"""LightningCLI entry point: ``hydra-dense-train {fit,validate,test,predict} --config ...``.

Any LightningModule / LightningDataModule is chosen by ``class_path`` in YAML (the tasks in
:mod:`hydra_dense.tasks`, the data modules in :mod:`hydra_dense.data`); the backbone is a
separate YAML file swapped with ``--model.init_args.backbone=configs/backbones/<name>.yaml``.
"""
from __future__ import annotations

from typing import Optional

import lightning as L
from lightning.pytorch.cli import LightningCLI


class HydraDenseCLI(LightningCLI):
    """LightningCLI with subclass mode for model and data (no home-made registry)."""


def main(args: Optional[list[str]] = None, run: bool = True) -> HydraDenseCLI:
    return HydraDenseCLI(
        model_class=L.LightningModule,
        datamodule_class=L.LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        args=args,
        run=run,
        auto_configure_optimizers=False,
    )


if __name__ == "__main__":
    main()
