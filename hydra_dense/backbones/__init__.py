"""Image and video ViT backbones with per-block attention plans, feature pyramids, checkpoints."""
from .checkpoint import CheckpointError, LoadReport, load_pretrained, read_state_dict
from .pyramid import MultiLevelRescale, SimpleFeaturePyramid, ViTWithPyramid
from .video_vit import VideoViT
from .vit import VIT_SIZES, ViT

__all__ = ["ViT", "VideoViT", "VIT_SIZES", "SimpleFeaturePyramid", "ViTWithPyramid", "MultiLevelRescale", "load_pretrained",
           "read_state_dict", "LoadReport", "CheckpointError"]
