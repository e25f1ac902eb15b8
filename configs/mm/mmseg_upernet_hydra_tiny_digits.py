# mmsegmentation config: UPerNet on a small all-Hydra ViT, on the embedded digit scenes (ADE20K
# layout, 11 classes; `python -m hydra_dense.data.demo_segmentation` prepares them). Trained by
# hydra_dense (Lightning) through configs/mm/seg_digits_tiny.yaml:
#   python tools/train.py fit --config configs/mm/seg_digits_tiny.yaml
custom_imports = dict(imports=["hydra_dense.mm"], allow_failed_imports=False)
default_scope = "mmseg"
data_root = "~/.cache/hydra_dense/data/digit_scenes"  # "~" expanded by hydra_dense.mm
classes = ["background"] + [f"digit_{i}" for i in range(10)]
crop = (112, 112)
model = dict(
    type="EncoderDecoder",
    data_preprocessor=dict(type="SegDataPreProcessor", mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_val=0, seg_pad_val=255, size=crop),
    backbone=dict(type="HydraViT", size=None, embed_dim=96, depth=4, num_heads=3, patch_size=8, img_size=112,
                  plan={"default": "hydra"}, out_indices=[0, 1, 2, 3], drop_path_rate=0.1),
    neck=dict(type="MultiLevelNeck", in_channels=[96] * 4, out_channels=96, scales=[4, 2, 1, 0.5]),
    decode_head=dict(type="UPerHead", in_channels=[96] * 4, in_index=[0, 1, 2, 3], pool_scales=(1, 2, 3, 6),
                     channels=64, dropout_ratio=0.1, num_classes=len(classes), norm_cfg=dict(type="BN", requires_grad=True),
                     align_corners=False, loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0)),
    train_cfg=dict(),
    test_cfg=dict(mode="whole"))
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations", reduce_zero_label=False),
    dict(type="RandomResize", scale=crop, ratio_range=(0.8, 1.2), keep_ratio=True),
    dict(type="RandomCrop", crop_size=crop, cat_max_ratio=0.95),
    dict(type="RandomFlip", prob=0.0),  # digits are not mirror-symmetric
    dict(type="PhotoMetricDistortion"),
    dict(type="PackSegInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="Resize", scale=crop, keep_ratio=True),
    dict(type="LoadAnnotations", reduce_zero_label=False),
    dict(type="PackSegInputs"),
]
dataset = dict(type="BaseSegDataset", data_root=data_root, metainfo=dict(classes=classes), img_suffix=".jpg",
               seg_map_suffix=".png", reduce_zero_label=False)
train_dataloader = dict(batch_size=8, num_workers=2,
                        dataset=dict(dataset, data_prefix=dict(img_path="images/training", seg_map_path="annotations/training"),
                                     pipeline=train_pipeline))
val_dataloader = dict(batch_size=8, num_workers=2,
                      dataset=dict(dataset, data_prefix=dict(img_path="images/validation",
                                                             seg_map_path="annotations/validation"),
                                   pipeline=test_pipeline, test_mode=True))
val_evaluator = dict(type="IoUMetric", iou_metrics=["mIoU"])
