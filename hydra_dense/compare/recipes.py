"""Recipe names of the comparison: an attention plan, optional local mixing, optional conversion.

    msa | hydra | hybrid4 | vitdet_hydra | linear12 ...      the plan (AttentionPlan.from_name)
    hydra+dwc3 | hybrid8+dwc5 ...                            + local mixing in the Hydra blocks
    hydra+dwc3@converted                                     the backbone converted from the MSA
                                                             weights first (hydra_dense.convert)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..attention import AttentionPlan

__all__ = ["Recipe", "parse_recipes", "recipe_names", "CONVERTED"]

CONVERTED = "@converted"


@dataclass(frozen=True)
class Recipe:
    """One row of the comparison: ``name`` as given, its plan name (or a backbone YAML), converted or not."""

    name: str
    plan_name: Optional[str] = None
    backbone_yaml: Optional[str] = None
    converted: bool = False

    def plan(self, depth: int) -> AttentionPlan:
        if self.plan_name is None:
            raise ValueError(f"recipe {self.name!r} is a backbone file, not a plan")
        return AttentionPlan.from_name(self.plan_name, depth)


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
        base, converted = (name[: -len(CONVERTED)], True) if name.endswith(CONVERTED) else (name, False)
        plan = AttentionPlan.from_name(base, depth)  # raises naming the bad plan
        if converted and not any(k != "msa" for k in plan.resolve(depth)):
            raise ValueError(f"--plans: {name!r}: conversion needs a plan with non-MSA blocks")
        out.append(Recipe(name, base, converted=converted))
    if not out:
        raise ValueError("--plans: no plan given")
    if len({r.name for r in out}) != len(out):
        raise ValueError(f"--plans: a plan is listed twice: {plans}")
    return out


def recipe_names(depth: int = 12) -> list[str]:
    """Every accepted name (``<L>`` / ``<H>`` stand for any number), for ``--list-plans``."""
    names = AttentionPlan.names(depth)
    return names + [n + CONVERTED for n in names if n not in ("msa", "none", "vitdet_msa")]
