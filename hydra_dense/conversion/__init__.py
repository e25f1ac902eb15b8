"""MSA -> Hydra conversion before fine-tuning: the converted blocks (and their local mixing) learn
to reproduce the frozen softmax blocks on unlabeled images (:class:`ConversionTask`, its objective
:mod:`~.objective`, its images :mod:`~.images`, the file it writes :mod:`hydra_dense.checkpoints.converted_file`). Run it
with ``python -m hydra_dense.conversion`` (:mod:`~.command`); a job asks for one with a
:class:`~.request.ConversionRequest` (:mod:`~.worker`), cached per request by :mod:`~.cache`;
:mod:`~.measure` reads a converted file's error back per block and crop size."""
from .images import ConversionImages, task_training_images
from .task import ConversionTask, converted_blocks, resolve_source

__all__ = ["ConversionTask", "ConversionImages", "converted_blocks", "resolve_source", "task_training_images"]
