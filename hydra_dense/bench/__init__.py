"""Speed, memory and FLOP measurement shared by the tools (ratios in one process, interleaved):
``flops``, ``memory``, ``timing`` and the benchmarks built on them. Nothing is imported here, so that
``gpu_check_command`` can set ``TRITON_INTERPRET`` before anything imports Triton."""
