"""LightningModules for the dense tasks."""
from .segmentation import SegmentationTask

__all__ = ["SegmentationTask"]
