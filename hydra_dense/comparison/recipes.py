"""Recipe names of the comparison: an attention plan, optional local mixing, optional conversion.

    msa | hydra | hybrid4 | vitdet_hydra | linear12 ...      the plan (attention.plan_grammar)
    hydra+dwc3 | hybrid8+dwc5 ...                            + local mixing in the Hydra blocks
    hydra+dwc3@converted                                     the backbone converted from the MSA
                                                             weights first (hydra_dense.conversion)
    hydra+mean+dwc7@distilled                                converted, then fine-tuned with the MSA
                                                             weights' backbone features as an extra
                                                             loss (tasks.distill)
    hydra+mean+dwc7@aligned                                  that conversion, then the whole network
                                                             aligned to the MSA teacher's features
                                                             (stage 2, natural images and the task's
                                                             training images, labels unused)
    hydra+dwc7@from_msa                                      the comparison's own fine-tuned msa run
                                                             of the same seed converted (on the
                                                             task's training images, labels unused),
                                                             its head kept, then fine-tuned
    msa@continued                                            that msa run fine-tuned once more: the
                                                             same labelled steps, no conversion
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, Optional

from ..attention import AttentionPlan, plan_from_name, plan_names

__all__ = ["Recipe", "parse_recipes", "split_recipe_name", "recipe_names", "CONVERTED", "ALIGNED", "DISTILLED", "FROM_MSA", "CONTINUED"]

CONVERTED = "@converted"
ALIGNED = "@aligned"
DISTILLED = "@distilled"
FROM_MSA = "@from_msa"
CONTINUED = "@continued"
Start = Literal["given", "converted", "aligned", "distilled", "from_msa", "continued"]
_SUFFIXES: dict[str, Start] = {CONVERTED: "converted", ALIGNED: "aligned", DISTILLED: "distilled",
                               FROM_MSA: "from_msa", CONTINUED: "continued"}


@dataclass(frozen=True)
class Recipe:
    """One row of the comparison: ``name`` as given, its plan name (or a backbone YAML), and where its
    weights start: ``given`` (the pretrained weights, or scratch), ``converted`` (those weights
    converted first), ``aligned`` (converted, then the whole network aligned), ``distilled``
    (converted, then fine-tuned with the MSA weights' features as an extra loss), ``from_msa`` (the comparison's msa run of the same seed converted, head kept) or
    ``continued`` (that msa run itself, trained once more)."""

    name: str
    plan_name: Optional[str] = None
    backbone_yaml: Optional[str] = None
    start: Start = "given"

    @property
    def converted(self) -> bool:
        """Converted from the MSA weights before the task (``@converted``; ``@aligned`` and
        ``@distilled`` start from that conversion too)."""
        return self.start in ("converted", "aligned", "distilled")

    @property
    def aligned(self) -> bool:
        return self.start == "aligned"

    @property
    def from_msa_run(self) -> bool:
        """Starts from the comparison's own msa run of the same seed (``@from_msa``, ``@continued``)."""
        return self.start in ("from_msa", "continued")

    def plan(self, depth: int) -> AttentionPlan:
        if self.plan_name is None:
            raise ValueError(f"recipe {self.name!r} is a backbone file, not a plan")
        return plan_from_name(self.plan_name, depth)

    def plan_fields(self, depth: int) -> dict:
        """The plan's fields that differ from an empty plan (``default`` always): what a conversion is
        given and keyed by."""
        return {k: v for k, v in asdict(self.plan(depth)).items() if v not in (None, [], 0, False) or k == "default"}


def split_recipe_name(name: str) -> tuple[str, Start]:
    """``hydra+dwc7@converted`` -> (``hydra+dwc7``, ``converted``): the plan, and where its weights start."""
    for suffix, kind in _SUFFIXES.items():
        if name.endswith(suffix):
            return name[: -len(suffix)], kind
    return name, "given"


def parse_recipes(plans: Optional[str], backbones: Optional[str] = None, depth: int = 12) -> list[Recipe]:
    """``--plans a,b,c`` or ``--backbones x.yaml,y.yaml`` -> recipes, every name validated first."""
    if backbones:
        out = []
        for path in backbones.split(","):
            if not Path(path).is_file():
                raise FileNotFoundError(f"--backbones: {path} does not exist")
            out.append(Recipe(Path(path).stem, backbone_yaml=path))
        return out
    out = []
    for name in [p.strip() for p in (plans or "").split(",") if p.strip()]:
        base, start = split_recipe_name(name)
        plan = plan_from_name(base, depth)  # raises naming the bad plan
        try:
            plan.resolve(depth)  # a plan that does not fit the model is refused before anything trains
        except ValueError as err:
            raise ValueError(f"--plans: {name!r} does not fit the task's backbone of depth {depth}: {err}") from None
        if start in ("converted", "aligned", "distilled", "from_msa") and not any(k != "msa" for k in plan.resolve(depth)):
            raise ValueError(f"--plans: {name!r}: conversion needs a plan with non-MSA blocks")
        if start == "continued" and base != "msa":
            raise ValueError(f"--plans: {name!r}: only msa@continued exists (the msa run trained once more)")
        out.append(Recipe(name, base, start=start))
    if not out:
        raise ValueError("--plans: no plan given")
    if len({r.name for r in out}) != len(out):
        raise ValueError(f"--plans: a plan is listed twice: {plans}")
    if any(r.from_msa_run for r in out) and (out[0].plan_name != "msa" or out[0].start != "given"):
        raise ValueError(f"--plans: {FROM_MSA} / {CONTINUED} recipes start from the comparison's own msa runs: list "
                         f"msa first (got {out[0].name!r})")
    return out


def recipe_names(depth: int = 12) -> list[str]:
    """Every accepted name (``<L>`` / ``<H>`` stand for any number), for ``--list-plans``."""
    names = plan_names(depth)
    convertible = [n for n in names if n not in ("msa", "none", "vitdet_msa", "vitdet_windows")]
    return (names + [n + CONVERTED for n in convertible] + [n + ALIGNED for n in convertible]
            + [n + DISTILLED for n in convertible]
            + [n + FROM_MSA for n in convertible] + ["msa" + CONTINUED])
