"""Every checkpoint the package reads or writes: pretrained weights read into a backbone
(:mod:`~.pretrained`), Lightning checkpoints written whole or not at all (:mod:`~.atomic_io`) and
every few minutes (:mod:`~.periodic_last`), the model identity and RNG state they carry
(:mod:`~.identity`, :mod:`~.rng_state`) and the resume that checks both (:mod:`~.resume`), and the
converted-backbone file a conversion writes (:mod:`~.converted_file`)."""
from .atomic_io import AtomicCheckpointIO
from .identity import ModelIdentityCheckpoint
from .periodic_last import PeriodicLastCheckpoint
from .pretrained import CheckpointError, LoadReport, load_pretrained, read_state_dict
from .resume import CheckpointMismatchError, check_checkpoint_matches, find_resume_checkpoint, remove_stale_temporaries
from .rng_state import RNGStateCheckpoint

__all__ = ["AtomicCheckpointIO", "CheckpointError", "CheckpointMismatchError", "LoadReport", "ModelIdentityCheckpoint",
           "PeriodicLastCheckpoint", "RNGStateCheckpoint", "check_checkpoint_matches", "find_resume_checkpoint",
           "load_pretrained", "read_state_dict", "remove_stale_temporaries"]
