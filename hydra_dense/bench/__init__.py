"""Speed, memory and FLOP measurement shared by the tools (ratios in one process, interleaved)."""
from .flops import attention_flops_by_formula, count_flops
from .memory import peak_memory_mb
from .timing import interleaved_medians

__all__ = ["count_flops", "attention_flops_by_formula", "peak_memory_mb", "interleaved_medians"]
