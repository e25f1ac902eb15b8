"""Deployment: a trained task exported to ONNX / ``torch.export`` and checked in onnxruntime."""
from .onnx import ExportSpec, example_inputs, export_onnx, export_wrapper, onnx_parity

__all__ = ["ExportSpec", "example_inputs", "export_onnx", "export_wrapper", "onnx_parity"]
