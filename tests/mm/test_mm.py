"""OpenMMLab integration: the clear error without the stack, and - when
tools/install_mm.sh has installed it - our ViTs built through mmseg's / mmdet's registries."""
import importlib
import sys

import pytest
import torch

from hydra_dense.backbones import ViT

TINY = dict(size=None, embed_dim=32, depth=4, num_heads=2, patch_size=16, img_size=64, plan={"default": "msa",
            "hydra_last": 2}, out_indices=[0, 1, 2, 3], class_token=False)


def test_missing_mmcv_says_how_to_install(monkeypatch):
    """``import hydra_dense.mm`` (what an mm config's custom_imports does) without mmcv: one clear
    message saying how to install, not an ImportError from deep inside mmseg."""
    monkeypatch.setitem(sys.modules, "mmcv", None)  # import mmcv -> ImportError, installed or not
    monkeypatch.delitem(sys.modules, "hydra_dense.mm", raising=False)
    with pytest.raises(ImportError, match="needs mmcv 2.1.0 with compiled ops: run tools/install_mm.sh"):
        importlib.import_module("hydra_dense.mm")


def test_mmcv_without_loadable_ops_says_it_was_built_for_another_torch(monkeypatch):
    """mmcv importable but ``mmcv.ops`` not (a wheel built for another torch fails to load its
    extension): the message says so and how to fix it."""
    import types

    fake = types.ModuleType("mmcv")
    fake.__version__ = "2.1.0"
    monkeypatch.setitem(sys.modules, "mmcv", fake)
    monkeypatch.setitem(sys.modules, "mmcv.ops", None)  # import mmcv.ops -> ImportError
    monkeypatch.delitem(sys.modules, "hydra_dense.mm", raising=False)
    with pytest.raises(ImportError, match="compiled ops do not load with this torch.*install_mm.sh"):
        importlib.import_module("hydra_dense.mm")


@pytest.fixture(scope="module")
def mm():
    pytest.importorskip("mmcv.ops", reason="needs the OpenMMLab stack: tools/install_mm.sh")
    return importlib.import_module("hydra_dense.mm")


def test_registry_backbone_gives_the_same_features_as_hydra_dense(mm):
    from mmseg.registry import MODELS

    torch.manual_seed(0)
    backbone = MODELS.build(dict(type="HydraViT", **TINY)).eval()
    ours = ViT(None, **{k: v for k, v in TINY.items() if k != "size"}).eval()
    ours.load_state_dict(backbone.vit.state_dict())
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        for a, b in zip(backbone(x), ours(x)):
            assert a.shape == (2, 32, 4, 6) and torch.equal(a, b)
    with pytest.raises(ValueError, match=r"option\(s\) \['with_cls_token'\] not supported"):
        MODELS.build(dict(type="HydraViT", with_cls_token=True, **TINY))


def test_registry_backbone_with_local_mixing(mm):
    """A plan with local mixing builds through the registry: the branch is in the Hydra blocks only
    and matches hydra_dense's ViT with the same weights."""
    from mmseg.registry import MODELS

    from tests.helpers.mixing import randomise

    plan = {"default": "msa", "hydra_last": 2, "local": "dwc3"}
    backbone = randomise(MODELS.build(dict(type="HydraViT", **dict(TINY, plan=plan)))).eval()
    assert backbone.vit.blocks[3].attn.local is not None and not hasattr(backbone.vit.blocks[0].attn, "local")
    ours = ViT(None, **{k: v for k, v in dict(TINY, plan=plan).items() if k != "size"}).eval()
    ours.load_state_dict(backbone.vit.state_dict())
    x = torch.randn(1, 3, 64, 80)
    with torch.no_grad():
        for a, b in zip(backbone(x), ours(x)):
            assert torch.equal(a, b)


