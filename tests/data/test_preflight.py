"""Bad data is found before the first step, all at once and by name; a run that fails while
training keeps a checkpoint; 16-bit images are scaled, not clipped."""
import json

import numpy as np
import pytest
import yaml
from PIL import Image

from hydra_dense.data import DetectionDataModule, SegmentationDataModule
from hydra_dense.data.files import read_image
from hydra_dense.data.preflight import DataFilesError
from tests.helpers.images import make_ade
from tests.helpers.tiny_runs import train, write_config


def seg_dm(root, **kw):
    return SegmentationDataModule(str(root), "ade20k", num_classes=4, crop_size=(32, 32), num_workers=0,
                                  **dict(dict(batch_size=2), **kw))


def test_every_bad_file_of_every_split_is_named_before_training(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=6, n_val=6)
    val_masks = sorted((root / "annotations" / "validation").glob("*.png"))
    Image.new("L", (40, 30)).save(val_masks[4])                      # the 5th val mask: another size
    Image.new("RGB", (32, 32)).save(val_masks[5])                    # an RGB "label map"
    train_image = sorted((root / "images" / "training").glob("*.jpg"))[3]
    train_image.write_bytes(b"not a jpeg")                           # unreadable
    with pytest.raises(DataFilesError) as caught:
        seg_dm(root).setup("fit")
    text = str(caught.value)
    assert "3 problem(s)" in text
    assert f"val: image {root}/images/validation/ADE_0004.jpg is 32x32 but mask {val_masks[4]} is 40x30" in text
    assert f"val: mask {val_masks[5]} has mode RGB, not a single-channel label map" in text
    assert f"train: image {train_image} cannot be read" in text
    assert "skip_bad=true" in text
    dm = seg_dm(root, skip_bad=True)  # with skip_bad: reported, then skipped when they come up
    dm.setup("fit")
    assert len(dm.datasets["val"]) == 6


def test_a_fit_with_a_bad_late_validation_mask_stops_before_step_one(tmp_path):
    config = write_config("segmentation", tmp_path, steps=4, val_every=2)
    root = yaml.safe_load(config.read_text())["data"]["init_args"]["root"]
    bad = sorted((tmp_path / "segmentation_data" / "annotations" / "validation").glob("*.png"))[-1]
    Image.new("L", (8, 8)).save(bad)
    proc = train("fit", config, tmp_path / "run")
    assert proc.returncode != 0 and root in str(bad)
    assert f"mask {bad} is 8x8" in proc.stderr, proc.stderr[-2000:]
    assert "Epoch 0" not in proc.stdout + proc.stderr and not list((tmp_path / "run").rglob("*.ckpt"))


def test_a_training_split_smaller_than_one_batch_is_refused_with_the_counts(tmp_path):
    config = write_config("segmentation", tmp_path, steps=4, val_every=2)  # 20 training images
    proc = train("fit", config, tmp_path / "run", "--data.init_args.batch_size=32")
    assert proc.returncode != 0
    assert "the training split has 20 sample(s), fewer than one batch of data.init_args.batch_size=32 per " \
           "process (1 process(es))" in proc.stderr, proc.stderr[-2000:]
    assert not list((tmp_path / "run").rglob("*.ckpt"))


def _coco(root, split, boxes_per_image, n=4, missing=()):
    (root / split).mkdir(parents=True, exist_ok=True)
    images, anns = [], []
    for i in range(n):
        name = f"{split}_{i}.png"
        if i not in missing:
            Image.new("RGB", (40, 30), (i * 20, 0, 0)).save(root / split / name)
        images.append(dict(id=i + 1, file_name=name, width=40, height=30))
        for _ in range(boxes_per_image):
            anns.append(dict(id=len(anns) + 1, image_id=i + 1, category_id=1, bbox=[2, 2, 10, 10], area=100, iscrowd=0))
    (root / "annotations").mkdir(exist_ok=True)
    path = root / "annotations" / f"{split}.json"
    path.write_text(json.dumps(dict(images=images, annotations=anns, categories=[dict(id=1, name="thing")])))
    return path


def det_dm(root, **kw):
    return DetectionDataModule(str(root), format="coco", train_json="annotations/train.json",
                               val_json="annotations/val.json", train_images="train", val_images="val",
                               batch_size=2, num_workers=0, **kw)


