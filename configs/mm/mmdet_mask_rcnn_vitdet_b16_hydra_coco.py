# mmdetection: Mask R-CNN, ViTDet-style ViT-B/16 (14x14 windowed MSA, Hydra attention in the 4 global
# blocks 2, 5, 8, 11) + the ViTDet simple pyramid, on COCO 2017 with large-scale jitter at 1024 —
# after mmdet's projects/ViTDet/configs/vitdet_mask-rcnn_vit-b-mae_lsj-100e.py. Trained by hydra_dense:
#   python tools/train.py fit --config configs/mm/det_coco_vitdet_b16_hydra.yaml \
#       --config configs/cluster/gpu_ddp.yaml --trainer.devices=8
_base_ = ["mmdet::_base_/models/mask-rcnn_r50_fpn.py", "mmdet::_base_/datasets/coco_instance.py"]
custom_imports = dict(imports=["hydra_dense.mm"], allow_failed_imports=False)
default_scope = "mmdet"
image_size = (1024, 1024)
norm_cfg = dict(type="GN", num_groups=32, requires_grad=True)
model = dict(
    data_preprocessor=dict(pad_size_divisor=32, batch_augments=[dict(type="BatchFixedSizePad", size=image_size,
                                                                     pad_mask=True)]),
    backbone=dict(_delete_=True, type="HydraViT", size="base", patch_size=16, img_size=1024, class_token=False,
                  out_indices=[11], out_norm=False, drop_path_rate=0.1,
                  plan={"window_size": 14, "global_blocks": [2, 5, 8, 11], "global_attention": "hydra",
                        "rel_pos": True},
                  # pretrained="/path/to/mae_pretrain_vit_base.pth",
                  ),
    neck=dict(_delete_=True, type="ViTDetSimpleFPN", in_channels=768, out_channels=256, in_stride=16),
    rpn_head=dict(num_convs=2),
    roi_head=dict(bbox_head=dict(type="Shared4Conv1FCBBoxHead", conv_out_channels=256, norm_cfg=norm_cfg),
                  mask_head=dict(norm_cfg=norm_cfg)))
train_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="LoadAnnotations", with_bbox=True, with_mask=True),
    dict(type="RandomFlip", prob=0.5),
    dict(type="RandomResize", scale=image_size, ratio_range=(0.1, 2.0), keep_ratio=True),
    dict(type="RandomCrop", crop_type="absolute_range", crop_size=image_size, recompute_bbox=True,
         allow_negative_crop=True),
    dict(type="FilterAnnotations", min_gt_bbox_wh=(1e-2, 1e-2)),
    dict(type="Pad", size=image_size, pad_val=dict(img=(114, 114, 114))),
    dict(type="PackDetInputs"),
]
test_pipeline = [
    dict(type="LoadImageFromFile"),
    dict(type="Resize", scale=image_size, keep_ratio=True),
    dict(type="Pad", size=image_size, pad_val=dict(img=(114, 114, 114))),
    dict(type="LoadAnnotations", with_bbox=True, with_mask=True),
    dict(type="PackDetInputs", meta_keys=("img_id", "img_path", "ori_shape", "img_shape", "scale_factor")),
]
train_dataloader = dict(batch_size=2, num_workers=4, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, num_workers=4, dataset=dict(pipeline=test_pipeline))
