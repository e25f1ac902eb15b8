"""The Triton Hydra kernels against eager: forward and gradients, fp32/bf16/fp16, masks.

On CPU they run under TRITON_INTERPRET=1 (in a subprocess, since the variable must be set
before triton is imported); on CUDA they run compiled.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

triton = pytest.importorskip("triton", reason="triton is not installed (it ships with CUDA builds of torch)")

CHECK = textwrap.dedent('''
    import torch
    from hydra_dense.attention import hydra_attention, hydra_attention_eager
    torch.manual_seed(0)
    dev = "{device}"
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 3e-2), (torch.float16, 3e-3)):
        for shape in ((2, 37, 24), (3, 1, 5, 16)):
            qkv = torch.randn(*shape[:-1], 3 * shape[-1], dtype=dtype, device=dev)
            q, k, v = (t.detach().clone().requires_grad_() for t in qkv.unflatten(-1, (3, shape[-1])).unbind(-2))
            mask = torch.zeros(shape[:-1], dtype=torch.bool, device=dev)
            mask.view(-1, shape[-2])[0, shape[-2] // 2:] = True
            for m in (None, mask):
                out = hydra_attention(q, k, v, m, impl="triton")
                g = torch.randn_like(out)
                grads = torch.autograd.grad(out, (q, k, v), g)
                q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
                ref = hydra_attention_eager(q2, k2, v2, m)
                refs = torch.autograd.grad(ref, (q2, k2, v2), g)
                assert out.dtype == dtype and out.shape == q.shape
                torch.testing.assert_close(out.float(), ref.float(), rtol=tol, atol=tol)
                for a, b in zip(grads, refs):
                    torch.testing.assert_close(a.float(), b.float(), rtol=tol, atol=tol)
                if m is not None:
                    assert (out[m] == 0).all() and (grads[2][m] == 0).all()
    print("TRITON-OK")
''')


def test_triton_kernels_match_eager_in_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", CHECK.format(device="cpu")], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0 and "TRITON-OK" in proc.stdout, proc.stderr[-3000:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiled Triton kernels need a CUDA GPU; "
                    "their numerics are covered on CPU by the interpreter test")
def test_triton_kernels_match_eager_on_cuda():
    proc = subprocess.run([sys.executable, "-c", CHECK.format(device="cuda")], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and "TRITON-OK" in proc.stdout, proc.stderr[-3000:]
