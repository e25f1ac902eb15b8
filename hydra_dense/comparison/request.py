"""What one comparison run is asked to do: a recipe with one seed, as an object built in one place,
written as ``request.json`` beside the run and read back by its worker process."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple, Optional

from ..runtime.config_content import config_identities

__all__ = ["RunRequest", "RunStart"]


class RunStart(NamedTuple):
    """Where one run's weights start besides the task config: a backbone checkpoint to load (a
    conversion) and task weights whose head it takes (a trained model's)."""

    backbone: Optional[str]
    head: Optional[str]


@dataclass
class RunRequest:
    """One run: ``recipe`` (its name) with ``seed``, the task ``config`` and its CLI ``overrides``,
    the backbone's plan (``plan_name``) or file (``backbone_yaml``), and where its weights start:
    ``pretrained`` (MSA image weights), ``converted`` (a converted backbone checkpoint) and
    ``head_from`` (task weights whose head it loads); ``distill_teacher``: MSA weights that teach
    while it fine-tunes (``@distilled``). ``max_steps`` 0 keeps the config's.
    ``eval_sizes``: other validation sizes to score it at; ``save_weights``: keep its final weights.
    """

    recipe: str
    seed: int
    config: str
    overrides: list[str] = field(default_factory=list)
    plan_name: Optional[str] = None
    backbone_yaml: Optional[str] = None
    pretrained: Optional[str] = None
    converted: Optional[str] = None
    head_from: Optional[str] = None
    distill_teacher: Optional[str] = None
    max_steps: Optional[int] = 0
    eval_sizes: list[int] = field(default_factory=list)
    save_weights: bool = False
    key: Optional[str] = None

    def as_json(self) -> dict:
        """The ``request.json`` mapping (``head_from`` and ``distill_teacher`` only when set, so a run
        without them keeps the key it has always had)."""
        out = asdict(self)
        for optional in ("head_from", "distill_teacher"):
            if out[optional] is None:
                out.pop(optional)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "RunRequest":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    @classmethod
    def read(cls, path: Path) -> "RunRequest":
        return cls.from_json(json.loads(Path(path).read_text()))

    def identity(self) -> str:
        """The run's key: what it was trained with, the config file's content included, as parsed
        YAML (a comment, the layout or the order of its keys does not make another run). What it is
        evaluated on afterwards (``eval_sizes``) and whether its weights are kept do not make it
        another run either; a finished run of the same key is reused."""
        return self._keys()[0]

    def is_key(self, key: Optional[str]) -> bool:
        """Whether a stored run's ``key`` is this request's: :meth:`identity`, or the key made from the
        config file's raw text, which runs kept on disk may carry (so they stay reusable)."""
        return key is not None and key in self._keys()

    def _keys(self) -> tuple[str, ...]:
        ident = {k: v for k, v in self.as_json().items() if k != "eval_sizes"}
        return tuple(hashlib.sha1(json.dumps(dict(ident, config=config, out=None, key=None, save_weights=None),
                                             sort_keys=True).encode()).hexdigest()[:16]
                     for config in config_identities(Path(self.config).read_text()))

    def cli_overrides(self, uses_pretrained: bool) -> list[str]:
        """The LightningCLI overrides of the run: the user's, the seed, the backbone file, the start
        weights (``uses_pretrained``: the task config takes image weights), the teacher, the steps."""
        out = list(self.overrides) + [f"--seed_everything={self.seed}"]
        if self.backbone_yaml:
            out.append(f"--model.init_args.backbone={self.backbone_yaml}")
        if self.pretrained and not self.converted and uses_pretrained:
            out.append(f"--model.init_args.backbone.init_args.pretrained={self.pretrained}")
        if self.distill_teacher:
            out.append(f"--model.init_args.distill={json.dumps({'teacher': self.distill_teacher})}")
        if self.max_steps:
            out.append(f"--trainer.max_steps={self.max_steps}")
        return out
