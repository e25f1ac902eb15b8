"""Reading video frames: whole files, or only the frames a clip needs.

Decoding uses PyAV: a maintained FFmpeg binding whose wheels carry their own FFmpeg (H.264
included) and install from PyPI on every platform here; torchvision 0.29 no longer decodes
video, and torchcodec needs a matching system FFmpeg.

A clip of 16 frames from a 10 s, 30 fps video needs 16 of its 300 frames. :func:`decode_frames`
reads only those: the frame timestamps come from the container's packets (:func:`index_video`,
no decoding; the header's frame count is not trusted, so files whose header lies, or that have
none, index the same way), the decoder seeks to the keyframe before the first needed frame,
decodes forward until the last one, skips non-reference frames that no kept frame depends on,
and converts to RGB (optionally resized) only the frames it keeps. Frame ``i`` is the ``i``-th
timestamp in display order, which is what decoding the whole file yields, so variable frame
rates need nothing special. Whatever the fast path cannot vouch for (no timestamps, a frame
that did not come out of the decoder) raises :class:`IncompleteDecode`, and callers fall back
to :func:`decode_video`, which keeps its clear errors for corrupt and truncated files.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from .files import IMAGE_EXTS, read_image

log = logging.getLogger(__name__)

__all__ = ["VideoError", "IncompleteDecode", "VideoIndex", "decode_video", "decode_frames", "index_video",
           "frame_files", "read_frames", "read_frame_files", "decoded_size", "video_problem"]


class VideoError(ValueError):
    """A video that cannot be used (missing, corrupt, too short, unknown class)."""


class IncompleteDecode(RuntimeError):
    """The seeking decoder could not deliver every requested frame; decode the whole file instead."""


def decoded_size(width: int, height: int, short_side: Optional[int]) -> tuple[int, int]:
    """``(width, height)`` with the short side scaled down to ``short_side``, rounded as
    torchvision's ``resize(x, short_side)`` rounds, so that its later resize is a no-op.
    Frames are never scaled up here (torchvision does that, if asked)."""
    if short_side is None or min(width, height) <= short_side:
        return width, height
    if width <= height:
        return short_side, int(short_side * height / width)
    return int(short_side * width / height), short_side


class _RGB:
    """Decoded frames as ``(H, W, 3)`` uint8, resized by FFmpeg (area filter) when ``short_side``
    asks for smaller frames. One scaler serves every frame of a video (building one per frame
    costs a third of the conversion)."""

    def __init__(self, short_side: Optional[int]) -> None:
        self.short_side, self._scaler = short_side, VideoReformatter()

    def __call__(self, frame) -> np.ndarray:
        width, height = decoded_size(frame.width, frame.height, self.short_side)
        return self._scaler.reformat(frame, width, height, "rgb24", interpolation="AREA").to_ndarray()


def video_problem(path: str | Path) -> Optional[str]:
    """What stops ``path`` (a video file or a frame folder that exists) from giving any frame, read
    from its container's header and, where the header holds no frame count, its first packet (about
    1 ms a file); None when it has frames. Corrupt data after the start is found when decoded."""
    path = Path(path)
    if path.is_dir():
        try:
            frame_files(path)
        except VideoError as err:
            return str(err)
        return None
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return f"video {path} has no video stream"
            stream = container.streams.video[0]
            if stream.frames:
                return None
            if any(packet.size for packet in _first_packets(container.demux(stream), 16)):
                return None
            return f"video {path} has no frames"
    except Exception as err:  # av.error.InvalidDataError and friends: not a container PyAV can open
        return f"video {path} cannot be opened as a video ({type(err).__name__}: {err})"


def _first_packets(packets, n: int):
    for i, packet in enumerate(packets):
        if i >= n:
            return
        yield packet


def decode_video(path: str | Path, max_frames: Optional[int] = None, short_side: Optional[int] = None) -> np.ndarray:
    """All frames (or the first ``max_frames``) of a video as ``(N, H, W, 3)`` uint8.

    ``short_side`` scales frames down on decode (see :func:`decoded_size`). A file that breaks
    off part-way returns the frames before the break, with a warning.
    """
    path = Path(path)
    if not path.is_file():
        raise VideoError(f"video {path} does not exist")
    frames = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoError(f"video {path} has no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            to_rgb = _RGB(short_side)
            for frame in container.decode(stream):
                frames.append(to_rgb(frame))
                if max_frames is not None and len(frames) >= max_frames:
                    break
    except VideoError:
        raise
    except Exception as err:  # av.error.InvalidDataError and friends
        if not frames:
            raise VideoError(f"video {path} could not be decoded: {err}") from err
        log.warning("video %s is truncated after %d frames: %s", path, len(frames), err)
    if not frames:
        raise VideoError(f"video {path} has no decodable frames (empty or corrupt)")
    return np.stack(frames)


@dataclass(frozen=True)
class VideoIndex:
    """Where the frames of a video are, read from its packets without decoding.

    ``pts``: (N,) presentation timestamps in display order (frame ``i`` is ``pts[i]``);
    ``key_pts`` / ``key_seek``: (K,) keyframe timestamps, ascending, and the timestamp to seek to
    for each (its decode timestamp where the container has one).
    """

    pts: np.ndarray
    key_pts: np.ndarray
    key_seek: np.ndarray

    def __len__(self) -> int:
        return len(self.pts)


def index_video(path: str | Path) -> Optional[VideoIndex]:
    """The frame index of a video, or ``None`` when its packets cannot vouch for one (missing
    timestamps, duplicates, a read error part-way): then decode the whole file instead."""
    path = Path(path)
    if not path.is_file():
        raise VideoError(f"video {path} does not exist")
    pts, keys = [], []
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoError(f"video {path} has no video stream")
            for packet in container.demux(container.streams.video[0]):
                if packet.size == 0:  # the demuxer's end-of-stream marker
                    continue
                if packet.pts is None:
                    return None
                pts.append(packet.pts)
                if packet.is_keyframe:
                    keys.append((packet.pts, packet.dts if packet.dts is not None else packet.pts))
    except VideoError:
        raise
    except Exception as err:  # corrupt or truncated: the whole-file decoder says what is wrong
        log.debug("indexing %s failed (%s); it will be decoded whole", path, err)
        return None
    if not pts or not keys or len(set(pts)) != len(pts):
        return None
    keys.sort()
    return VideoIndex(np.sort(np.asarray(pts, np.int64)), np.asarray([k[0] for k in keys], np.int64),
                      np.asarray([k[1] for k in keys], np.int64))


def decode_frames(path: str | Path, indices: Sequence[int], index: VideoIndex, short_side: Optional[int] = None,
                  stats: Optional[dict] = None) -> np.ndarray:
    """Frames ``indices`` of a video as ``(len(indices), H, W, 3)`` uint8, decoding only the
    stretch from the keyframe before the first of them to the last of them.

    Identical to ``decode_video(path, short_side=short_side)[indices]``. ``stats`` (optional)
    receives ``decoded``: frames that came out of the decoder. Raises :class:`IncompleteDecode`
    when a requested frame does not come out (the caller then decodes the whole file).
    """
    indices = np.asarray(indices, np.int64)
    wanted = index.pts[indices]
    targets = set(wanted.tolist())
    first = int(wanted.min())
    key = int(np.searchsorted(index.key_pts, first, side="right")) - 1
    got: dict[int, np.ndarray] = {}
    decoded, to_rgb = 0, _RGB(short_side)
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            # frame threading fills a pipeline of frames per thread before the first comes out;
            # for a short stretch that costs more than it saves (measured: 20 % slower per clip)
            stream.thread_type = "SLICE"
            codec = stream.codec_context
            if key > 0:  # at or before the first keyframe, reading from the start is the seek
                container.seek(int(index.key_seek[key]), stream=stream, backward=True)
            for packet in container.demux(stream):
                # a non-reference frame that is not wanted feeds no other frame: don't decode it
                codec.skip_frame = "DEFAULT" if packet.pts is None or packet.pts in targets else "NONREF"
                for frame in codec.decode(packet):
                    decoded += 1
                    if frame.pts in targets and frame.pts not in got:
                        got[frame.pts] = to_rgb(frame)
                if len(got) == len(targets):
                    break
    except Exception as err:  # noqa: BLE001 - anything odd: the whole-file decoder decides
        raise IncompleteDecode(f"{path}: {err}") from err
    if stats is not None:
        stats["decoded"] = decoded
    if len(got) != len(targets):
        raise IncompleteDecode(f"{path}: {len(targets) - len(got)} of {len(targets)} frames did not decode")
    return np.stack([got[t] for t in wanted.tolist()])


def frame_files(folder: str | Path) -> list[Path]:
    """The frame images of a frame folder, sorted by name."""
    folder = Path(folder)
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTS) if folder.is_dir() else []
    if not files:
        raise VideoError(f"frame folder {folder} does not exist or holds no images")
    return files


def read_frame_files(files: Sequence[Path], indices: Optional[Sequence[int]] = None) -> np.ndarray:
    """Frames ``indices`` (default: all) of a frame folder as ``(N, H, W, 3)`` uint8; each file is
    read once, however often it is requested."""
    indices = np.arange(len(files)) if indices is None else np.asarray(indices, np.int64)
    unique, rows = np.unique(indices, return_inverse=True)
    frames = []
    for i in unique:
        try:
            frames.append(read_image(files[i]))
        except Exception as err:
            raise VideoError(f"frame {files[i]} cannot be read: {err}") from err
    first = frames[0].shape[:2]
    odd = next((files[i] for i, a in zip(unique, frames) if a.shape[:2] != first), None)
    if odd is not None:
        raise VideoError(f"frame folder {files[0].parent}: frames differ in size ({files[unique[0]].name} is "
                         f"{first[1]}x{first[0]}, {odd.name} is not)")
    return np.stack(frames)[rows.reshape(-1)]


def read_frames(folder: str | Path, max_frames: Optional[int] = None) -> np.ndarray:
    """A folder of frame images (sorted by name) as ``(N, H, W, 3)`` uint8."""
    files = frame_files(folder)[:max_frames]
    return read_frame_files(files)
