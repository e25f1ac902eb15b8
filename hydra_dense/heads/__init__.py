"""Task heads."""
from .segmentation import FCNAuxHead, LinearHead, SetrNaiveHead, UPerHead

__all__ = ["UPerHead", "LinearHead", "SetrNaiveHead", "FCNAuxHead"]
