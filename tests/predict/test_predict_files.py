"""predict on a user's files: finding inputs, sliding-window labels against a whole-image average
written out here, and ``tools/train.py predict --data.init_args.predict_files=...`` for the three
tasks (outputs named after the inputs, unreadable files named and counted, DDP without repeats)."""
from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from hydra_dense.predict import PredictInputs, find_predict_files, sliding_window_labels
from tests.helpers.tiny_runs import ok, train, write_config


def _image(path, h, w, seed=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)
    return path


def test_find_predict_files_folders_globs_and_lists(tmp_path):
    a = _image(tmp_path / "in" / "a.jpg", 8, 8)
    b = _image(tmp_path / "in" / "sub" / "b.PNG", 8, 8)
    (tmp_path / "in" / "notes.txt").write_text("not an image")
    exts = (".jpg", ".png")
    assert find_predict_files(str(tmp_path / "in"), exts) == [a, b]
    assert find_predict_files(str(tmp_path / "in" / "**" / "*.PNG"), exts) == [b]
    assert find_predict_files([str(b), str(a), str(b)], exts) == [b, a]  # listed order, no repeats
    inputs = PredictInputs(find_predict_files(str(tmp_path / "in"), exts))
    assert inputs.names == ["a", "sub/b"]
    with pytest.raises(FileNotFoundError, match="data.predict_files: .*missing does not exist"):
        find_predict_files(str(tmp_path / "missing"), exts)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty holds no input files"):
        find_predict_files(str(tmp_path / "empty"), exts)


