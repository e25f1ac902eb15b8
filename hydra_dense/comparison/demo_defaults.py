"""What each shipped demo config compares when ``--plans`` is not given: one table, data not code.

A user who runs ``./run.sh demo --config <demo>`` gets the rows needed to read that demo's answer:
MSA, the recommended all-Hydra recipe and, where a question is whether global mixing earns its
place, the controls that take it away (the recipe's local branch alone, ViTDet windows without
global blocks).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["DemoDefaults", "DEMO_DEFAULTS", "DEFAULT_PLANS", "DEMO_PLANS", "LARGE_DEMO_PLANS", "CONTEXT_PLANS",
           "CONVERTIBLE_PLANS", "VIDEO_DEMO_PLANS", "DEMO_CONFIG", "LARGE_DEMO_CONFIG", "VIDEO_DEMO_CONFIG",
           "DETECTION_DEMO_CONFIG", "DETECTION_CONVERT_CONFIG", "CONTEXT_CONFIGS", "DINOV2_BACKBONE_FILE"]

DEFAULT_PLANS = "msa,hybrid2,hydra"
# on segmentation the real DINOv2 weights converted with 7x7 local mixing and kv averaged over tokens
# (it keeps working at other token counts), on video the comparison's own MSA run converted
DEMO_PLANS = DEFAULT_PLANS + ",hydra+mean+dwc7@converted"
LARGE_DEMO_PLANS = "msa,hydra+mean+dwc7@converted,local+dwc7@converted,vitdet8_msa,vitdet8_hydra+mean"
# the context tracks: every row that says who carries the cue (global Hydra term, MSA, ViTDet's global
# blocks, those Hydra blocks converted from MSA: the one Hydra term that carried a cue) beside the
# control that has no global path at all
CONTEXT_PLANS = LARGE_DEMO_PLANS + ",vitdet8_hydra+mean@converted,vitdet8_windows"
# any other segmentation config on the DINOv2 ViT-S/14 backbone: the recipe beside MSA and its control
CONVERTIBLE_PLANS = "msa,hydra+mean+dwc7@converted,local+dwc7@converted"
VIDEO_DEMO_PLANS = DEFAULT_PLANS + ",hydra@converted"
DINOV2_BACKBONE_FILE = "vit_s14_dinov2_msa.yaml"

DEMO_CONFIG = "configs/segmentation/demo_digits.yaml"
LARGE_DEMO_CONFIG = "configs/segmentation/demo_digits_large.yaml"
VIDEO_DEMO_CONFIG = "configs/video/demo_moving_digits.yaml"
DETECTION_DEMO_CONFIG = "configs/detection/demo_digits.yaml"
# the detection demo starts from the DINOv2 weights at patch 16: converted on crops that give its own
# token count (224 px at patch 16: 196 tokens)
DETECTION_CONVERT_CONFIG = "configs/convert/dinov2_s16_det_224.yaml"
CONTEXT_CONFIGS = ("configs/segmentation/demo_context_presence.yaml",
                   "configs/segmentation/demo_context_presence_whole.yaml",
                   "configs/segmentation/demo_context_relation.yaml",
                   "configs/segmentation/demo_context_relation_whole.yaml")


@dataclass(frozen=True)
class DemoDefaults:
    """A demo's ``plans``; ``pretrained_only``: only with pretrained weights (``--pretrained none``
    falls back to :data:`DEFAULT_PLANS`); ``convert_config``: its conversion config, if not the default."""

    plans: str
    pretrained_only: bool = True
    convert_config: Optional[str] = None


DEMO_DEFAULTS: dict[str, DemoDefaults] = {
    DEMO_CONFIG: DemoDefaults(DEMO_PLANS),
    LARGE_DEMO_CONFIG: DemoDefaults(LARGE_DEMO_PLANS),
    **{config: DemoDefaults(CONTEXT_PLANS) for config in CONTEXT_CONFIGS},
    VIDEO_DEMO_CONFIG: DemoDefaults(VIDEO_DEMO_PLANS, pretrained_only=False),
    DETECTION_DEMO_CONFIG: DemoDefaults(DEMO_PLANS, convert_config=DETECTION_CONVERT_CONFIG),
}
