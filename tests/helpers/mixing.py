"""Local-mixing branches with random weights, and the padding-invariance check every token mixer must pass."""
import torch

from hydra_dense.attention.local_mixing import LocalMixing


def randomise(module, std=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, LocalMixing):
            with torch.no_grad():
                m.conv.weight.copy_(torch.randn(m.conv.weight.shape, generator=g) * std)
                m.conv.bias.copy_(torch.randn(m.conv.bias.shape, generator=g) * std)
    return module


def assert_padding_invariant(m):
    """An image alone and padded inside a batch (mask given) gives the same feature map."""
    img = torch.randn(1, 3, 50, 70)
    canvas = torch.randn(2, 3, 96, 112)
    canvas[0] = 0
    canvas[0, :, :50, :70] = img[0]
    pad = torch.ones(2, 96, 112, dtype=torch.bool)
    pad[0, :50, :70] = False
    pad[1] = False
    with torch.no_grad():
        alone, batched = m(img)[0], m(canvas, pad)[0]
    torch.testing.assert_close(batched[:1, :, :4, :5], alone, rtol=1e-4, atol=1e-5)
