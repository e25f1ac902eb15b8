"""The settings of one comparison, typed: what the command line gives the job, what
``--from-run`` and the GPU track build for it, and what a comparison worker process reads."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from ..runtime.request_file import request_fields
from .reading import TOLERANCE

__all__ = ["ComparisonOptions"]


@dataclass
class ComparisonOptions:
    """Every setting of one comparison (the command line, parsed and checked); ``overrides`` are the
    LightningCLI ``--key=value`` arguments every run gets."""

    config: Path
    plans: str
    backbones: Optional[str] = None
    pretrained: str = "auto"
    max_steps: int = 0
    seeds: list[int] = field(default_factory=lambda: [0])
    rerun: bool = False
    out: Path = Path("runs/compare")
    convert_config: Optional[str] = None
    from_msa_convert_config: Optional[str] = None
    convert_steps: Optional[int] = None
    align_config: Optional[str] = None
    align_steps: Optional[int] = None
    convert_args: list[str] = field(default_factory=list)
    speed_size: str = "1024"
    eval_sizes: list[int] = field(default_factory=list)
    speed_batch: int = 8
    speed_repeats: int = 5
    reading_tolerance: float = TOLERANCE
    overrides: list[str] = field(default_factory=list)
    start_note: Optional[str] = None  # what the table's header says the runs started from, when not --pretrained

    def as_json(self) -> dict:
        """Every setting as JSON values (paths as text): what :meth:`read` reads back."""
        return dict(asdict(self), config=str(self.config), out=str(self.out))

    @classmethod
    def read(cls, path: Path) -> "ComparisonOptions":
        """The options a job wrote with :meth:`as_json` (a comparison worker's request file)."""
        data = request_fields(cls, path, "comparison request")
        return cls(**dict(data, config=Path(data["config"]), out=Path(data["out"])))
