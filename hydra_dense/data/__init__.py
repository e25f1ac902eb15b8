"""LightningDataModules and datasets for standard on-disk formats, and the embedded demo data."""
from .segmentation import SegmentationDataModule, SegmentationDataset
from .video import VideoClipDataset, VideoDataModule

__all__ = ["SegmentationDataModule", "SegmentationDataset", "VideoDataModule", "VideoClipDataset"]
