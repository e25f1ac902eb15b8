"""Video classification data: Kinetics-style folders, list files (txt / CSV) and frame folders.

Each sample decodes only the frames its clip (or, in evaluation, all its views together) needs,
resized on decode to the transform's short side (``data/video_decode.py``); frame folders read
only the needed files.

Layouts (``layout`` init arg, ``root`` points at the dataset; ``{split}`` is the split name):

- ``kinetics``: ``<root>/<split>/<class>/<video>.mp4`` (also .avi/.mkv/.webm/.mov); classes are
  the sorted folder names of the train split.
- ``list``: ``<root>/<list_file>`` with ``path label`` per line (space or comma separated; a
  CSV header is skipped); ``label`` is an index or a class name; paths are relative to
  ``<root>/<video_dir>``. A path may be a folder of frames.
- ``frames``: ``<root>/<split>/<class>/<video>/`` holding one JPEG/PNG per frame.

Problems name the file: missing, corrupt or truncated videos, videos shorter than the clip,
unknown class names. ``skip_bad: true`` skips such samples instead (counted and reported).
Decoding happens in the worker that needs it, with no locks or subprocesses to hang on.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal, Optional, Sequence, Union

import numpy as np
import torch
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2

from .base import SplitDataModule
from .files import PredictInputs, find_predict_files
from .preflight import file_problems
from .skipping import SkipPolicy
from .video_decode import (IncompleteDecode, VideoError, decode_frames, decode_video, frame_files, index_video,
                           read_frame_files, read_frames, video_problem)
from .video_files import VIDEO_EXTS, find_videos

log = logging.getLogger(__name__)

__all__ = ["VideoError", "decode_video", "read_frames", "VideoClipDataset", "VideoDataModule", "clip_indices",
           "find_videos"]

KINETICS_MEAN = (0.45, 0.45, 0.45)
KINETICS_STD = (0.225, 0.225, 0.225)


def clip_indices(n_frames: int, num_frames: int, stride: int, sampling: str, rng: Optional[np.random.Generator],
                 clip: int = 0, num_clips: int = 1) -> np.ndarray:
    """Frame indices of one clip.

    ``dense``: ``num_frames`` frames ``stride`` apart; the start is random when ``rng`` is given
    (training) or the ``clip``-th of ``num_clips`` evenly spaced starts (evaluation).
    ``uniform``: ``num_frames`` segments over the whole video, one frame per segment (random
    offset in training, the middle in evaluation).
    Raises :class:`VideoError` when the video has fewer frames than a dense clip spans.
    """
    if sampling == "uniform":
        edges = np.linspace(0, n_frames, num_frames + 1)
        if rng is not None:
            return np.minimum((edges[:-1] + rng.random(num_frames) * np.diff(edges)).astype(int), n_frames - 1)
        shift = (clip + 0.5) / num_clips
        return np.minimum((edges[:-1] + shift * np.diff(edges)).astype(int), n_frames - 1)
    span = (num_frames - 1) * stride + 1
    if n_frames < span:
        raise VideoError(f"{n_frames} frames, fewer than a clip of {num_frames} frames x stride {stride} ({span})")
    last = n_frames - span
    start = int(rng.integers(0, last + 1)) if rng is not None else \
        (int(round(last * (clip + 0.5) / num_clips)) if num_clips > 1 else last // 2)
    return start + stride * np.arange(num_frames)


class VideoClipDataset(SkipPolicy, Dataset):
    """``(clip (C, T, H, W) float, label, video index)`` per video; evaluation with ``num_clips`` x
    ``num_crops`` > 1 returns ``(views (V, C, T, H, W), label, index)``.

    Only the frames the views need are decoded (all views of a video in one pass), resized on
    decode to ``short_side`` unless ``resize_on_decode`` is off (then torchvision resizes the
    full-size frames, as without it). ``max_frames`` limits clips to a video's first frames.
    """

    def __init__(self, samples: Sequence[tuple[Path, int]], num_frames: int, frame_stride: int, sampling: str,
                 train: bool, size: int, short_side: int, num_clips: int = 1, num_crops: int = 1,
                 mean=KINETICS_MEAN, std=KINETICS_STD, skip_bad: bool = False,
                 short_videos: Literal["error", "skip", "loop"] = "error", hflip: bool = True,
                 cache_decoded: bool = False, max_frames: Optional[int] = None, resize_on_decode: bool = True) -> None:
        self.samples = list(samples)
        self.hflip = hflip
        self._cache: Optional[dict] = {} if cache_decoded else None  # per worker process
        self.num_frames, self.stride, self.sampling = num_frames, frame_stride, sampling
        self.train, self.size, self.short_side = train, size, short_side
        self.num_clips, self.num_crops = num_clips, num_crops
        self.mean, self.std = mean, std
        self.short_videos, self.max_frames = short_videos, max_frames
        self.decode_short_side = short_side if resize_on_decode else None
        self.init_skipping(skip_bad or short_videos == "skip")

    def __len__(self) -> int:
        return len(self.samples)

    def file_problems(self) -> tuple[list[str], int]:
        """Every video file (or frame folder) exists, is not empty, and opens with at least one frame
        (:func:`~hydra_dense.data.video_decode.video_problem`); files checked."""
        problems: list[str] = []
        for path, _ in self.samples:
            problems += file_problems([path], "video") or [p for p in [video_problem(path)] if p]
        return problems, len(self.samples)

    def _view_indices(self, path: Path, n_frames: int, rng: Optional[np.random.Generator]) -> list[np.ndarray]:
        """Frame indices of each clip of a video of ``n_frames`` frames."""
        span = (self.num_frames - 1) * self.stride + 1
        n_sample = n_frames
        if self.sampling == "dense" and n_frames < span:
            if self.short_videos != "loop":
                raise VideoError(f"video {path} has {n_frames} frames, fewer than a clip of {self.num_frames} "
                                 f"frames x stride {self.stride} ({span}); set short_videos: loop or skip")
            n_sample = span  # the video played on repeat
        n_clips = 1 if self.train else self.num_clips
        return [clip_indices(n_sample, self.num_frames, self.stride, self.sampling, rng, c, n_clips) % n_frames
                for c in range(n_clips)]

    def _whole(self, path: Path) -> np.ndarray:
        """Every frame (up to ``max_frames``) of a video or frame folder."""
        if self._cache is not None and path in self._cache:
            return self._cache[path]
        frames = read_frames(path, self.max_frames) if path.is_dir() else \
            decode_video(path, self.max_frames, self.decode_short_side)
        if self._cache is not None:
            self._cache[path] = frames
        return frames

    def _views_of_whole(self, path: Path, rng: Optional[np.random.Generator]) -> list[np.ndarray]:
        """Each view's frames, selected from the whole decoded video."""
        frames = self._whole(path)
        return [frames[v] for v in self._view_indices(path, len(frames), rng)]

    def _clip_frames(self, path: Path, rng: Optional[np.random.Generator]) -> list[np.ndarray]:
        """Each view's frames, ``(T, H, W, 3)`` uint8, reading only the frames the views need."""
        cap = self.max_frames or np.iinfo(np.int64).max
        if self._cache is not None:
            return self._views_of_whole(path, rng)
        if path.is_dir():
            files = frame_files(path)[:cap]
            views = self._view_indices(path, len(files), rng)
            needed, rows = np.unique(np.concatenate(views), return_inverse=True)
            frames = read_frame_files(files, needed)
        else:
            index = index_video(path)
            try:
                if index is None:
                    raise IncompleteDecode(f"{path}: no frame index")
                views = self._view_indices(path, min(len(index), cap), rng)
                needed, rows = np.unique(np.concatenate(views), return_inverse=True)
                frames = decode_frames(path, needed, index, self.decode_short_side)
            except IncompleteDecode as err:  # odd files: decode them whole, which names what is wrong
                log.debug("decoding %s whole: %s", path, err)
                return self._views_of_whole(path, rng)
        rows = rows.reshape(len(views), -1)
        return [frames[r] for r in rows]

    def _views(self, clips: list[np.ndarray]) -> list[torch.Tensor]:
        out = []
        for frames in clips:
            video = tv_tensors.Video(torch.from_numpy(frames).permute(0, 3, 1, 2))  # (T, C, H, W)
            video = v2.functional.resize(video, self.short_side, antialias=True)  # a no-op after resize on decode
            if self.train:
                video = v2.RandomCrop(self.size)(video)
                if self.hflip and torch.rand(1).item() < 0.5:
                    video = v2.functional.horizontal_flip(video)
                crops = [video]
            else:
                crops = self._eval_crops(video)
            for v in crops:
                v = v2.functional.to_dtype(v, torch.float32, scale=True)
                v = v2.functional.normalize(v, list(self.mean), list(self.std))
                out.append(v.permute(1, 0, 2, 3).contiguous())  # (C, T, H, W)
        return out

    def _eval_crops(self, video: torch.Tensor) -> list[torch.Tensor]:
        if self.num_crops == 1:
            return [v2.functional.center_crop(video, [self.size, self.size])]
        H, W = video.shape[-2:]
        long_axis = max(H, W) - self.size
        out = []
        for i in range(self.num_crops):  # left/centre/right (or top/centre/bottom) crops
            off = int(round(long_axis * i / (self.num_crops - 1)))
            top, left = ((H - self.size) // 2, off) if W >= H else (off, (W - self.size) // 2)
            out.append(v2.functional.crop(video, top, left, self.size, self.size))
        return out

    def load(self, i: int):
        path, label = self.samples[i]
        # training draws from torch's RNG, seeded per sample and epoch by the loader (data/sampling.py);
        # evaluation is deterministic: evenly spaced clips, centre (or tiled) crops
        rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,)))) if self.train else None
        views = self._views(self._clip_frames(path, rng))
        return (views[0] if len(views) == 1 else torch.stack(views)), label, i

    def __getitem__(self, i: int):
        return self.load_or_skip(i, (VideoError,))


