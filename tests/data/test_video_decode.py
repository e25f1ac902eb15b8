"""Clip decoding that reads only what a clip needs: identical to selecting from the whole file."""
from fractions import Fraction

import numpy as np
import pytest
import torch

av = pytest.importorskip("av")

from hydra_dense.data import video as video_module  # noqa: E402
from hydra_dense.data import video_decode  # noqa: E402
from hydra_dense.data.video import VideoClipDataset, VideoDataModule, clip_indices  # noqa: E402
from hydra_dense.data.video_decode import decode_frames, decode_video, decoded_size, index_video  # noqa: E402


def moving_frames(n: int, h: int = 40, w: int = 48, seed: int = 0) -> np.ndarray:
    """Textured frames with a moving square, so that neighbouring frames differ."""
    rng = np.random.default_rng(seed)
    texture = rng.integers(0, 120, (h, w, 3))
    out = []
    for i in range(n):
        f = np.roll(texture, 2 * i, axis=1).copy()
        f[8:20, (3 * i) % (w - 12):(3 * i) % (w - 12) + 12] = 240
        out.append(f.astype(np.uint8))
    return np.stack(out)


def encode(path, frames: np.ndarray, gop: int = 8, pts=None, fmt=None) -> None:
    """H.264 with B-frames and a keyframe every ``gop`` frames; ``pts`` in ms gives a variable rate."""
    with av.open(str(path), "w", format=fmt) as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = {"g": str(gop), "keyint_min": str(gop), "bf": "3", "crf": "20"}
        if pts is not None:
            stream.codec_context.time_base = Fraction(1, 1000)
        for i, f in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(f, format="rgb24")
            if pts is not None:
                frame.pts, frame.time_base = int(pts[i]), Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.fixture(scope="module")
def gop_video(tmp_path_factory):
    path = tmp_path_factory.mktemp("dec") / "gop8.mp4"
    encode(path, moving_frames(64))
    return path


def test_index_has_every_frame_in_display_order_and_the_keyframes(gop_video):
    index = index_video(gop_video)
    assert len(index) == 64 and np.all(np.diff(index.pts) > 0)
    assert len(index.key_pts) >= 64 // 8 and index.key_pts[0] == index.pts[0]
    with av.open(str(gop_video)) as c:  # the reference: timestamps of a plain full decode
        assert index.pts.tolist() == [f.pts for f in c.decode(video=0)]


@pytest.mark.parametrize("short_side", [None, 24])
def test_seeking_decode_is_identical_to_selecting_from_the_whole_file(gop_video, short_side):
    whole = decode_video(gop_video, short_side=short_side)
    assert whole.shape[1:3] == ((40, 48) if short_side is None else (24, 28))
    index = index_video(gop_video)
    rng = np.random.default_rng(0)
    cases = [clip_indices(64, 8, 2, "dense", rng) for _ in range(6)]
    cases += [np.unique(np.concatenate([clip_indices(64, 8, 2, "dense", None, c, 3) for c in range(3)]))]
    cases += [np.array([63]), np.array([0]), np.array([16]), np.array([15, 15, 40, 2])]  # last, first, keyframe, repeats
    for idx in cases:
        np.testing.assert_array_equal(decode_frames(gop_video, idx, index, short_side), whole[idx])


def test_a_late_clip_decodes_from_its_keyframe_and_converts_only_its_frames(gop_video, monkeypatch):
    converted = []
    real = video_decode._RGB.__call__
    monkeypatch.setattr(video_decode._RGB, "__call__", lambda self, f: converted.append(f.pts) or real(self, f))
    stats = {}
    decode_frames(gop_video, np.arange(50, 58, 2), index_video(gop_video), stats=stats)
    assert len(converted) == 4
    assert stats["decoded"] <= 8 + 8  # at most the GOP before frame 50, then up to frame 56


def test_variable_frame_rate_and_a_container_without_frame_count(tmp_path):
    frames = moving_frames(24)
    pts = np.cumsum([0] + [33, 33, 80, 10, 200] * 4 + [33, 33, 33])[:24]
    path = tmp_path / "vfr.mkv"
    encode(path, frames, gop=6, pts=pts, fmt="matroska")
    with av.open(str(path)) as c:
        assert c.streams.video[0].frames == 0  # Matroska headers carry no frame count
    index = index_video(path)
    whole = decode_video(path)
    assert len(index) == len(whole) == 24
    for idx in ([20, 21, 22, 23], [3, 4, 5], [0, 12]):
        np.testing.assert_array_equal(decode_frames(path, idx, index), whole[idx])


