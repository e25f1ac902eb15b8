"""What keeps long multi-process training runs safe (atomic checkpoints, exact resume, NaN guard) and
visible (training curves)."""
from .checkpoint_io import AtomicCheckpointIO
from .curves import TrainingCurves
from .data_report import DataReport
from .last_checkpoint import PeriodicLastCheckpoint
from .model_identity import ModelIdentityCheckpoint
from .nonfinite import NonFiniteLossGuard
from .requeue import StepBoundaryRequeue
from .resume import (CheckpointMismatchError, check_checkpoint_matches, find_resume_checkpoint,
                     remove_stale_temporaries)
from .rng_state import RNGStateCheckpoint

__all__ = ["AtomicCheckpointIO", "DataReport", "PeriodicLastCheckpoint", "NonFiniteLossGuard", "RNGStateCheckpoint",
           "ModelIdentityCheckpoint",
           "StepBoundaryRequeue", "CheckpointMismatchError", "check_checkpoint_matches", "find_resume_checkpoint",
           "remove_stale_temporaries", "TrainingCurves"]
