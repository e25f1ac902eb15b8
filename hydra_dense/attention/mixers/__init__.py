"""One token mixer per file, each a subclass of timm's ``Attention`` (:mod:`.planned`)."""
from .channel_global import AFTSimpleAttention, PolyNLAttention
from .global_linear import GAIN_RATE, GlobalLinearAttention
from .hydra import HydraAttention
from .hydra_norm import NormAwareHydraAttention
from .linear import LinearAttention
from .local_only import LocalOnlyAttention
from .msa import MSAttention
from .no_mix import NoMixAttention
from .planned import PlannedAttention
from .window_msa import WindowMSAttention

__all__ = ["PlannedAttention", "MSAttention", "GlobalLinearAttention", "GAIN_RATE", "HydraAttention",
           "NormAwareHydraAttention", "LinearAttention", "AFTSimpleAttention", "PolyNLAttention", "LocalOnlyAttention",
           "NoMixAttention", "WindowMSAttention"]
