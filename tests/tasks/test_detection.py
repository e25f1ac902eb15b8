"""DetectionTask: tiny end-to-end train/eval, COCO results round trip, padding invariance, errors."""
import json
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from hydra_dense.backbones import ViT
from hydra_dense.data.demo_instances import prepare as prepare_instances
from hydra_dense.data.detection import DetectionDataModule
from hydra_dense.tasks import DetectionTask
from hydra_dense.tasks.coco_results import detections_to_coco, write_coco_results


def tiny_vit(plan="hydra", **kw):
    return ViT(None, embed_dim=32, depth=2, num_heads=2, patch_size=16, img_size=64, class_token=False,
               plan=plan, out_indices=[1], **kw)


def tiny_task(detector="mask_rcnn", plan="hydra", **kw):
    kw.setdefault("pyramid_channels", 32)
    kw.setdefault("anchor_sizes", [16, 32, 64, 128, 256])
    return DetectionTask(tiny_vit(plan), num_classes=10, detector=detector, min_size=64, max_size=64,
                         resize_train=True, warmup_steps=2, lr=1e-3, **kw)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return prepare_instances(tmp_path_factory.mktemp("inst"), n_train=12, n_val=6, size=80)


def digit_dm(root, **kw):
    return DetectionDataModule(str(root), train_json="annotations/instances_train.json",
                               val_json="annotations/instances_val.json", train_images="train", val_images="val",
                               masks=True, num_workers=0, batch_size=4, val_batch_size=3, **kw)


@pytest.mark.parametrize("detector", ["faster_rcnn", "retinanet", "fcos"])
def test_detectors_train_and_predict(detector):
    task = tiny_task(detector, pyramid_scales=(2.0, 1.0, 0.5) if detector != "faster_rcnn" else (4.0, 2.0, 1.0, 0.5),
                     anchor_sizes=[32, 64, 128, 256] if detector != "faster_rcnn" else None)
    images = [torch.rand(3, 64, 80), torch.rand(3, 48, 64)]
    targets = [dict(boxes=torch.tensor([[4.0, 6.0, 30.0, 40.0]]), labels=torch.tensor([3])),
               dict(boxes=torch.zeros(0, 4), labels=torch.zeros(0, dtype=torch.int64))]  # a negative image
    task.train()
    losses = task.detector(images, targets)
    loss = sum(losses.values())
    assert torch.isfinite(loss)
    loss.backward()
    assert task.detector.backbone.vit.blocks[0].attn.qkv.weight.grad.abs().sum() > 0
    task.eval()
    with torch.no_grad():
        out = task(images)
    assert len(out) == 2 and out[0]["boxes"].shape[1] == 4
    assert (out[0]["boxes"][:, 2] <= 80).all() and (out[1]["boxes"][:, 3] <= 48).all()  # input coordinates


def test_padding_is_masked_in_the_backbone():
    """The transform hands the valid sizes to the backbone: a padded image in a batch gets the same
    pyramid features (in its valid region) as alone."""
    torch.manual_seed(0)
    task = tiny_task("faster_rcnn", resize_eval=False).eval()
    seen = []
    vit = task.detector.backbone.vit
    orig = vit.forward_tokens
    vit.forward_tokens = lambda x, pad_mask=None, stop_at=None: (seen.append(pad_mask), orig(x, pad_mask, stop_at))[1]
    a, b = torch.rand(3, 50, 70), torch.rand(3, 100, 90)
    with torch.no_grad():
        task([a, b])
    assert seen[-1] is not None and seen[-1].shape == (2, 128, 128)
    assert not seen[-1][0, :50, :70].any() and seen[-1][0, 50:].all() and seen[-1][0, :, 70:].all()


@pytest.mark.parametrize("plan", ["hydra", "msa", {"default": "hydra", "local": "dwc3"},
                                  {"default": "aft", "local": "dwc3"}, "polynl"])
