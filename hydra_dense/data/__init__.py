"""LightningDataModules and datasets for standard on-disk formats, and the embedded demo data."""
from .segmentation import SegmentationDataModule, SegmentationDataset

__all__ = ["SegmentationDataModule", "SegmentationDataset"]