@pytest.mark.parametrize("size", [(50, 37), (12, 9), (16, 40)])
def test_sliding_window_labels_equal_the_average_over_all_windows(size):
    """Reference: every window's logits summed into one full-size buffer, divided by the count."""
    H, W = size
    crop, stride, K = (16, 16), (10, 7), 5
    torch.manual_seed(0)
    weight = torch.randn(K, 3, 3, 3)
    model = lambda x: F.conv2d(x, weight, padding=1) + x.mean((2, 3), keepdim=True)[:, :1]  # noqa: E731
    image = torch.randint(0, 256, (3, H, W), dtype=torch.uint8)
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)
    normalised = (image.float() / 255 - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    total, count = torch.zeros(K, H, W), torch.zeros(1, H, W)
    y_starts = sorted({min(y, max(H - crop[0], 0)) for y in range(0, max(H - crop[0], 0) + stride[0], stride[0])})
    x_starts = sorted({min(x, max(W - crop[1], 0)) for x in range(0, max(W - crop[1], 0) + stride[1], stride[1])})
    for y in y_starts:
        for x in x_starts:
            window = normalised[:, y:y + crop[0], x:x + crop[1]]
            total[:, y:y + window.shape[1], x:x + window.shape[2]] += model(window[None])[0]
            count[:, y:y + window.shape[1], x:x + window.shape[2]] += 1
    assert count.min() >= 1
    expected = (total / count).argmax(0)
    labels = sliding_window_labels(model, image, crop, stride, K, mean, std)
    assert labels.shape == (H, W) and labels.dtype == torch.uint8
    assert (labels.long() == expected).float().mean() > 0.999  # float rounding may flip an exact tie


def _inputs(folder):
    _image(folder / "small.jpg", 24, 20, seed=1)
    _image(folder / "scenes" / "large.png", 70, 45, seed=2)
    (folder / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    return folder


def test_predict_files_segmentation_writes_labels_overlays_and_a_summary(tmp_path):
    config = write_config("segmentation", tmp_path)
    folder = _inputs(tmp_path / "photos")
    root = tmp_path / "run"
    proc = ok(train("predict", config, root, "--allow_untrained=true", f"--data.init_args.predict_files={folder}",
                    "--data.init_args.num_workers=2",  # as the shipped configs: files read in worker processes
                    "--model.init_args.slide_crop=[32,32]", "--model.init_args.slide_stride=[20,20]"))
    out = next(root.rglob("predictions"))
    for name, (h, w) in {"small": (24, 20), "scenes/large": (70, 45)}.items():
        labels = Image.open(out / f"{name}.png")
        assert labels.mode == "P" and labels.size == (w, h)
        assert np.asarray(labels).max() < 4
        assert Image.open(out / f"{name}_overlay.jpg").size == (w, h)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inputs"] == 3 and summary["predicted"] == 2 and summary["skipped"] == 1
    assert summary["skipped_files"][0].endswith("broken.jpg") and "table" not in summary
    assert "broken.jpg" in proc.stderr


def test_predict_files_detection_writes_coco_results_and_drawings(tmp_path):
    config = write_config("detection", tmp_path)
    folder = tmp_path / "photos"
    _image(folder / "a.jpg", 64, 80, seed=3)
    _image(folder / "b.jpg", 50, 64, seed=4)
    root = tmp_path / "run"
    ok(train("predict", config, root, "--allow_untrained=true", f"--data.init_args.predict_files={folder / '*.jpg'}"))
    out = next(root.rglob("predictions"))
    assert Image.open(out / "a.png").size == (80, 64) and Image.open(out / "b.png").size == (64, 50)
    results = json.loads((out / "detections.json").read_text())
    assert results, "score_thresh 0 keeps detections even from an untrained model"
    assert {r["file_name"] for r in results} <= {"a", "b"} and {r["image_id"] for r in results} <= {0, 1}
    assert all(len(r["bbox"]) == 4 and "segmentation" in r for r in results)
    assert json.loads((out / "summary.json").read_text())["predicted"] == 2


def test_predict_files_video_writes_top5_once_per_video_under_ddp(tmp_path):
    config = write_config("video", tmp_path)
    videos = sorted((tmp_path / "video_data").rglob("*.mp4"))[:3]  # 3 videos: uneven over 2 ranks
    folder = tmp_path / "clips"
    for i, v in enumerate(videos):
        (folder / f"clip{i}").mkdir(parents=True)
        shutil.copy(v, folder / f"clip{i}" / v.name)
    (folder / "clip0" / "corrupt.mp4").write_bytes(b"\x00" * 100)
    root = tmp_path / "run"
    ok(train("predict", config, root, "--allow_untrained=true", f"--data.init_args.predict_files={folder}", procs=2))
    out = next(root.rglob("predictions"))
    rows = list(csv.DictReader((out / "top5.csv").open()))
    assert sorted(r["file"] for r in rows) == [f"clip{i}/{v.stem}" for i, v in enumerate(videos)]
    assert all(set(r) >= {"class_1", "score_1", "class_4", "score_4"} for r in rows)
    scores = np.array([[float(r[f"score_{k}"]) for k in range(1, 5)] for r in rows])
    assert np.all(np.diff(scores, axis=1) <= 0) and np.allclose(scores.sum(1), 1, atol=1e-3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["predicted"] == 3 and summary["skipped_files"][0].endswith("corrupt.mp4")


def test_predict_files_segmentation_takes_tiny_and_sixteen_bit_images(tmp_path):
    """A 1x1 PNG is below what the feature pyramid takes: it is enlarged, predicted and its labels
    brought back to 1x1, and the files after it are predicted; a 16-bit PNG is read scaled."""
    config = write_config("segmentation", tmp_path)
    folder = tmp_path / "odd"
    folder.mkdir()
    Image.new("RGB", (1, 1), (200, 10, 10)).save(folder / "a_dot.png")
    Image.fromarray(np.full((20, 30), 40000, dtype=np.uint16)).save(folder / "b_deep.png")
    _image(folder / "c_normal.png", 24, 20)
    root = tmp_path / "run"
    proc = ok(train("predict", config, root, "--allow_untrained=true", f"--data.init_args.predict_files={folder}"))
    out = next(root.rglob("predictions"))
    assert Image.open(out / "a_dot.png").size == (1, 1) and Image.open(out / "b_deep.png").size == (30, 20)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["predicted"] == 3 and summary["skipped"] == 0
    assert "not writable" not in proc.stderr


def test_a_file_whose_prediction_fails_is_named_skipped_and_the_rest_go_on(tmp_path):
    from hydra_dense.predict.outputs import PredictionOutputs
    from hydra_dense.tasks.file_predictions import FilePredictions

    files = [_image(tmp_path / f"in/{n}.png", 8, 8) for n in ("a", "b", "c")]
    task = FilePredictions()
    task.predictions = PredictionOutputs(tmp_path / "out", PredictInputs(files))

    def predict_one(image, index):
        if index == 1:
            raise RuntimeError("Output size is too small\nmore detail")
        task.predictions.add(index)
        return task.predictions.inputs.names[index]

    batch = {"images": [torch.zeros(3, 8, 8, dtype=torch.uint8)] * 3, "index": torch.tensor([0, 1, 2])}
    assert task.predict_files_guarded(batch, predict_one) == ["a", "c"]
    summary = task.predictions.finish(True)
    assert summary["predicted"] == 2 and summary["skipped_files"] == [str(files[1])]
    assert summary["skipped_reasons"] == {str(files[1]): "RuntimeError: Output size is too small (image (3, 8, 8))"}


def test_inputs_sharing_a_stem_keep_their_extension_so_no_output_overwrites_another(tmp_path):
    files = [_image(tmp_path / "in" / "a.png", 8, 8), _image(tmp_path / "in" / "a.jpg", 8, 8),
             _image(tmp_path / "in" / "b.jpg", 8, 8)]
    assert PredictInputs(files).names == ["a.png", "a.jpg", "b"]


def test_predict_on_a_shared_stem_and_a_float_tiff(tmp_path):
    """Two inputs named ``a`` both get their labels; a float TIFF is refused naming its mode, as
    training refuses it, and its reason is in the summary."""
    config = write_config("segmentation", tmp_path)
    folder = tmp_path / "photos"
    _image(folder / "a.png", 64, 64, seed=1)
    _image(folder / "a.jpg", 48, 80, seed=2)
    Image.fromarray(np.full((20, 30), 0.5, dtype=np.float32)).save(folder / "float.tif")
    root = tmp_path / "run"
    ok(train("predict", config, root, "--allow_untrained=true", f"--data.init_args.predict_files={folder}",
             "--model.init_args.slide_crop=[32,32]", "--model.init_args.slide_stride=[20,20]"))
    out = next(root.rglob("predictions"))
    assert Image.open(out / "a.png.png").size == (64, 64) and Image.open(out / "a.jpg.png").size == (80, 48)
    summary = json.loads((out / "summary.json").read_text())
    reasons = {k.rsplit("/", 1)[-1]: v for k, v in summary["skipped_reasons"].items()}
    assert summary["predicted"] == 2 and "has mode F" in reasons["float.tif"]


def test_an_image_over_pils_pixel_limit_is_named_with_the_option_that_reads_it(tmp_path, monkeypatch):
    from hydra_dense.data.files import ImageFiles, Unreadable

    path = _image(tmp_path / "big.png", 40, 60)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 500)  # 2,400 pixels is over twice the limit: refused
    refused = ImageFiles([path])[0]
    assert isinstance(refused, Unreadable) and "max_image_pixels" in refused.reason
    image, index = ImageFiles([path], max_image_pixels=10_000)[0]
    assert image.shape == (3, 40, 60) and index == 0
    assert Image.MAX_IMAGE_PIXELS == 500  # the option lifts the limit for its own files, not for the process


def test_a_second_predict_run_into_the_same_folder_never_mixes_with_the_first_and_untrained_is_refused(tmp_path):
    """With the logger off both runs' folder is the root itself: the second writes predictions_2. And
    predicting without a checkpoint is refused unless asked for (untrained weights, said plainly)."""
    config = write_config("segmentation", tmp_path)
    root = tmp_path / "run"
    first, second = tmp_path / "first", tmp_path / "second"
    _image(first / "s0.jpg", 24, 20, seed=1)
    _image(first / "s1.jpg", 24, 20, seed=2)
    _image(second / "s0.jpg", 20, 24, seed=3)
    for folder in (first, second):
        ok(train("predict", config, root, "--allow_untrained=true", "--trainer.logger=false",
                 f"--data.init_args.predict_files={folder}"))
    one, two = json.loads((root / "predictions" / "summary.json").read_text()), \
        json.loads((root / "predictions_2" / "summary.json").read_text())
    assert (one["predicted"], two["predicted"]) == (2, 1)
    assert Image.open(root / "predictions" / "s0.png").size == (20, 24)  # the first run's, kept
    assert Image.open(root / "predictions_2" / "s0.png").size == (24, 20)
    refused = train("predict", config, tmp_path / "r", f"--data.init_args.predict_files={first}")
    assert refused.returncode == 2 and "predict: no --ckpt_path" in refused.stderr
    assert "--allow_untrained=true" in refused.stderr


def test_predict_without_files_is_refused_instead_of_keeping_nothing(tmp_path):
    """Without ``predict_files`` the command line would predict the test split and drop the results:
    exit 0 with nothing written. It is refused in one line, and no run folder is left."""
    config = write_config("segmentation", tmp_path)
    refused = train("predict", config, tmp_path / "run", "--allow_untrained=true")
    assert refused.returncode == 2 and "--data.init_args.predict_files=" in refused.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "run").exists()