def test_detection_without_any_box_is_refused_naming_the_file(tmp_path):
    source = _coco(tmp_path, "train", boxes_per_image=0)
    _coco(tmp_path, "val", boxes_per_image=1)
    with pytest.raises(ValueError, match=f"{source}: 4 training images, and none of them has a box"):
        det_dm(tmp_path).setup("fit")
    _coco(tmp_path, "train", boxes_per_image=1, n=2)  # negatives mixed with positives stay allowed
    det_dm(tmp_path).setup("fit")


def test_a_training_set_of_crowd_boxes_only_is_refused_like_an_empty_one(tmp_path):
    source = _coco(tmp_path, "train", boxes_per_image=2)
    data = json.loads(source.read_text())
    for ann in data["annotations"]:
        ann["iscrowd"] = 1
    source.write_text(json.dumps(data))
    _coco(tmp_path, "val", boxes_per_image=1)
    with pytest.raises(ValueError, match=f"{source}: 4 training images, and every one of its 8 boxes is a crowd box"):
        det_dm(tmp_path).setup("fit")


def test_an_image_listed_in_the_coco_json_but_missing_is_named_before_training(tmp_path):
    _coco(tmp_path, "train", boxes_per_image=1)
    source = _coco(tmp_path, "val", boxes_per_image=1, missing=(3,))
    with pytest.raises(DataFilesError, match=f"val: image {tmp_path}/val/val_3.png does not exist \\(listed in "
                                             f"{source}\\)"):
        det_dm(tmp_path).setup("fit")


def test_sixteen_bit_images_are_scaled_not_clipped(tmp_path):
    values = np.array([[0, 257, 32768, 65535]], dtype=np.uint16)
    path = tmp_path / "deep.png"
    Image.fromarray(values).save(path)
    assert Image.open(path).mode.startswith("I")
    rgb = read_image(path)
    assert rgb.shape == (1, 4, 3) and rgb.dtype == np.uint8
    expected = np.round(values.astype(np.float64) * 255 / 65535).astype(np.uint8)  # [0, 1, 128, 255]
    assert (rgb[..., 0] == expected).all() and (rgb[..., 2] == expected).all()


def test_a_run_that_fails_while_training_keeps_a_checkpoint_to_resume_from(tmp_path):
    config = write_config("segmentation", tmp_path, steps=6, val_every=6)
    raise_at = '--trainer.callbacks+={"class_path":"tests.helpers.crash_callbacks.RaiseAt","init_args":{"step":3,"rank":0}}'
    proc = train("fit", config, tmp_path / "run", raise_at, "--checkpoint_every_minutes=60")
    assert proc.returncode != 0 and "injected failure on rank 0 at step 3" in proc.stderr
    import torch

    (ckpt,) = list((tmp_path / "run").rglob("last.ckpt"))
    assert torch.load(ckpt, map_location="cpu", weights_only=False)["global_step"] == 3
    assert "saved" in proc.stderr and "kept for resuming" in proc.stderr and "--ckpt_path last" in proc.stderr


def test_missing_and_empty_videos_are_listed(tmp_path):
    from hydra_dense.data.preflight import file_problems

    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "ok.mp4").write_bytes(b"\x00" * 16)
    problems = file_problems([tmp_path / "ok.mp4", tmp_path / "empty.mp4", tmp_path / "gone.mp4"], "video")
    assert problems == [f"video {tmp_path}/empty.mp4 is empty (0 bytes)", f"video {tmp_path}/gone.mp4 does not exist"]


