"""Hand-written kernels (Triton) for the fused Hydra path on CUDA."""
