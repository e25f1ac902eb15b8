"""The video ViT: shapes for joint and divided attention, padding, image-checkpoint inflation."""
import pytest
import torch

from hydra_dense.backbones import VideoViT, ViT


@pytest.mark.parametrize("layout", ["joint", "divided"])
@pytest.mark.parametrize("plan", ["msa", "hydra", {"default": "msa", "hydra_last": 1}])
def test_shapes(layout, plan):
    m = VideoViT("tiny", depth=2, num_frames=4, img_size=32, patch_size=8, tubelet_size=2, layout=layout, plan=plan)
    x = torch.randn(2, 3, 5, 30, 34)  # odd frames and sizes are padded
    assert m.forward_features(x).shape == (2, 192, 3, 4, 5)
    assert m(x).shape == (2, 192)
    assert m.num_tokens(16, 224, 224) == 8 * 28 * 28  # patch 8, tubelet 2


def test_joint_hydra_is_global_over_space_and_time():
    m = VideoViT("tiny", depth=1, num_frames=4, img_size=16, patch_size=8, plan="hydra").eval()
    x = torch.randn(1, 3, 4, 16, 16)
    y = x.clone()
    y[:, :, 2:] += 1.0  # change only the second tubelet
    with torch.no_grad():
        a, b = m.forward_features(x), m.forward_features(y)
    assert (a[:, :, 0] - b[:, :, 0]).abs().max() > 1e-4  # first-tubelet tokens see the change


def test_divided_inflated_from_image_vit_equals_per_frame_image_features():
    img = ViT("tiny", depth=2, patch_size=8, img_size=32, class_token=False, plan="hydra").eval()
    vid = VideoViT("tiny", depth=2, patch_size=8, img_size=32, num_frames=3, tubelet_size=1,
                   layout="divided", plan="hydra").eval()
    report = vid.load_image_pretrained(img.state_dict(), verbose=False)
    assert not report.missing or all("temporal_fc" in k for k in report.missing)
    clip = torch.randn(1, 3, 3, 32, 32)
    with torch.no_grad():
        got = vid.forward_features(clip)
        for t in range(3):
            torch.testing.assert_close(got[:, :, t], img(clip[:, :, t])[0], rtol=1e-4, atol=1e-5)


def test_bad_input():
    m = VideoViT("tiny", depth=1, num_frames=2, img_size=16, patch_size=8)
    with pytest.raises(ValueError, match=r"expected clips of shape \(B, 3, T, H, W\)"):
        m(torch.randn(1, 3, 16, 16))
    with pytest.raises(ValueError, match="window attention is not supported for video"):
        VideoViT("tiny", depth=2, plan={"window_size": 2, "global_blocks": [1]})
    with pytest.raises(ValueError, match="layout must be"):
        VideoViT("tiny", depth=1, layout="factorised")
