"""Decode heads: which of them see the whole image, and zeroing UPerNet's global bin."""
import pytest
import torch
import torch.nn.functional as F

from hydra_dense.heads.segmentation import UPerHead, build_decode_head, global_pool_muted

LEVELS = [(16, 32), (16, 16), (16, 8), (16, 4)]  # (channels, side), finest first


def _maps(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, c, s, s, generator=g) for c, s in LEVELS]


def _far_corner_changes(head) -> float:
    """How much the logits in the top-left corner move when the bottom-right corner of every input
    map changes: zero for a head that has no path across the image."""
    head.eval()
    maps = _maps()
    moved = [m.clone() for m in maps]
    for m in moved:
        m[..., -1, -1] += 5.0
    with torch.no_grad():
        a, b = head(maps), head(moved)
    return float((a[..., :2, :2] - b[..., :2, :2]).abs().max())


@pytest.mark.parametrize("kind, scales, reaches", [("linear", None, False), ("uper", [], False),
                                                   ("uper", [1], True), ("uper", [1, 2, 3, 6], True)])
def test_only_a_head_with_pooling_carries_a_far_corner_to_another(kind, scales, reaches):
    head = build_decode_head(kind, [c for c, _ in LEVELS], 3, 8, scales)
    assert (_far_corner_changes(head) > 1e-6) == reaches


def test_zeroing_the_global_bin_is_feeding_zeros_to_the_bottleneck_in_its_place():
    torch.manual_seed(0)
    head = UPerHead([c for c, _ in LEVELS], 3, channels=8, pool_scales=(1, 2)).eval()
    maps = _maps()
    with torch.no_grad():
        top = maps[-1]
        # by hand: the bin of scale 2 kept, the bin of scale 1 replaced by zeros
        bin2 = F.interpolate(head.ppm[1](top), size=top.shape[-2:], mode="bilinear", align_corners=False)
        zeros = torch.zeros(top.shape[0], 8, *top.shape[-2:])
        bottleneck = head.ppm_bottleneck(torch.cat([top, zeros, bin2], 1))
        levels = head.fpn({str(i): m for i, m in enumerate(list(maps[:-1]) + [bottleneck])})
        size = maps[0].shape[-2:]
        fused = torch.cat([F.interpolate(v, size=size, mode="bilinear", align_corners=False) for v in levels.values()], 1)
        expected = head.classifier(head.fuse(fused))
        with global_pool_muted(head) as has_pool:
            muted = head(maps)
        intact = head(maps)
    assert has_pool
    torch.testing.assert_close(muted, expected)
    assert (muted - intact).abs().max() > 1e-4  # and the context restores the bin
    with global_pool_muted(head):
        pass
    torch.testing.assert_close(head(maps), intact)


def test_a_head_without_a_global_bin_is_left_as_it_is():
    head = build_decode_head("uper", [c for c, _ in LEVELS], 3, 8, [2, 3]).eval()
    with torch.no_grad(), global_pool_muted(head) as has_pool:
        assert not has_pool
        out = head(_maps())
    torch.testing.assert_close(out, head(_maps()))


def test_pool_scales_are_upernets_alone_and_positive():
    with pytest.raises(ValueError, match="pool_scales is UPerNet's"):
        build_decode_head("linear", [16], 3, 8, [1])
    with pytest.raises(ValueError, match="bins must be >= 1"):
        UPerHead([16], 3, 8, pool_scales=(0, 2))
