# mmdetection config: Mask R-CNN on a small ViTDet-style ViT (windowed MSA, Hydra global blocks)
# with the ViTDet simple pyramid, on the embedded digit instances (COCO json;
# `python -m hydra_dense.data.demo_instances` prepares them). Trained by hydra_dense (Lightning):
#   python tools/train.py fit --config configs/mm/det_digits_tiny.yaml
_base_ = ["mmdet::_base_/models/mask-rcnn_r50_fpn.py"]
custom_imports = dict(imports=["hydra_dense.mm"], allow_failed_imports=False)
default_scope = "mmdet"
data_root = "~/.cache/hydra_dense/data/digit_instances/"  # "~" expanded by hydra_dense.mm
classes = tuple(f"digit_{i}" for i in range(10))
size = 224
dim = 96
model = dict(
    data_preprocessor=dict(pad_size_divisor=32),
    backbone=dict(_delete_=True, type="HydraViT", size=None, embed_dim=dim, depth=4, num_heads=3, patch_size=16,
                  img_size=size, class_token=False, out_indices=[3], out_norm=False, drop_path_rate=0.1,
                  plan={"window_size": 7, "global_blocks": [1, 3], "global_attention": "hydra"}),
    neck=dict(_delete_=True, type="ViTDetSimpleFPN", in_channels=dim, out_channels=64, in_stride=16),
    rpn_head=dict(in_channels=64, feat_channels=64),
    roi_head=dict(bbox_roi_extractor=dict(out_channels=64),
                  bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=len(classes)),
                  mask_roi_extractor=dict(out_channels=64),
                  mask_head=dict(in_channels=64, conv_out_channels=64, num_classes=len(classes))))
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations", with_bbox=True, with_mask=True),
    dict(type="Resize", scale=(size, size), keep_ratio=True),
    dict(type="PackDetInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="Resize", scale=(size, size), keep_ratio=True),
    dict(type="LoadAnnotations", with_bbox=True, with_mask=True),
    dict(type="PackDetInputs", meta_keys=("img_id", "img_path", "ori_shape", "img_shape", "scale_factor")),
]
train_dataloader = dict(batch_size=4, num_workers=2,
                        dataset=dict(type="CocoDataset", data_root=data_root, metainfo=dict(classes=classes),
                                     ann_file="annotations/instances_train.json", data_prefix=dict(img="train/"),
                                     filter_cfg=dict(filter_empty_gt=True, min_size=4), pipeline=train_pipeline))
val_dataloader = dict(batch_size=4, num_workers=2,
                      dataset=dict(type="CocoDataset", data_root=data_root, metainfo=dict(classes=classes),
                                   ann_file="annotations/instances_val.json", data_prefix=dict(img="val/"),
                                   test_mode=True, pipeline=test_pipeline))
val_evaluator = dict(type="CocoMetric", ann_file=data_root + "annotations/instances_val.json", metric=["bbox", "segm"])
