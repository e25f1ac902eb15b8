"""Segmentation: dataset layouts, bad input, sliding window, a real learning signal, YAML configs."""

import lightning as L
import numpy as np
import pytest
import torch
from PIL import Image

from hydra_dense.data.preflight import DataFilesError
from hydra_dense.data.segmentation import SampleError, SegmentationDataModule, collate_segmentation
from hydra_dense.tasks import SegmentationTask
from tests.helpers.images import make_ade, scene, tiny_backbone, write
from tests.helpers.tiny_runs import ROOT


def test_ade20k_layout_and_reduce_zero_label(tmp_path):
    root = make_ade(tmp_path / "ade", zero_label=True)
    dm = SegmentationDataModule(str(root), "ade20k", num_classes=4, reduce_zero_label=True, crop_size=(24, 24),
                                batch_size=4, num_workers=0)
    dm.setup("fit")
    assert len(dm.datasets["train"]) == 24 and len(dm.datasets["val"]) == 8
    _, mask = dm.datasets["val"].load(0)
    raw = np.asarray(Image.open(dm.datasets["val"].pairs[0][1])).astype(np.int64)
    assert torch.equal(mask, torch.from_numpy(raw - 1))  # no zeros in raw: every label shifts down
    imgs, masks, pad, idx = next(iter(dm.train_dataloader()))
    assert imgs.shape == (4, 3, 24, 24) and masks.shape == (4, 24, 24) and masks.dtype == torch.int64
    assert set(masks.unique().tolist()) <= {0, 1, 2, 3, 255}


def test_cityscapes_layout(tmp_path):
    rng = np.random.default_rng(1)
    root = tmp_path / "cityscapes"
    for split in ("train", "val"):
        for city in ("aachen", "bonn"):
            img, mask = scene(rng)
            write(root / "leftImg8bit" / split / city / f"{city}_000000_000019_leftImg8bit.png", img)
            write(root / "gtFine" / split / city / f"{city}_000000_000019_gtFine_labelTrainIds.png", mask)
            write(root / "gtFine" / split / city / f"{city}_000000_000019_gtFine_labelIds.png", mask + 7)
    dm = SegmentationDataModule(str(root), "cityscapes", num_classes=19, crop_size=(16, 16), num_workers=0)
    dm.setup("fit")
    pairs = dm.datasets["val"].pairs
    assert len(pairs) == 2 and all(p[1].name.endswith("_gtFine_labelTrainIds.png") for p in pairs)


def test_generic_folders_with_split_list(tmp_path):
    rng = np.random.default_rng(2)
    root = tmp_path / "mine"
    for i in range(6):
        img, mask = scene(rng)
        write(root / "img_dir" / "train" / f"s{i}.png", img)
        write(root / "ann_dir" / "train" / f"s{i}.png", mask)
    (root / "splits").mkdir()
    (root / "splits" / "train.txt").write_text("s1\ns3\n")
    (root / "splits" / "val.txt").write_text("s5\n")
    dm = SegmentationDataModule(str(root), "folders", num_classes=4, split_file="splits/{split}.txt",
                                image_dir="img_dir/train", mask_dir="ann_dir/train", num_workers=0)
    dm.setup("fit")
    assert [p[0].stem for p in dm.datasets["train"].pairs] == ["s1", "s3"]
    assert [p[0].stem for p in dm.datasets["val"].pairs] == ["s5"]