def test_decoded_size_matches_torchvision_rounding():
    from torchvision.transforms.v2 import functional as F

    for w, h in [(1280, 720), (720, 1280), (641, 479), (300, 300)]:
        out = F.resize(torch.zeros(1, 3, h, w, dtype=torch.uint8), 256, antialias=True)
        assert decoded_size(w, h, 256) == (out.shape[-1], out.shape[-2])
    assert decoded_size(200, 100, 256) == (200, 100)  # never scaled up on decode


def _eval_dataset(path, **kw):
    return VideoClipDataset([(path, 0)], num_frames=8, frame_stride=2, sampling="dense", train=False, size=24,
                            short_side=28, num_clips=3, num_crops=3, **kw)


def test_multi_view_evaluation_decodes_each_video_once_and_matches_whole_decoding(gop_video, monkeypatch):
    calls = []
    real = video_module.decode_frames
    monkeypatch.setattr(video_module, "decode_frames", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    views, _, _ = _eval_dataset(gop_video)[0]
    assert views.shape == (9, 3, 8, 24, 24) and len(calls) == 1
    whole, _, _ = _eval_dataset(gop_video, cache_decoded=True)[0]  # decodes the whole file, then selects
    torch.testing.assert_close(views, whole, rtol=0, atol=0)


def test_resize_on_decode_is_close_to_torchvision_resizing(gop_video):
    fast, _, _ = _eval_dataset(gop_video)[0]
    full_size, _, _ = _eval_dataset(gop_video, resize_on_decode=False)[0]
    assert (fast - full_size).abs().mean() < 0.1  # normalised units: FFmpeg area vs antialiased bilinear


def test_max_frames_limits_the_frames_clips_come_from(gop_video, monkeypatch):
    seen = []
    real = video_module.decode_frames
    monkeypatch.setattr(video_module, "decode_frames", lambda *a, **k: seen.append(np.asarray(a[1])) or real(*a, **k))
    ds = VideoClipDataset([(gop_video, 0)], num_frames=4, frame_stride=2, sampling="dense", train=True, size=24,
                          short_side=28, max_frames=12)
    for _ in range(8):
        ds[0]
    assert max(s.max() for s in seen) < 12 and len({s.min() for s in seen}) > 1


def test_a_truncated_file_whose_header_lies_falls_back_to_whole_decoding(tmp_path):
    path = tmp_path / "full.mp4"
    with av.open(str(path), "w", options={"movflags": "faststart"}) as container:  # header first, claims 64
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 48, 40, "yuv420p"
        stream.options = {"g": "8"}
        for f in moving_frames(64):
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with av.open(str(cut)) as c:
        assert c.streams.video[0].frames == 64
    available = len(decode_video(cut))
    assert 0 < available < 64
    views, _, _ = _eval_dataset(cut)[0]
    whole, _, _ = _eval_dataset(cut, cache_decoded=True)[0]
    torch.testing.assert_close(views, whole, rtol=0, atol=0)


def test_frame_folders_read_only_the_needed_files(tmp_path, monkeypatch):
    from PIL import Image

    folder = tmp_path / "clip"
    folder.mkdir()
    for i, f in enumerate(moving_frames(40)):
        Image.fromarray(f).save(folder / f"img_{i:05d}.png")
    read = []
    real = video_decode.read_image
    monkeypatch.setattr(video_decode, "read_image", lambda p, *a: read.append(p.name) or real(p, *a))
    views, _, _ = _eval_dataset(folder)[0]
    assert len(read) == len(set(read)) <= 3 * 8 and views.shape == (9, 3, 8, 24, 24)


def test_the_data_seed_sets_the_training_order(tmp_path):
    from hydra_dense.data.demo_video import write_mp4

    for i in range(8):
        write_mp4(tmp_path / "train" / "c" / f"{i}.mp4", moving_frames(8, 32, 32, seed=i))

    def first_batch(seed):
        dm = VideoDataModule(str(tmp_path), num_frames=4, frame_stride=1, size=24, short_side=28, num_workers=0,
                             batch_size=4, seed=seed, val_split="train")
        dm.setup("fit")
        clips, _, idx = next(iter(dm.train_dataloader()))
        return idx.tolist(), clips

    a, b, c = first_batch(1), first_batch(1), first_batch(2)
    assert a[0] == b[0] and torch.equal(a[1], b[1])
    assert a[0] != c[0]