def test_detections_padding_invariant(plan):
    """The same image alone and padded inside a batch gives the same detections (Hydra: padded
    tokens never enter the global sum; local mixing: they are zeros, like the border padding)."""
    from tests.helpers.mixing import randomise

    torch.manual_seed(0)
    task = randomise(tiny_task("faster_rcnn", plan=plan, score_thresh=0.0, resize_eval=False)).eval()
    img = torch.rand(3, 60, 76)
    big = torch.rand(3, 128, 112)
    with torch.no_grad():
        alone = task([img])[0]
        batched = task([img, big])[0]
    assert len(alone["boxes"]) > 10
    n = min(len(alone["boxes"]), len(batched["boxes"]), 30)
    torch.testing.assert_close(batched["scores"][:n], alone["scores"][:n], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched["boxes"][:n], alone["boxes"][:n], atol=1e-3, rtol=1e-5)
    if plan == "hydra":  # and without the mask the global sum sees the padding: detections change
        task.detector.transform._sink.clear()
        with torch.no_grad():
            unmasked = task([img, big])[0]
        assert not torch.allclose(unmasked["boxes"][:n], alone["boxes"][:n], atol=1e-3)


def test_coco_results_round_trip_against_pycocotools(digits, tmp_path):
    """Ground truth written as predictions scores AP 1 with the reference COCO evaluator; a
    perturbed copy scores the same under COCOeval and torchmetrics."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    from torchmetrics.detection import MeanAveragePrecision

    dm = digit_dm(digits)
    dm.setup("validate")
    gt = COCO(str(digits / "annotations" / "instances_val.json"))
    rng = np.random.default_rng(0)
    for perturb in (False, True):
        results = []
        metric = MeanAveragePrecision(iou_type=("bbox", "segm"), backend="pycocotools")
        for img, t, _ in dm.datasets["val"]:
            boxes = t["boxes"].clone()
            masks = t["masks"].bool().clone()
            scores = torch.ones(len(boxes))
            if perturb:
                boxes += torch.from_numpy(rng.normal(0, 3, boxes.shape)).float()
                boxes[:, 2:] = torch.maximum(boxes[:, 2:], boxes[:, :2] + 1)
                masks[:, :, ::3] = False
                scores = torch.from_numpy(rng.uniform(0.1, 1, len(boxes))).float()
            pred = dict(boxes=boxes, scores=scores, labels=t["labels"], masks=masks[:, None].float())
            results += detections_to_coco(pred, t["image_id"], dm.category_ids)
            metric.update([dict(boxes=boxes, scores=scores, labels=t["labels"], masks=masks)],
                          [dict(boxes=t["boxes"], labels=t["labels"], masks=t["masks"].bool(), iscrowd=t["iscrowd"])])
        path = write_coco_results(results, tmp_path / f"res_{perturb}.json")
        tm = metric.compute()
        for iou_type in ("bbox", "segm"):
            ev = COCOeval(gt, gt.loadRes(str(path)), iou_type)
            ev.evaluate(), ev.accumulate(), ev.summarize()
            if not perturb:
                assert ev.stats[0] == pytest.approx(1.0)
            else:
                assert 0.05 < ev.stats[0] < 0.95
            assert float(tm[f"{iou_type}_map"]) == pytest.approx(ev.stats[0], abs=2e-3)
            assert float(tm[f"{iou_type}_map_50"]) == pytest.approx(ev.stats[1], abs=2e-3)


@pytest.mark.slow  # in-process, but among the heaviest: out of the fast loop
def test_mask_rcnn_end_to_end(digits, tmp_path):
    """Tiny Mask R-CNN with a Hydra backbone: trains, evaluates (box and mask mAP, per class),
    writes a COCO results json that the reference evaluator scores the same."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    L.seed_everything(0)
    task = tiny_task("mask_rcnn", num_overlays=1, score_thresh=0.0)
    dm = digit_dm(digits)
    trainer = L.Trainer(max_steps=6, accelerator="cpu", logger=L.pytorch.loggers.CSVLogger(tmp_path),
                        enable_checkpointing=False, enable_progress_bar=False, num_sanity_val_steps=0,
                        val_check_interval=6, check_val_every_n_epoch=None)
    trainer.fit(task, datamodule=dm)
    metrics = trainer.validate(task, datamodule=dm, verbose=False)[0]
    for key in ("val_mAP", "val_mAP_50", "val_mask_mAP", "val_mask_mAP_50"):
        assert key in metrics and 0.0 <= metrics[key] <= 1.0
    table = task.per_class_table()
    assert "| digit_0 |" in table and "mask AP" in table
    path = task.last_predictions_path
    assert path is not None and path.is_file()
    results = json.loads(path.read_text())
    assert results and {"image_id", "category_id", "bbox", "score", "segmentation"} <= set(results[0])
    gt = COCO(str(digits / "annotations" / "instances_val.json"))
    for iou_type, key in (("bbox", "val_mAP"), ("segm", "val_mask_mAP")):
        ev = COCOeval(gt, gt.loadRes(results), iou_type)
        ev.evaluate(), ev.accumulate(), ev.summarize()
        assert metrics[key] == pytest.approx(max(ev.stats[0], 0.0), abs=2e-3)
    assert list((Path(trainer.log_dir) / "overlays").glob("*.png"))