def test_bad_input_names_the_file_or_setting(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.root: dataset folder .*nowhere does not exist"):
        SegmentationDataModule(str(tmp_path / "nowhere"))
    root = make_ade(tmp_path / "ade", n_train=3, n_val=0)
    (root / "images" / "validation").mkdir(parents=True, exist_ok=True)
    (root / "annotations" / "validation").mkdir(parents=True, exist_ok=True)
    dm = SegmentationDataModule(str(root), num_classes=4, num_workers=0)
    with pytest.raises(ValueError, match="ade20k val split is empty: no images in .*validation"):
        dm.setup("validate")

    ds = SegmentationDataModule(str(root), num_classes=4, num_workers=0)._dataset("train", train=False)
    # mask of another size
    write(ds.pairs[0][1], np.zeros((20, 32), np.uint8))
    with pytest.raises(SampleError, match=r"ADE_0000.jpg is 32x32 but mask .*ADE_0000.png is 32x20"):
        ds[0]
    # label ids outside num_classes
    write(ds.pairs[1][1], np.full((32, 32), 7, np.uint8))
    with pytest.raises(SampleError, match=r"ADE_0001.png has label ids \[7\] outside \[0, 4\)"):
        ds[1]
    # unreadable image
    ds.pairs[2][0].write_bytes(b"garbage")
    with pytest.raises(SampleError, match="cannot read image .*ADE_0002.jpg"):
        ds[2]
    # missing masks: listed together by the pre-check, with the other problems
    (root / "annotations" / "training" / "ADE_0002.png").unlink()
    (root / "annotations" / "training" / "ADE_0000.png").unlink()
    dm = SegmentationDataModule(str(root), num_classes=4, num_workers=0)
    dm.datasets["train"] = dm._dataset("train", train=True)
    with pytest.raises(DataFilesError, match=r"(?s)mask .*ADE_0000.png does not exist.*mask .*ADE_0002.png does not exist"):
        dm.check_files("fit")


def test_skip_bad_skips_images_whose_mask_is_missing(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=4, n_val=2)
    (root / "annotations" / "training" / "ADE_0001.png").unlink()
    dm = SegmentationDataModule(str(root), num_classes=4, num_workers=0, skip_bad=True, batch_size=2,
                                crop_size=(16, 16))
    dm.setup("fit")
    batches = list(torch.utils.data.DataLoader(dm.datasets["train"], batch_size=4, collate_fn=collate_segmentation))
    assert 1 not in batches[0][3].tolist() and len(batches[0][3]) == 3
    assert dm.skipped_report() == {"train": 1}


def test_skip_bad_counts_and_reports(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=4, n_val=2)
    dm = SegmentationDataModule(str(root), num_classes=4, num_workers=0, skip_bad=True, batch_size=4,
                                crop_size=(16, 16))
    dm.setup("fit")
    dm.datasets["train"].pairs[1][0].write_bytes(b"garbage")
    imgs, masks, pad, idx = next(iter(torch.utils.data.DataLoader(
        dm.datasets["train"], batch_size=4, collate_fn=collate_segmentation)))
    assert imgs.shape[0] == 3 and 1 not in idx.tolist()
    assert dm.skipped_report() == {"train": 1}


def test_collate_pads_with_ignore_and_marks_padding():
    a = (torch.ones(3, 4, 6), torch.zeros(4, 6, dtype=torch.int64), 0)
    b = (torch.ones(3, 5, 3), torch.ones(5, 3, dtype=torch.int64), 1)
    imgs, masks, pad, idx = collate_segmentation([a, None, b], ignore_index=255)
    assert imgs.shape == (2, 3, 5, 6) and masks[0, 4, 0] == 255 and masks[1, 0, 4] == 255
    assert pad[0, 4].all() and not pad[0, :4].any() and pad[1, :, 3:].all()
    assert idx.tolist() == [0, 1]


@pytest.mark.parametrize("head", ["uper", "linear", "setr_naive"])
def test_slide_labels_equal_whole_when_one_window_covers_and_average_overlapping_windows(head):
    task = SegmentationTask(tiny_backbone(out_indices=[0, 1]), num_classes=4, decode_head=head, head_channels=16,
                            inference="slide", slide_crop=(48, 64), slide_stride=(32, 32)).eval()
    x = torch.randn(2, 3, 40, 56)
    pad = torch.zeros(2, 40, 56, dtype=torch.bool)
    pad[1, 32:], pad[1, :, 40:] = True, True  # the second image is 32 x 40, padded
    with torch.no_grad():
        torch.testing.assert_close(task.slide_labels(x[:1]), task(x[:1]).argmax(1))
        labels = task.slide_labels(x, pad)
        torch.testing.assert_close(labels[1, :32, :40], task(x[1:, :, :32, :40]).argmax(1)[0])  # its own part only
        # overlapping windows: each pixel's class scores averaged over the windows covering it, by hand
        task.hparams.slide_crop, task.hparams.slide_stride = (24, 24), (16, 16)
        total, count = torch.zeros(4, 40, 56), torch.zeros(1, 40, 56)
        for y in (0, 16):
            for x0 in (0, 16, 32):
                total[:, y:y + 24, x0:x0 + 24] += task(x[:1, :, y:y + 24, x0:x0 + 24])[0]
                count[:, y:y + 24, x0:x0 + 24] += 1
        torch.testing.assert_close(task.slide_labels(x[:1])[0], (total / count).argmax(0))


def test_training_raises_miou(tmp_path):
    """A real learning signal: validation mIoU after 60 steps is far above before training."""
    root = make_ade(tmp_path / "ade", n_train=32, n_val=8)
    L.seed_everything(0)
    dm = SegmentationDataModule(str(root), num_classes=4, crop_size=(32, 32), scale_range=(1.0, 1.0),
                                photometric=False, batch_size=8, val_batch_size=8, num_workers=0)
    task = SegmentationTask(tiny_backbone(plan="hydra"), num_classes=4, decode_head="linear", lr=3e-3,
                            warmup_steps=5, layer_decay=1.0, head_lr_mult=1.0, num_overlays=1)
    trainer = L.Trainer(max_steps=60, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        num_sanity_val_steps=0, check_val_every_n_epoch=100)
    before = trainer.validate(task, datamodule=dm, verbose=False)[0]["val_mIoU"]
    trainer.fit(task, datamodule=dm)
    after = trainer.validate(task, datamodule=dm, verbose=False)[0]
    assert after["val_mIoU"] > before + 0.3, (before, after)
    assert after["val_mIoU"] > 0.5 and after["val_pixel_acc"] > 0.85
    assert "| class_1 |" in task.per_class_table()
    assert list((tmp_path / "overlays").glob("*.png")), "validation overlays are written as PNG"


def test_backbone_swap_from_command_line(tmp_path):
    from hydra_dense.cli import main

    root = make_ade(tmp_path / "data", n_train=2, n_val=1)
    cfg = ROOT / "configs" / "segmentation" / "demo_digits.yaml"
    swap = ROOT / "configs" / "backbones" / "vit_s16_hydra.yaml"
    cli = main(["--config", str(cfg), f"--data.init_args.root={root}", f"--model.init_args.backbone={swap}",
                f"--trainer.default_root_dir={tmp_path}"], run=False)
    assert cli.model.backbone.attention_kinds == ["hydra"] * 12 and cli.model.backbone.patch_size == 16


def _fit_one_step(task, dm, tmp_path):
    trainer = L.Trainer(max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(task, datamodule=dm)


def test_model_and_data_class_counts_must_match_before_training(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=4, n_val=2)
    dm = SegmentationDataModule(str(root), num_classes=4, crop_size=(32, 32), batch_size=2, num_workers=0)
    task = SegmentationTask(tiny_backbone(), num_classes=6, decode_head="linear", head_channels=16)
    with pytest.raises(ValueError, match=r"model.num_classes=6 but the data \(SegmentationDataModule at .*ade\) has 4 "
                                         r"classes .*set --model.init_args.num_classes=4"):
        _fit_one_step(task, dm, tmp_path)


@pytest.mark.parametrize("text, reduce_zero, message", [
    ('["a", "b", ', False, r"classes.json: not valid JSON"),
    ('{"classes": "a,b,c,d"}', False, r"classes.json: expected a list of class names"),
    ('["a", "b", "c"]', False, r"classes.json names 3 classes but data.num_classes=4"),
    ('["other", "a", "b"]', True, r"classes.json names 3 classes but data.num_classes=4 \(reduce_zero_label"),
])
def test_a_bad_classes_json_is_an_error_naming_it(text, reduce_zero, message, tmp_path):
    root = make_ade(tmp_path / "ade", n_train=2, n_val=1)
    (root / "classes.json").write_text(text)
    with pytest.raises(ValueError, match=message):
        SegmentationDataModule(str(root), num_classes=4, reduce_zero_label=reduce_zero, num_workers=0)


def test_classes_json_with_the_ignored_zero_label_first_is_read(tmp_path):
    root = make_ade(tmp_path / "ade", n_train=2, n_val=1)
    (root / "classes.json").write_text('{"classes": ["other", "a", "b", "c", "d"]}')
    dm = SegmentationDataModule(str(root), num_classes=4, reduce_zero_label=True, num_workers=0)
    assert dm.class_names == ["a", "b", "c", "d"]


@pytest.mark.parametrize("suffix, mode", [(".jpg", "RGB"), (".png", "L")])
def test_exif_orientation_is_applied_to_images_and_masks(suffix, mode, tmp_path):
    """A phone photo is stored 40 wide x 20 high with orientation 6 (shown rotated 90° clockwise):
    it is read upright, 20 wide x 40 high, with the stored top-left pixel at the top-right."""
    from hydra_dense.data.files import read_image

    stored = np.zeros((20, 40, 3) if mode == "RGB" else (20, 40), np.uint8)
    stored[:4, :4] = 255
    im = Image.fromarray(stored)
    exif = im.getexif()
    exif[0x0112] = 6  # Orientation: rotate 90 CW to display
    path = tmp_path / f"photo{suffix}"
    im.save(path, exif=exif, **({"quality": 100} if suffix == ".jpg" else {}))
    upright = read_image(path, mode=mode if mode == "RGB" else None)
    assert upright.shape[:2] == (40, 20)
    assert upright[:4, -4:].mean() > 200 and upright[-4:, :4].mean() < 50


def test_skipped_samples_are_reported_once_per_fit_and_kept_in_the_run_folder(tmp_path, caplog):
    import json

    from hydra_dense.runtime import DataReport

    root = make_ade(tmp_path / "ade", n_train=4, n_val=2)
    dm = SegmentationDataModule(str(root), num_classes=4, num_workers=0, skip_bad=True, batch_size=4,
                                crop_size=(16, 16))
    sorted((root / "images" / "training").glob("*.jpg"))[1].write_bytes(b"garbage")
    task = SegmentationTask(tiny_backbone(), num_classes=4, decode_head="linear", head_channels=16)
    trainer = L.Trainer(max_steps=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path / "run",
                        num_sanity_val_steps=0, limit_val_batches=0, callbacks=[DataReport()])
    with caplog.at_level("INFO"):
        trainer.fit(task, datamodule=dm)
    report = json.loads((tmp_path / "run" / "data_report.json").read_text())
    assert report["skipped_samples"] == {"train": 2, "val": 0}  # the bad image, once in each of the 2 epochs
    assert caplog.text.count("skipped unreadable samples (skip_bad): train 2") == 1


def test_masks_without_a_labelled_pixel_are_named_not_turned_into_nan(tmp_path):
    """Every mask pixel 255 (ignore): validation says its mIoU is undefined and why; training skips
    such batches with a warning naming the cause, and refuses when no batch has a labelled pixel."""
    root = make_ade(tmp_path / "ade", n_train=8, n_val=2)
    for mask in (root / "annotations").rglob("*.png"):
        Image.fromarray(np.full((32, 32), 255, np.uint8)).save(mask)
    dm = SegmentationDataModule(str(root), num_classes=4, crop_size=(32, 32), batch_size=2, val_batch_size=2,
                                num_workers=0)
    task = SegmentationTask(tiny_backbone(plan="hydra"), num_classes=4, decode_head="linear", warmup_steps=1)
    trainer = L.Trainer(max_steps=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        num_sanity_val_steps=0, limit_val_batches=0)
    with pytest.warns(UserWarning, match="every mask pixel of the batch is ignore_index=255"):
        with pytest.raises(ValueError, match="the first 3 training batches hold no labelled pixel"):
            trainer.fit(task, datamodule=dm)
    assert all(torch.isfinite(p).all() for p in task.parameters())
    with pytest.warns(UserWarning, match="validation: no mask holds a labelled pixel"):
        validator = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
        validator.validate(task, datamodule=dm, verbose=False)
