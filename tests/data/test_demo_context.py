"""The context tracks' scenes: a digit's class is the cue's doing, and the distance maps are right."""
import json

import numpy as np
import pytest
from PIL import Image

from hydra_dense.data import demo_context
from hydra_dense.data.demo_context import CUE_SIDE, PATCH, TRACKS, prepare


@pytest.fixture(scope="module")
def tracks(tmp_path_factory):
    root = tmp_path_factory.mktemp("context")
    return {t: prepare(t, root / t, n_train=6, n_val=4) for t in TRACKS}


def _read(root, kind, split, i):
    folder = {"image": "images", "mask": "annotations", "distance": "cue_distance"}[kind]
    suffix = ".jpg" if kind == "image" else ".png"
    return np.asarray(Image.open(root / folder / split / f"scene_{i:05d}{suffix}"), dtype=np.int64)


def _cue_box(dist):
    ys, xs = np.nonzero(dist == 0)
    return ys.min(), xs.min(), ys.max() + 1 - ys.min(), xs.max() + 1 - xs.min()


def test_presence_every_digit_of_a_scene_takes_the_class_its_cue_decides(tracks):
    for split, count in (("training", 6), ("validation", 4)):
        for i in range(count):
            labels = set(np.unique(_read(tracks["presence"], "mask", split, i)).tolist()) - {0}
            assert labels == ({2} if i % 2 == 1 else {1}), (split, i, labels)


def test_relation_a_digit_left_of_the_cue_is_one_class_right_of_it_the_other(tracks):
    root = tracks["relation"]
    for i in range(4):
        mask, dist = _read(root, "mask", "validation", i), _read(root, "distance", "validation", i)
        y, x, h, w = _cue_box(dist)
        cols = np.nonzero(mask)[1]
        # a digit is judged by its box's centre; its pixels lie within 37 px of that centre
        assert (cols[mask[np.nonzero(mask)] == 1] < x + w / 2 + 37).all()
        assert (cols[mask[np.nonzero(mask)] == 2] > x + w / 2 - 37).all()
        assert {1, 2} & set(np.unique(mask).tolist())


def test_the_cue_is_drawn_where_the_distance_map_says_and_no_digit_covers_it(tracks):
    for track, root in tracks.items():
        for i in range(4):
            image, mask = _read(root, "image", "validation", i), _read(root, "mask", "validation", i)
            dist = _read(root, "distance", "validation", i)
            y, x, h, w = _cue_box(dist)
            assert (h, w) == (CUE_SIDE, CUE_SIDE)
            assert (mask[y:y + h, x:x + w] == 0).all()
            drawn = track == "relation" or i % 2 == 1
            cue = image[y:y + h, x:x + w].mean(-1)
            # a checkerboard of 20 and 235: half its pixels dark, half bright (JPEG blurs the edges)
            assert ((cue < 60).mean() > 0.35 and (cue > 190).mean() > 0.35) == drawn, (track, i)


def test_the_distance_map_is_the_chebyshev_distance_to_the_cue_in_tokens():
    rng = np.random.default_rng(3)
    digits = rng.integers(0, 255, (5, 28, 28)).astype(np.uint8)
    _, _, dist = demo_context.scene(rng, digits, "relation", 112, (1, 2), cued=True)
    y, x, _, _ = _cue_box(dist)
    rows, cols = np.mgrid[0:112, 0:112]
    gap = np.maximum(np.maximum(np.maximum(y - rows, rows - (y + CUE_SIDE - 1)), 0),
                     np.maximum(np.maximum(x - cols, cols - (x + CUE_SIDE - 1)), 0))
    np.testing.assert_array_equal(dist, np.ceil(gap / PATCH))


def test_preparing_twice_does_nothing_and_the_classes_are_named(tracks):
    root = tracks["presence"]
    meta = json.loads((root / "classes.json").read_text())
    assert meta["classes"] == ["background", "digit_plain", "digit_cued"]
    before = (root / "images" / "validation" / "scene_00000.jpg").stat().st_mtime_ns
    prepare("presence", root, n_train=6, n_val=4)
    assert (root / "images" / "validation" / "scene_00000.jpg").stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="unknown context track 'size'"):
        prepare("size", root)


# the base track of the whole-scene tests, small (SIZES at a fraction)
SMALL_BASE = dict(train_size=168, val_size=224, train_objects=(1, 3), val_objects=(2, 4), n_train=2, n_val=2)


def test_whole_scene_training_draws_validation_size_scenes_and_copies_the_tracks_validation(tmp_path):
    small = dict(training=dict(train_size=224, train_objects=(2, 4), n_train=4),  # WHOLE_TRAINING, small
                 base_sizes=SMALL_BASE)
    root = demo_context.prepare_whole("presence", tmp_path / "whole", **small)
    base = tmp_path / "whole_base"
    for i in range(4):
        assert _read(root, "image", "training", i).shape[:2] == (224, 224)
        labels = set(np.unique(_read(root, "mask", "training", i)).tolist()) - {0}
        assert labels == ({2} if i % 2 == 1 else {1}), (i, labels)
    assert _read(base, "image", "training", 0).shape[:2] == (168, 168)
    for kind in ("image", "mask", "distance"):
        for i in range(2):
            assert np.array_equal(_read(root, kind, "validation", i), _read(base, kind, "validation", i))
    meta = json.loads((root / "classes.json").read_text())
    assert (meta["train_size"], meta["n_train"], meta["validation"]) == (224, 4, "copied from whole_base")
    stamp = (root / "classes.json").stat().st_mtime_ns
    demo_context.prepare_whole("presence", tmp_path / "whole", **small)
    assert (root / "classes.json").stat().st_mtime_ns == stamp  # prepared once


def test_the_relation_track_trains_on_whole_scenes_too(tmp_path):
    """The relation track's whole-scene set: every training scene of validation size, its digits
    labelled by their side of the cue (both sides across scenes), the base track's validation copied;
    the folder a shipped config names is one the job prepares."""
    from hydra_dense.data.embedded import EMBEDDED

    small = dict(training=dict(train_size=224, train_objects=(6, 9), n_train=4), base_sizes=SMALL_BASE)
    root = demo_context.prepare_whole("relation", tmp_path / "whole", **small)
    sides = set()
    for i in range(4):
        assert _read(root, "image", "training", i).shape[:2] == (224, 224)
        labels = set(np.unique(_read(root, "mask", "training", i)).tolist()) - {0}
        assert labels and labels <= {1, 2}, (i, labels)
        sides |= labels
    assert sides == {1, 2}
    assert np.array_equal(_read(root, "mask", "validation", 0), _read(tmp_path / "whole_base", "mask", "validation", 0))
    assert "context_relation_whole" in EMBEDDED