def collate_clips(batch):
    batch = [b for b in batch if b is not None]
    if not batch:
        return None
    return (torch.stack([b[0] for b in batch]), torch.tensor([b[1] for b in batch]),
            torch.tensor([b[2] for b in batch]))


class VideoDataModule(SplitDataModule):
    """Video classification data (see the module doc for layouts).

    Args:
        root, layout, list_file, video_dir: where the videos are.
        num_frames, frame_stride, sampling: clip sampling (``dense`` or ``uniform``).
        size / short_side: crop size and the short side frames are resized to first.
        num_clips, num_crops: views per video at test time (scores averaged per video).
        short_videos: ``error`` (default), ``skip`` or ``loop`` for videos shorter than a clip.
        hflip: random horizontal flips in training (turn off when the label depends on
            left/right, e.g. motion direction).
        cache_decoded: decode each video whole once and keep it in memory (per worker) — for
            small datasets only; otherwise each sample decodes only the frames its clips need.
        max_frames: sample clips from the first ``max_frames`` frames of each video only.
        resize_on_decode: scale frames down to ``short_side`` while decoding (FFmpeg's area
            filter), so memory follows the clip and not the file; off: decode at full size and
            let torchvision resize (antialiased bilinear).
        skip_bad: skip missing / corrupt videos instead of raising (counted, reported).
        num_classes: checked against the classes found (set it to catch a wrong dataset).
        seed: seed of the training order and augmentation; None follows ``seed_everything``.
        predict_files: videos (or frame folders, layout ``frames``) for ``predict`` instead of the
            test split: folders (recursive), globs or files; scored like the test split
            (``num_clips`` x ``num_crops`` views); unreadable ones are named, skipped and counted.
    """

    provides = "video"

    def __init__(
        self,
        root: str,
        layout: Literal["kinetics", "list", "frames"] = "kinetics",
        num_classes: Optional[int] = None,
        list_file: str = "{split}.txt",
        video_dir: str = "",
        num_frames: int = 16,
        frame_stride: int = 4,
        sampling: Literal["dense", "uniform"] = "dense",
        size: int = 224,
        short_side: int = 256,
        num_clips: int = 1,
        num_crops: int = 1,
        val_num_clips: int = 1,
        hflip: bool = True,
        cache_decoded: bool = False,
        max_frames: Optional[int] = None,
        resize_on_decode: bool = True,
        batch_size: int = 8,
        val_batch_size: int = 8,
        num_workers: int = 2,
        train_split: str = "train",
        val_split: str = "val",
        test_split: Optional[str] = None,
        short_videos: Literal["error", "skip", "loop"] = "error",
        skip_bad: bool = False,
        mean: tuple[float, float, float] = KINETICS_MEAN,
        std: tuple[float, float, float] = KINETICS_STD,
        seed: Optional[int] = None,
        predict_files: Union[str, list[str], None] = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.check_loader_settings()
        self.root = self.dataset_root(root)
        self.datasets: dict[str, VideoClipDataset] = {}
        self.class_names: Optional[list[str]] = None
        self.ignored: dict[str, list[Path]] = {}  # per split: files the layout does not read

    def _dataset(self, split: str, train: bool, clips: int, crops: int) -> VideoClipDataset:
        h = self.hparams
        self.ignored[split] = []
        samples, classes = find_videos(self.root, h.layout, split, h.list_file, h.video_dir, self.class_names,
                                       self.ignored[split])
        if self.class_names is None:
            self.class_names = classes
            if h.num_classes is not None and h.num_classes != len(classes):
                raise ValueError(f"data.num_classes={h.num_classes} but {len(classes)} classes were found under "
                                 f"{self.root} ({', '.join(classes[:5])}…)")
        return VideoClipDataset(samples, h.num_frames, h.frame_stride, h.sampling, train, h.size, h.short_side,
                                clips, crops, h.mean, h.std, h.skip_bad, h.short_videos, h.hflip, h.cache_decoded,
                                h.max_frames, h.resize_on_decode)

    def setup(self, stage: Optional[str] = None) -> None:
        h = self.hparams
        if "train" not in self.datasets and stage in (None, "fit"):
            self.datasets["train"] = self._dataset(h.train_split, True, 1, 1)
        if "val" not in self.datasets and stage in (None, "fit", "validate"):
            self.datasets["val"] = self._dataset(h.val_split, False, h.val_num_clips, 1)
        if "test" not in self.datasets and stage in (None, "test", "predict"):
            self.datasets["test"] = self._dataset(h.test_split or h.val_split, False, h.num_clips, h.num_crops)
        self.check_files(stage)

    def data_report(self) -> str:
        """Files the layout ignored, per split (empty when none)."""
        kind = "video" if self.hparams.layout == "kinetics" else "frame folder"
        return "\n".join(f"{split}: {len(files)} file(s) ignored (not a {kind}), e.g. "
                         f"{', '.join(p.name for p in files[:3])}" for split, files in self.ignored.items() if files)

    def describe(self) -> str:
        """One line for tables: where the clips come from and how many."""
        h = self.hparams
        self.setup("fit")
        return (f"{self.root} ({h.layout}): {len(self.datasets['train'])} train / {len(self.datasets['val'])} val "
                f"clips, {h.num_frames} frames at {h.size}px")

    def collate_fn(self):
        return collate_clips

    @property
    def predict_batch_size(self) -> int:
        return self.hparams.val_batch_size

    def predict_files_dataset(self, files) -> VideoClipDataset:
        h = self.hparams
        self.setup("predict")  # the class names, from the test split's listing
        found = find_predict_files(files, VIDEO_EXTS, folders_as_files=h.layout == "frames")
        dataset = VideoClipDataset([(f, -1) for f in found], h.num_frames, h.frame_stride, h.sampling, False, h.size,
                                   h.short_side, h.num_clips, h.num_crops, h.mean, h.std, True, h.short_videos,
                                   hflip=False, max_frames=h.max_frames, resize_on_decode=h.resize_on_decode)
        dataset.inputs = PredictInputs(found)
        return dataset

    def predict_collate_fn(self):
        return collate_clips
