"""hydra_dense: Hydra-attention ViT backbones for segmentation, detection and video."""
__version__ = "0.1.0"
