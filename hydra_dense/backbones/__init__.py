"""Image and video ViT backbones with per-block attention plans and feature pyramids (their weights
are read by :mod:`hydra_dense.checkpoints`)."""
from .pyramid import MultiLevelRescale, SimpleFeaturePyramid, ViTWithPyramid
from .video_vit import VideoViT
from .vit import VIT_SIZES, ViT

__all__ = ["ViT", "VideoViT", "VIT_SIZES", "SimpleFeaturePyramid", "ViTWithPyramid", "MultiLevelRescale"]
