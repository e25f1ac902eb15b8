"""One conversion as a job asks for it, typed, and the file a conversion worker reads it from."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..runtime.request_file import request_fields

__all__ = ["ConversionRequest"]


@dataclass(frozen=True)
class ConversionRequest:
    """A conversion config run into ``folder``: the student backbone (``backbone_yaml``, its plan
    written out), the MSA weights it starts from (``source``), ``steps`` and the LightningCLI
    ``overrides`` the job adds (a task's training images, ``--convert-args``). An interrupted
    conversion in ``folder`` resumes from its ``last.ckpt``."""

    config: str
    backbone_yaml: str
    source: str
    folder: str
    steps: int
    overrides: list[str] = field(default_factory=list)
    progress_every: int = 50  # steps between the worker's progress lines

    @property
    def output(self) -> Path:
        """The converted checkpoint the worker writes."""
        return Path(self.folder) / "converted.pth"

    def cli_arguments(self) -> list[str]:
        """The conversion's command line (``hydra-dense-convert`` takes the same): what the worker runs."""
        return ["--config", self.config, f"--model.init_args.backbone={self.backbone_yaml}",
                f"--model.init_args.source={self.source}", f"--model.init_args.output={self.output}",
                f"--trainer.max_steps={self.steps}", f"--trainer.default_root_dir={Path(self.folder) / 'run'}",
                "--ckpt_path=last", *self.overrides, "--trainer.enable_progress_bar=false",
                "--trainer.enable_model_summary=false"]

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def read(cls, path: Path) -> "ConversionRequest":
        return cls(**request_fields(cls, path, "conversion request"))
