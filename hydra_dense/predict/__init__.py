"""Prediction on a user's own files: inputs, sliding-window segmentation, and what gets written."""
from ..data.files import ImageFiles, PredictInputs, collate_image_files, find_predict_files
from .outputs import PredictionOutputs, save_label_png, save_overlay, top_k_row, write_csv
from .sliding import sliding_window_labels, window_starts

__all__ = ["ImageFiles", "PredictInputs", "collate_image_files", "find_predict_files", "PredictionOutputs",
           "save_label_png", "save_overlay", "top_k_row", "write_csv", "sliding_window_labels", "window_starts"]
