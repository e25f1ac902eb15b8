# mmsegmentation: UPerNet + ViT-B/16 with Hydra attention in every block on ADE20K, 512x512 —
# mmseg's configs/vit/vit_vit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py with the backbone swapped
# for hydra_dense's (`plan` selects MSA / Hydra / hybrid per block). Trained by hydra_dense:
#   python tools/train.py fit --config configs/mm/seg_ade20k_vit_b16_hydra.yaml \
#       --config configs/cluster/gpu_ddp.yaml --trainer.devices=8 \
#       --data.init_args.data_options='{"train_dataloader.dataset.data_root": "/data/ade/ADEChallengeData2016",
#                                       "val_dataloader.dataset.data_root": "/data/ade/ADEChallengeData2016"}'
_base_ = ["mmseg::_base_/models/upernet_vit-b16_ln_mln.py", "mmseg::_base_/datasets/ade20k.py"]
custom_imports = dict(imports=["hydra_dense.mm"], allow_failed_imports=False)
default_scope = "mmseg"
crop_size = (512, 512)
model = dict(
    pretrained=None,
    data_preprocessor=dict(size=crop_size),
    backbone=dict(_delete_=True, type="HydraViT", size="base", patch_size=16, img_size=512,
                  plan={"default": "hydra"}, out_indices=[2, 5, 8, 11], drop_path_rate=0.1,
                  # pretrained="/path/to/vit_base_patch16_224.augreg_in21k.bin",  # timm / MAE / DINOv2 weights
                  ),
    decode_head=dict(num_classes=150),
    auxiliary_head=dict(num_classes=150),
    test_cfg=dict(mode="slide", crop_size=crop_size, stride=(341, 341)))
train_dataloader = dict(batch_size=2, num_workers=4)
val_dataloader = dict(batch_size=1, num_workers=4)