def test_mmseg_upernet_trains_predicts_and_scores(mm):
    from mmengine.structures import PixelData
    from mmseg.evaluation import IoUMetric
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample
    from mmengine.config import ConfigDict
    from mmengine.registry import init_default_scope

    init_default_scope("mmseg")
    cfg = dict(type="EncoderDecoder",
               data_preprocessor=dict(type="SegDataPreProcessor", mean=[123.675, 116.28, 103.53],
                                      std=[58.395, 57.12, 57.375], bgr_to_rgb=True, pad_val=0, seg_pad_val=255,
                                      size=(64, 64)),
               backbone=dict(type="HydraViT", **TINY),
               neck=dict(type="MultiLevelNeck", in_channels=[32] * 4, out_channels=32, scales=[4, 2, 1, 0.5]),
               decode_head=dict(type="UPerHead", in_channels=[32] * 4, in_index=[0, 1, 2, 3], pool_scales=(1, 2, 3, 6),
                                channels=16, num_classes=3, norm_cfg=dict(type="BN", requires_grad=True),
                                loss_decode=dict(type="CrossEntropyLoss", loss_weight=1.0)),
               train_cfg=dict(), test_cfg=dict(mode="whole"))
    model = MODELS.build(ConfigDict(cfg))  # test_cfg is read by attribute
    samples = []
    for _ in range(2):
        s = SegDataSample()
        s.gt_sem_seg = PixelData(data=torch.randint(0, 3, (1, 64, 64)))
        s.set_metainfo(dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64)))
        samples.append(s)
    batch = dict(inputs=[torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8) for _ in range(2)],
                 data_samples=samples)
    data = model.data_preprocessor(batch, training=True)
    losses = model(**data, mode="loss")
    loss, _ = model.parse_losses(losses)
    loss.backward()
    assert torch.isfinite(loss) and model.backbone.vit.blocks[0].attn.qkv.weight.grad is not None
    model.eval()
    with torch.no_grad():
        out = model.test_step(batch)
    assert out[0].pred_sem_seg.data.shape == (1, 64, 64)
    metric = IoUMetric()
    metric.dataset_meta = dict(classes=["a", "b", "c"])
    metric.process(batch, [o.to_dict() for o in out])
    assert 0.0 <= metric.compute_metrics(metric.results)["mIoU"] <= 100.0


def test_mmdet_mask_rcnn_with_hydra_global_blocks_trains_and_predicts(mm):
    """mmdet's own Mask R-CNN config with the backbone swapped for a ViTDet-style HydraViT
    (windowed MSA, Hydra global blocks) and the neck for the ViTDet simple pyramid."""
    import mmdet
    from mmdet.registry import MODELS
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.structures import InstanceData
    from pathlib import Path

    init_default_scope("mmdet")
    base = Path(mmdet.__file__).parent / ".mim" / "configs" / "_base_" / "models" / "mask-rcnn_r50_fpn.py"
    cfg = Config.fromfile(str(base)).model
    cfg.backbone = dict(type="HydraViT", **dict(TINY, out_indices=[3], plan={"window_size": 2, "global_blocks": [1, 3],
                                                                          "global_attention": "hydra"}))
    cfg.neck = dict(type="ViTDetSimpleFPN", in_channels=32, out_channels=32, in_stride=16)
    cfg.rpn_head.in_channels = 32
    cfg.rpn_head.feat_channels = 32
    cfg.roi_head.bbox_roi_extractor.out_channels = 32
    cfg.roi_head.bbox_head.in_channels = 32
    cfg.roi_head.bbox_head.num_classes = 3
    cfg.roi_head.mask_roi_extractor.out_channels = 32
    cfg.roi_head.mask_head.in_channels = 32
    cfg.roi_head.mask_head.num_classes = 3
    model = MODELS.build(cfg)
    s = DetDataSample()
    s.set_metainfo(dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64), scale_factor=(1.0, 1.0)))
    masks = torch.zeros(1, 64, 64, dtype=torch.uint8)
    masks[0, 10:40, 12:44] = 1
    s.gt_instances = InstanceData(bboxes=torch.tensor([[12.0, 10.0, 44.0, 40.0]]), labels=torch.tensor([1]),
                                  masks=BitmapMasks(masks.numpy(), 64, 64))
    batch = dict(inputs=[torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8)], data_samples=[s])
    data = model.data_preprocessor(batch, training=True)
    loss, _ = model.parse_losses(model(**data, mode="loss"))
    loss.backward()
    assert torch.isfinite(loss) and model.backbone.vit.blocks[1].attn.qkv.weight.grad is not None
    model.eval()
    with torch.no_grad():
        out = model.test_step(batch)
    assert {"bboxes", "scores", "labels", "masks"} <= set(out[0].pred_instances.keys())


