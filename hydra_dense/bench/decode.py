"""Video decoding cost per sample: the whole file vs only the frames a clip needs.

Two sampling cases, as the video data module draws them:

- ``train``: one clip of ``num_frames`` frames ``stride`` apart at a random start;
- ``eval``: ``num_clips`` evenly spaced clips (their crops share the frames, so crops cost no
  decoding).

Three ways to get the clip's frames at ``short_side`` as uint8, the input of the transforms:

- ``whole file``: decode and convert every frame to RGB, select, resize with torchvision;
- ``seek``: index, seek, decode the needed stretch, convert the kept frames, resize with torchvision;
- ``seek + resize on decode``: the same, resized by FFmpeg while converting (the data module's default).

Time is the median over clips drawn alike for each way (round-robin), frame counts their mean;
peak memory is the rise of the resident set of a fresh process over one sample.
"""
from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Optional

import av
import numpy as np
import torch
from torchvision.transforms.v2 import functional as F

from ..data.video import clip_indices
from ..data.video_decode import decode_frames, decode_video, index_video
from .memory import peak_memory_mb_isolated
from .timing import interleaved_medians

__all__ = ["DECODE_COLUMNS", "write_test_video", "bench_decode"]

DECODE_COLUMNS = ["case", "method", "views", "ms_per_sample", "ms_per_view", "frames_decoded", "frames_kept",
                  "peak_mem_mb", "speedup_vs_whole", "memory_vs_whole"]
METHODS = ("whole file", "seek", "seek + resize on decode")


def write_test_video(path: str | Path, seconds: float = 10, fps: int = 30, width: int = 1280, height: int = 720,
                     gop: Optional[int] = None) -> Path:
    """An H.264 file (libx264, default settings but ``gop``: keyframe interval, None = x264's 250)
    of a textured scene panning under a moving square, so that no two frames are alike."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx * 255 // width, yy * 255 // height, np.full_like(xx, 90)], -1).astype(np.uint8)
    noise = rng.integers(0, 30, (height, width, 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"crf": "23", "preset": "veryfast", **({"g": str(gop)} if gop else {})}
        for i in range(int(seconds * fps)):
            f = np.roll(base, 4 * i, axis=1) + np.roll(noise, i, axis=0) // 2
            x = (10 * i) % (width - height // 4)
            f[height // 4:height // 2, x:x + height // 4] = 250
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _resize(frames: np.ndarray, short_side: int) -> torch.Tensor:
    return F.resize(torch.from_numpy(frames).permute(0, 3, 1, 2), short_side, antialias=True)


def _sample(path: str, method: str, indices: np.ndarray, short_side: int, stats: Optional[dict] = None):
    """One sample's frames at ``short_side``, the way ``method`` gets them."""
    if method == "whole file":
        frames = decode_video(path)
        if stats is not None:
            stats.update(decoded=len(frames), kept=len(frames))
        return _resize(frames[indices], short_side)
    needed = np.unique(indices)
    on_decode = method == "seek + resize on decode"
    frames = decode_frames(path, needed, index_video(path), short_side if on_decode else None, stats)
    if stats is not None:
        stats["kept"] = len(needed)
    out = frames[np.searchsorted(needed, indices)]
    return torch.from_numpy(out) if on_decode else _resize(out, short_side)


def _clips(n_frames: int, case: str, num_frames: int, stride: int, num_clips: int, count: int) -> list[np.ndarray]:
    """The frame indices of ``count`` samples (training: random starts, fixed seed)."""
    if case == "eval":
        return [np.concatenate([clip_indices(n_frames, num_frames, stride, "dense", None, c, num_clips)
                                for c in range(num_clips)])]
    rng = np.random.default_rng(0)
    return [clip_indices(n_frames, num_frames, stride, "dense", rng) for _ in range(count)]


def _memory_step(path: str, method: str, indices: np.ndarray, short_side: int):
    return functools.partial(_sample, path, method, indices, short_side)


def bench_decode(path: str | Path, num_frames: int = 16, stride: int = 4, num_clips: int = 5, num_crops: int = 3,
                 short_side: int = 256, repeats: int = 5, memory: bool = True) -> list[dict]:
    """Rows of :data:`DECODE_COLUMNS` for the ``train`` and ``eval`` cases of one video file."""
    path = str(path)
    n_frames = len(index_video(path))
    rows = []
    for case in ("train", "eval"):
        clips = _clips(n_frames, case, num_frames, stride, num_clips, repeats + 1)
        views = 1 if case == "train" else num_clips * num_crops
        stats: dict[str, list[dict]] = {m: [] for m in METHODS}
        cycles = {m: itertools.cycle(clips) for m in METHODS}

        def call(m: str) -> None:
            stats[m].append({})
            _sample(path, m, next(cycles[m]), short_side, stats[m][-1])

        seconds = interleaved_medians({m: functools.partial(call, m) for m in METHODS}, warmup=1, repeats=repeats)
        peaks = {m: peak_memory_mb_isolated(functools.partial(_memory_step, path, m, clips[0], short_side))
                 if memory else float("nan") for m in METHODS}
        for m in METHODS:
            peak = peaks[m] if isinstance(peaks[m], float) else float("nan")
            whole_peak = peaks["whole file"] if isinstance(peaks["whole file"], float) else float("nan")
            rows.append(dict(case=case, method=m, views=views, ms_per_sample=seconds[m] * 1e3,
                             ms_per_view=seconds[m] * 1e3 / views,
                             frames_decoded=float(np.mean([s["decoded"] for s in stats[m]])),
                             frames_kept=float(np.mean([s["kept"] for s in stats[m]])), peak_mem_mb=peak,
                             speedup_vs_whole=seconds["whole file"] / seconds[m],
                             memory_vs_whole=whole_peak / peak if peak > 0 else float("nan")))
    return rows
