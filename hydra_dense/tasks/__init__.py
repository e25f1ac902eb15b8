"""LightningModules for the dense tasks."""
from .segmentation import SegmentationTask
from .video import VideoClassificationTask

__all__ = ["SegmentationTask", "VideoClassificationTask"]
