"""What keeps long multi-process training runs safe and visible: atomic files, plain refusals, the
NaN guard, requeue on a signal, the data report and training curves. Checkpoints (reading, writing,
resume) are :mod:`hydra_dense.checkpoints`."""
from .curves import TrainingCurves
from .data_report import DataReport
from .nonfinite import NonFiniteLossGuard
from .requeue import StepBoundaryRequeue

__all__ = ["DataReport", "NonFiniteLossGuard", "StepBoundaryRequeue", "TrainingCurves"]
