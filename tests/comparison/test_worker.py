"""hydra_dense.comparison.worker: what one run's result.json says about the model it trained."""
import json

import lightning as L

from hydra_dense.backbones import ViT
from hydra_dense.comparison import worker
from hydra_dense.comparison.request import RunRequest
from hydra_dense.data import SegmentationDataModule
from hydra_dense.tasks import SegmentationTask
from tests.helpers.images import make_ade


def test_the_per_class_table_is_the_intact_model_s_not_the_last_evaluation_s(tmp_path, monkeypatch):
    """The zeroed-path and other-size evaluations validate the model again after its score is read;
    the per-class table must still be the intact model's (it used to be whichever ran last)."""
    L.seed_everything(0)
    root = make_ade(tmp_path / "data", n_train=4, n_val=2)
    model = SegmentationTask(ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=4, img_size=32, out_indices=[0, 1],
                                 plan={"default": "hydra", "local": "dwc3"}),
                             num_classes=4, decode_head="uper", head_channels=16, pool_scales=[1, 2])
    dm = SegmentationDataModule(str(root), num_classes=4, crop_size=(32, 32), batch_size=2, val_batch_size=2,
                                num_workers=0)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_checkpointing=False,
                        default_root_dir=tmp_path)
    trainer.validate(model, datamodule=dm, verbose=False)
    intact = model.per_class_table()

    def another_evaluation(model, dm, trainer, metric):  # as a zeroed evaluation leaves the model
        model.last_per_class_iou = [0.5] * 4
        return 50.0

    monkeypatch.setattr(worker, "score_head_pool_zeroed", another_evaluation)
    req = RunRequest(recipe="hydra+dwc3", seed=0, config="unused.yaml")
    worker._validate_and_describe(req, tmp_path, model, dm, trainer, {})
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["score_head_pool_zeroed"] == 50.0
    assert result["per_class"].startswith(intact) and "| 50.0 |" not in result["per_class"]