def test_videos_without_frames_are_listed_before_step_one(tmp_path):
    """A file with no video stream, bytes that are no video, and an empty frame folder are listed by
    the check that runs before training, beside a good video; the good one passes."""
    import av
    import numpy as np

    from hydra_dense.data.video_decode import video_problem

    good, audio_only, garbage, folder = (tmp_path / "good.mp4", tmp_path / "audio.mp4", tmp_path / "garbage.mp4",
                                         tmp_path / "frames_of_nothing")
    with av.open(str(good), "w") as container:
        stream = container.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        for _ in range(3):
            frame = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    with av.open(str(audio_only), "w") as container:
        stream = container.add_stream("aac", rate=16000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        frame.sample_rate = 16000
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)
    garbage.write_bytes(b"\x00" * 64)
    folder.mkdir()
    assert video_problem(good) is None
    assert video_problem(audio_only) == f"video {audio_only} has no video stream"
    assert video_problem(garbage).startswith(f"video {garbage} cannot be opened as a video")
    assert video_problem(folder) == f"frame folder {folder} does not exist or holds no images"

    from hydra_dense.data.video import VideoClipDataset

    dataset = VideoClipDataset.__new__(VideoClipDataset)
    dataset.samples = [(good, 0), (audio_only, 0), (garbage, 1), (folder, 1), (tmp_path / "gone.mp4", 0)]
    problems, checked = dataset.file_problems()
    assert checked == 5 and len(problems) == 4 and f"video {tmp_path}/gone.mp4 does not exist" in problems


def test_an_exif_turned_image_beside_an_upright_mask_is_named_with_its_tag(tmp_path):
    """Both files store 96x64; the JPEG's orientation tag (6: turned 90 degrees) makes it 64x96 when
    read, and masks are not turned: the problem names EXIF, not a size the user never wrote."""
    root = make_ade(tmp_path / "ade", n_train=2, n_val=2)
    image = sorted((root / "images" / "training").glob("*.jpg"))[0]
    mask = root / "annotations" / "training" / (image.stem + ".png")
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.new("RGB", (96, 64), (90, 20, 20)).save(image, exif=exif)
    Image.new("L", (96, 64)).save(mask)
    with pytest.raises(DataFilesError, match=rf"image {image} is stored 96x64 like its mask {mask}, but its EXIF "
                                             r"orientation tag turns it to 64x96 when read, and masks are not turned"):
        seg_dm(root).setup("fit")


def test_modes_without_an_rgb_reading_are_refused_alike_in_training_and_predict(tmp_path):
    from hydra_dense.data.files import ImageFiles, Unreadable

    root = make_ade(tmp_path / "ade", n_train=2, n_val=2)
    for mode, value in (("LAB", (50, 0, 0)), ("F", 0.5)):
        image = sorted((root / "images" / "training").glob("*"))[0]
        image.unlink()
        image = image.with_suffix(".tif")
        Image.new(mode, (32, 32), value).save(image)
        with pytest.raises(DataFilesError, match=rf"image {image} has mode {mode}, not one the readers convert to RGB"):
            SegmentationDataModule(str(root), "folders", num_classes=4, num_workers=0, image_suffix=".tif",
                                   image_dir="images/training", mask_dir="annotations/training").setup("fit")
        refused = ImageFiles([image])[0]
        assert isinstance(refused, Unreadable) and f"has mode {mode}, not one the readers convert to RGB" in refused.reason


def test_an_image_whose_header_claims_billions_of_pixels_is_listed_not_a_traceback(tmp_path):
    import struct
    import zlib

    from hydra_dense.data.preflight import pair_problems
    from tests.helpers.images import make_ade

    root = make_ade(tmp_path / "ade", n_train=2, n_val=1)
    image = root / "images" / "training" / "ADE_0000.png"
    Image.new("RGB", (8, 8)).save(image)
    data = bytearray(image.read_bytes())
    data[16:24] = struct.pack(">II", 60000, 60000)  # the IHDR width and height, its CRC made to match
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF)
    image.write_bytes(bytes(data))
    problems = pair_problems([(image, root / "annotations" / "training" / "ADE_0000.png")])
    assert problems == [f"image {image} is too large to read: Image size (3600000000 pixels) exceeds limit of "
                        f"{2 * Image.MAX_IMAGE_PIXELS} pixels, could be decompression bomb DOS attack."]


def test_a_link_to_nothing_is_named_not_dropped(tmp_path):
    """An image that is a broken symlink was left out of the listing unseen (its mask then had no
    image and the run trained on one sample fewer, exit 0); it is named, with where it points."""
    root = make_ade(tmp_path / "ade", n_train=4, n_val=2)
    image = sorted((root / "images" / "training").glob("*.jpg"))[1]
    image.unlink()
    image.symlink_to(tmp_path / "gone" / "x.jpg")
    with pytest.raises(DataFilesError, match=rf"image {image} is a link to {tmp_path}/gone/x.jpg, which does not exist"):
        seg_dm(root).setup("fit")
