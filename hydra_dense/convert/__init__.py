"""MSA -> Hydra conversion before fine-tuning: the converted blocks (and their local mixing) learn
to reproduce the frozen softmax blocks on unlabeled images; see :class:`ConversionTask`."""
from .images import ConversionImages, task_training_images
from .task import ConversionTask, converted_blocks, resolve_source

__all__ = ["ConversionTask", "ConversionImages", "converted_blocks", "resolve_source", "task_training_images"]
