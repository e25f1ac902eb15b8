"""LightningModules for the dense tasks."""
from .detection import DetectionTask
from .segmentation import SegmentationTask
from .video import VideoClassificationTask

__all__ = ["DetectionTask", "SegmentationTask", "VideoClassificationTask"]
