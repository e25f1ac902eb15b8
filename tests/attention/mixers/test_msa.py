"""The MSA module against softmax attention written out by hand."""
import torch

from hydra_dense.attention import MSAttention, TokenLayout


def test_msa_module_matches_manual_softmax_and_masks():
    torch.manual_seed(0)
    attn = MSAttention(16, num_heads=4).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    q, k, v = attn.qkv(x).reshape(2, 7, 3, 4, 4).permute(2, 0, 3, 1, 4)
    ref = ((q @ k.transpose(-1, -2)) / 2.0).softmax(-1) @ v
    ref = attn.proj(ref.transpose(1, 2).reshape(2, 7, 16))
    torch.testing.assert_close(attn(x), ref)
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[0, 5:] = True
    out = attn(x, TokenLayout((7,), 0, mask))
    torch.testing.assert_close(out[0, :5], attn(x[:1, :5])[0])
