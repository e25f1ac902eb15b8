"""The score split near / far from a context track's cue, against IoU counted by hand with numpy."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from hydra_dense.comparison.near_far import NEAR_TOKENS, near_far_scores, near_far_table
from hydra_dense.data import SegmentationDataModule
from hydra_dense.data.demo_context import prepare


class _SaysDigitPlainEverywhere(torch.nn.Module):
    """A stand-in model: class 1 for every pixel."""

    hparams = SimpleNamespace(num_classes=3, ignore_index=255)
    device = torch.device("cpu")

    def predict_batch_labels(self, images, pad=None):
        return torch.ones(images.shape[0], *images.shape[-2:], dtype=torch.long)


def _by_hand(root, near: bool) -> list[float]:
    inter, union = np.zeros(3), np.zeros(3)
    for mask_file in sorted((root / "annotations" / "validation").glob("*.png")):
        mask = np.asarray(Image.open(mask_file), dtype=np.int64)
        dist = np.asarray(Image.open(root / "cue_distance" / "validation" / mask_file.name), dtype=np.int64)
        region = (dist <= NEAR_TOKENS) if near else (dist > NEAR_TOKENS)
        pred = np.ones_like(mask)
        for k in range(3):
            t, p = (mask == k) & region, (pred == k) & region
            inter[k] += (t & p).sum()
            union[k] += (t | p).sum()
    return [100 * i / u if u else float("nan") for i, u in zip(inter, union)]


@pytest.mark.parametrize("val_batch_size", [1, 3])
def test_near_and_far_scores_are_the_iou_of_each_region(tmp_path, val_batch_size):
    root = prepare("presence", tmp_path / "presence", n_train=2, n_val=4, val_size=336, val_objects=(4, 8))
    dm = SegmentationDataModule(str(root), num_classes=3, val_batch_size=val_batch_size, num_workers=0)
    split = near_far_scores(_SaysDigitPlainEverywhere(), dm)
    for region in ("near", "far"):
        expected = _by_hand(root, region == "near")
        np.testing.assert_allclose(split[f"{region}_per_class"], expected, atol=1e-6)
        assert split[region] == pytest.approx(np.nanmean(expected))
        assert 0 < split[region] < 100
    assert "| digit_plain |" in near_far_table(["background", "digit_plain", "digit_cued"], split)


def test_a_track_without_distance_maps_has_no_split(tmp_path):
    root = prepare("relation", tmp_path / "relation", n_train=2, n_val=2, val_size=112, val_objects=(3, 5))
    (root / "cue_distance" / "validation" / "scene_00001.png").unlink()
    dm = SegmentationDataModule(str(root), num_classes=3, num_workers=0)
    assert near_far_scores(_SaysDigitPlainEverywhere(), dm) is None
