"""LightningDataModules and datasets for standard on-disk formats, and the embedded demo data."""
from .detection import DetectionDataModule, DetectionDataset
from .segmentation import SegmentationDataModule, SegmentationDataset
from .unlabeled import UnlabeledImageDataModule, UnlabeledImageDataset
from .video import VideoClipDataset, VideoDataModule

__all__ = ["DetectionDataModule", "DetectionDataset", "SegmentationDataModule", "SegmentationDataset", "VideoDataModule", "VideoClipDataset",
           "UnlabeledImageDataModule", "UnlabeledImageDataset"]
