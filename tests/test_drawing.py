"""Colour maps, mask overlays and detection boxes, against values worked out by hand."""
import numpy as np
import torch

from hydra_dense.drawing import colorize, draw_detections, overlay_panel, palette


def test_each_label_gets_its_palette_colour_and_ignored_pixels_are_white():
    mask = np.array([[0, 1], [2, 255]])
    out = colorize(mask, num_classes=3)
    pal = palette(3)
    assert out.dtype == np.uint8 and out.shape == (2, 2, 3)
    assert (out[0, 0] == pal[0]).all() and (out[0, 1] == pal[1]).all() and (out[1, 0] == pal[2]).all()
    assert (out[1, 1] == 255).all()
    assert len({tuple(c) for c in palette(12)}) == 12  # distinct colours for distinct classes


def test_the_overlay_strip_blends_truth_and_prediction_over_the_image():
    image = torch.full((3, 4, 5), 0.5)  # normalised with mean 0, std 1: grey 127
    target = torch.zeros(4, 5, dtype=torch.long)
    pred = torch.ones(4, 5, dtype=torch.long)
    strip = overlay_panel(image, target, pred, num_classes=2, mean=(0, 0, 0), std=(1, 1, 1), alpha=0.5)
    assert strip.shape == (4, 5 * 3 + 2 * 4, 3)
    grey = 127.0
    assert (strip[0, 0] == 127).all()
    expected_truth = ((grey + palette(2)[0].astype(np.float32)) / 2).astype(np.uint8)
    expected_pred = ((grey + palette(2)[1].astype(np.float32)) / 2).astype(np.uint8)
    assert (strip[0, 5 + 4] == expected_truth).all() and (strip[0, 2 * (5 + 4)] == expected_pred).all()


def test_only_detections_above_the_score_threshold_are_drawn():
    image = torch.zeros(3, 32, 32)
    pred = dict(boxes=torch.tensor([[4.0, 4.0, 20.0, 20.0]]), labels=torch.tensor([1]), scores=torch.tensor([0.2]))
    assert (draw_detections(image, pred, score_thresh=0.3) == 0).all()
    drawn = draw_detections(image, dict(pred, scores=torch.tensor([0.9])), score_thresh=0.3)
    assert drawn.shape == (32, 32, 3) and drawn.dtype == np.uint8
    assert (drawn[4, 4:21] == palette(2)[1]).all()  # the box's top edge in its class colour
    assert (drawn[12, 12] == 0).all()  # inside the box: untouched