@pytest.mark.parametrize("kind", ["seg", "det"])
def test_mm_config_trains_under_hydra_dense_cli(mm, kind, tmp_path):
    """The shipped tiny mm configs (mmseg UPerNet / mmdet Mask R-CNN with our ViTs) trained for three
    steps (validated after the second) by tools/train.py, data redirected to tiny sets made here; the evaluator's metric logged."""
    import json

    from tests.helpers.images import make_ade
    from tests.helpers.tiny_runs import ROOT, ok, train

    if kind == "seg":
        root = make_ade(tmp_path / "ade", n_train=8, n_val=3, size=112)
        data_opts = {f"{s}_dataloader.dataset.data_root": str(root) for s in ("train", "val")}
        model_opts, metric = {}, "val_mIoU"
    else:
        from hydra_dense.data.demo_instances import prepare

        root = prepare(tmp_path / "inst", n_train=8, n_val=3, size=112)
        data_opts = {f"{s}_dataloader.dataset.data_root": str(root) + "/" for s in ("train", "val")}
        model_opts = {"val_evaluator.ann_file": str(root / "annotations" / "instances_val.json")}
        metric = "val_bbox_mAP"
    cfg = ROOT / "configs" / "mm" / f"{kind}_digits_tiny.yaml"
    proc = ok(train("fit", cfg, tmp_path / "run", "--trainer.max_steps=3", "--trainer.val_check_interval=2",
                    "--data.init_args.num_workers=0", "--data.init_args.batch_size=2",
                    f"--data.init_args.data_options={json.dumps(data_opts)}",
                    f"--model.init_args.cfg_options={json.dumps(model_opts)}",
                    "--trainer.logger=lightning.pytorch.loggers.CSVLogger",
                    f"--trainer.logger.init_args.save_dir={tmp_path / 'run'}"))
    rows = (next((tmp_path / "run").rglob("metrics.csv"))).read_text()
    assert metric in rows.splitlines()[0], (rows, proc.stderr[-2000:])
    assert list((tmp_path / "run").rglob("last.ckpt"))


@pytest.mark.parametrize("config", ["mmseg_upernet_vit_b16_hydra_ade20k.py", "mmdet_mask_rcnn_vitdet_b16_hydra_coco.py"])
def test_full_size_mm_configs_build(mm, config):
    """The ADE20K / COCO recipes build through the registries: ViT-B with the planned attention."""
    from hydra_dense.mm.task import MMTask
    from tests.helpers.tiny_runs import ROOT

    task = MMTask(str(ROOT / "configs" / "mm" / config))
    vit = task.model.backbone.vit
    assert len(vit.blocks) == 12 and vit.embed_dim == 768
    kinds = vit.plan.describe(12)
    assert "hydra" in kinds, kinds


def test_openmmlab_checkpoint_with_numpy_meta_loads(mm, tmp_path):
    """mmengine's loader under torch >= 2.6 (weights_only by default) with an OpenMMLab-style
    checkpoint whose meta holds numpy values: loads (allow-listed numpy types, no arbitrary code)."""
    import numpy as np
    from mmengine.runner.checkpoint import _load_checkpoint

    path = tmp_path / "mm.pth"
    torch.save({"meta": {"best_score": np.float64(41.5), "classes": np.array([1, 2]), "mmengine_version": "0.10.7"},
                "state_dict": {"w": torch.ones(2)}}, path)
    ckpt = _load_checkpoint(str(path), map_location="cpu")
    assert float(ckpt["meta"]["best_score"]) == 41.5 and torch.equal(ckpt["state_dict"]["w"], torch.ones(2))


def test_comparison_job_takes_an_mm_config(mm, tmp_path):
    """tools/compare.py on the tiny mmseg config: the plans swapped inside the mm model, one table
    with val_mIoU (as a fraction, like hydra_dense's own tasks) and the speed columns."""
    import csv
    import json

    from hydra_dense.comparison.command import main as compare_main
    from tests.helpers.images import make_ade
    from tests.helpers.tiny_runs import ROOT

    root = make_ade(tmp_path / "ade", n_train=8, n_val=2, size=112)
    opts = json.dumps({f"{s}_dataloader.dataset.data_root": str(root) for s in ("train", "val")})
    out = tmp_path / "out"
    assert compare_main(["--config", str(ROOT / "configs" / "mm" / "seg_digits_tiny.yaml"), "--plans", "msa,hydra",
                         "--pretrained", "none", "--out", str(out), "--speed-repeats", "2", "--speed-size", "224",
                         "--max-steps", "3", "--trainer.val_check_interval=3", f"--data.init_args.data_options={opts}",
                         "--data.init_args.num_workers=0", "--data.init_args.batch_size=2"]) == 0
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert [r["plan"] for r in rows] == ["msa", "hydra"] and rows[1]["attention"] == "hydra x4"
    for r in rows:
        assert r["metric"] == "val_mIoU" and 0 <= float(r["score"]) <= 100 and float(r["infer_img_s_big"]) > 0
    assert float(rows[1]["flop_ideal_big"]) > 1.0