def test_wrong_class_count_fails_before_training(digits, tmp_path):
    task = DetectionTask(tiny_vit(), num_classes=3, detector="faster_rcnn", min_size=64, max_size=64)
    trainer = L.Trainer(max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        default_root_dir=tmp_path)
    with pytest.raises(ValueError, match=r"model.num_classes=3 but the data \(DetectionDataModule at .*\) has 10 categories"):
        trainer.fit(task, datamodule=digit_dm(digits))
    task = tiny_task("mask_rcnn")
    with pytest.raises(ValueError, match="needs instance masks"):
        L.Trainer(max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                  default_root_dir=tmp_path).fit(task, datamodule=DetectionDataModule(
                      str(digits), train_json="annotations/instances_train.json",
                      val_json="annotations/instances_val.json", train_images="train", val_images="val",
                      num_workers=0))


def test_bf16_mixed_training_step(digits, tmp_path):
    """``--trainer.precision=bf16-mixed`` (autocast) runs the whole detector, Hydra op included."""
    L.seed_everything(0)
    task = tiny_task("mask_rcnn", write_predictions=False, num_overlays=0)
    trainer = L.Trainer(max_steps=2, accelerator="cpu", precision="bf16-mixed", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, limit_val_batches=1,
                        num_sanity_val_steps=0, default_root_dir=tmp_path)
    trainer.fit(task, datamodule=digit_dm(digits))
    assert trainer.global_step == 2
    assert torch.isfinite(trainer.callback_metrics["train_loss"])


def test_the_padding_aware_rpn_keeps_torchvisions_settings_and_state():
    from torchvision.models.detection import FasterRCNN

    from hydra_dense.heads.detection import PaddingAwareRPN

    task = tiny_task("faster_rcnn")
    rpn = task.detector.rpn
    reference = FasterRCNN(task.detector.backbone, 11, rpn_batch_size_per_image=256).rpn  # torchvision's own
    assert type(rpn) is PaddingAwareRPN
    for get in (lambda r: (r.proposal_matcher.high_threshold, r.proposal_matcher.low_threshold),
                lambda r: (r.fg_bg_sampler.batch_size_per_image, r.fg_bg_sampler.positive_fraction),
                lambda r: (r._pre_nms_top_n, r._post_nms_top_n, r.nms_thresh, r.score_thresh, r.min_size)):
        assert get(rpn) == get(reference)
    assert set(rpn.state_dict()) == set(reference.state_dict())
