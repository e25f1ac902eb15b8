"""LightningModules for the dense tasks."""
import warnings

from .detection import DetectionTask
from .segmentation import SegmentationTask
from .video import VideoClassificationTask

# The epoch-level metrics are computed from torchmetrics states that are already all-reduced over
# the ranks (confusion matrix, mAP lists, accuracy counts); Lightning's advice to add sync_dist
# would average identical values again, so its warning is noise here.
warnings.filterwarnings("ignore", message=r"It is recommended to use `self.log\('(val|test)_")

__all__ = ["DetectionTask", "SegmentationTask", "VideoClassificationTask"]
