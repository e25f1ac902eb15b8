"""What keeps long multi-process training runs safe: atomic checkpoints, exact resume, NaN guard."""
from .checkpoint_io import AtomicCheckpointIO
from .nonfinite import NonFiniteLossGuard
from .resume import CheckpointMismatchError, check_checkpoint_matches, find_resume_checkpoint
from .rng_state import RNGStateCheckpoint

__all__ = ["AtomicCheckpointIO", "NonFiniteLossGuard", "RNGStateCheckpoint", "CheckpointMismatchError",
           "check_checkpoint_matches", "find_resume_checkpoint"]
