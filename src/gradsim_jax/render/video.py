"""Video out: write rendered [T, H, W, 4] videos as GIF/MP4/PNG folders and side-by-side comparisons (reading
target videos: `render.target`, whose names this module re-exports).

Conventions: videos are float arrays [T, H, W, C] with values in [0, 1], C = 4 (RGB + alpha), 3 or 1.
GIF and MP4 writers take the RGB channels (the renderer already blends the background into RGB) and
quantize to 8 bits; the PNG folder writer keeps alpha. Every frame written reads back: no writer merges
identical consecutive frames (a cloth at rest is still one frame per time step). Writers are atomic:
they write a hidden temporary sibling and rename it into place, so an interrupted write never leaves a
partial file or folder under the final name.

Host-side code (numpy, imageio, Pillow, matplotlib); nothing here is traced.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from gradsim_jax.files import atomic_file, temporary_sibling
from gradsim_jax.render.target import (  # noqa: F401  (re-exported: reading targets)
    TargetVideo, load_target, load_video, resize,
)

_PNG_FRAME = re.compile(r"frame_\d{4,}\.png")


# ----------------------------------------------------------------------------------------------------
# Quantization


def _as_video(frames) -> np.ndarray:
    """float32 [T, H, W, 3 or 4] from [T, H, W, C] or one frame [H, W, C] (C in 1, 3, 4; gray expanded)."""
    frames = np.asarray(frames, dtype=np.float32)
    if frames.ndim == 3:
        frames = frames[None]
    if frames.ndim != 4:
        raise ValueError(f"frames must be [T, H, W, C], got shape {frames.shape}")
    if frames.shape[-1] == 1:
        frames = np.repeat(frames, 3, axis=-1)
    if frames.shape[-1] not in (3, 4):
        raise ValueError(f"frames must have 1, 3 or 4 channels, got {frames.shape[-1]}")
    return frames


def _quantize(values: np.ndarray) -> np.ndarray:
    """Floats in [0, 1] -> uint8 (NaN -> 0, out-of-range clipped, rounded to nearest)."""
    return np.round(np.clip(np.nan_to_num(values, nan=0.0), 0.0, 1.0) * 255.0).astype(np.uint8)


def to_uint8(frames) -> np.ndarray:
    """[T, H, W, C] floats in [0, 1] -> uint8 RGB [T, H, W, 3] (alpha dropped, gray expanded).

    NaN becomes 0, values out of [0, 1] are clipped, the rest rounded to the nearest of 0..255.

    Args:
        frames: [T, H, W, C] floats in [0, 1], C in 1, 3, 4 (or one frame [H, W, C]).

    Returns:
        [T, H, W, 3] uint8 RGB.
    """
    return _quantize(_as_video(frames)[..., :3])


def to_uint8_rgba(frames) -> np.ndarray:
    """[T, H, W, C] floats in [0, 1] -> uint8 RGBA [T, H, W, 4] (gray expanded; missing alpha = 255).

    Args:
        frames: [T, H, W, C] floats in [0, 1], C in 1, 3, 4 (or one frame [H, W, C]).

    Returns:
        [T, H, W, 4] uint8 RGBA.
    """
    video = _quantize(_as_video(frames))
    if video.shape[-1] == 3:
        video = np.concatenate([video, np.full_like(video[..., :1], 255)], axis=-1)
    return video


def _nonempty(video: np.ndarray) -> np.ndarray:
    if video.shape[0] == 0:
        raise ValueError("no frames to write")
    return video


def _check_fps(fps: float) -> float:
    fps = float(fps)
    if not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps}")
    return fps


# ----------------------------------------------------------------------------------------------------
# Atomic writes


def _check_replaceable_folder(path: Path) -> None:
    """Refuse to replace anything but a folder of our own frames, so a typo never deletes user data."""
    if not path.exists():
        return
    if not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a folder; not replacing it with PNG frames")
    foreign = sorted(p.name for p in path.iterdir() if not _PNG_FRAME.fullmatch(p.name))
    if foreign:
        raise FileExistsError(
            f"{path} holds files other than frame_NNNN.png ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); not replacing it"
        )


@contextlib.contextmanager
def _atomic_folder(path) -> Iterator[Path]:
    """Like `atomic_file` for a folder: fill a temporary sibling folder, then swap it in by renames.

    An existing folder at `path` (only one holding nothing but frame_NNNN.png files) is moved aside,
    replaced, then deleted; if the swap fails the old folder is put back.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_replaceable_folder(path)
    temporary = temporary_sibling(path)
    temporary.mkdir()
    try:
        yield temporary
        _check_replaceable_folder(path)  # again: it may have changed while we wrote
        if path.exists():
            old = temporary_sibling(path, "old")
            os.rename(path, old)
            try:
                os.rename(temporary, path)
            except BaseException:
                os.rename(old, path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(temporary, path)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


# ----------------------------------------------------------------------------------------------------
# Writers


def gif_frame_duration_ms(fps: float) -> int:
    """The per-frame GIF delay in milliseconds for `fps`.

    GIF stores delays in centiseconds, so this is 1000 / fps rounded to the nearest 10 ms (at least
    10 ms): 20 fps -> 50 ms exactly, 30 fps -> 30 ms (the nearest representable delay).

    Args:
        fps: frames per second (positive, finite).

    Returns:
        int ms, a multiple of 10, at least 10.
    """
    return 10 * max(1, round(100.0 / _check_fps(fps)))


def _encode_gif(video: np.ndarray, duration_ms: int) -> bytes:
    """A looping GIF holding every frame of uint8 RGB `video` [T, H, W, 3], each shown `duration_ms`.

    Pillow's `save(..., save_all=True)` drops a frame identical to the previous one and adds its delay
    to the previous frame (GifImagePlugin._write_multiple_frames); no per-frame option prevents that
    without changing pixels. So the file is assembled from Pillow's public per-frame GIF encoder
    (`getheader` for the header and loop extension, `getdata` for one full-size frame with its delay),
    which does no frame comparison. Each frame is quantized to its own adaptive palette, exactly as
    Pillow's high-level writer does, and carries it as a local color table.
    """
    from PIL import GifImagePlugin, Image

    frames = [Image.fromarray(frame).convert("P", palette=Image.Palette.ADAPTIVE) for frame in video]
    header, _ = GifImagePlugin.getheader(frames[0], info={"loop": 0, "duration": duration_ms})
    chunks = list(header)
    for index, frame in enumerate(frames):
        # The first frame uses the global color table written by getheader; later ones bring their own.
        chunks += GifImagePlugin.getdata(frame, duration=duration_ms, include_color_table=index > 0)
    chunks.append(b";")  # GIF trailer
    return b"".join(chunks)


def write_gif(path, frames, fps: float = 20.0) -> Path:
    """Write frames [T, H, W, C] (floats in [0, 1]) as a looping GIF, one GIF frame per input frame.

    Alpha is dropped (RGB is expected to hold the blended background). Each frame is shown for
    `gif_frame_duration_ms(fps)` ms. Written atomically; returns the path.

    Args:
        path: the GIF file to write.
        frames: [T, H, W, C] floats in [0, 1], C in 1, 3, 4 (or one frame [H, W, C]).
        fps: frames per second (positive).

    Returns:
        The path, as a `Path`.
    """
    duration_ms = gif_frame_duration_ms(fps)
    data = _encode_gif(_nonempty(to_uint8(frames)), duration_ms)
    with atomic_file(path) as temporary, open(temporary, "xb") as f:
        f.write(data)
    return Path(path)


def write_mp4(path, frames, fps: float = 20.0) -> Path:
    """Write frames [T, H, W, C] (floats in [0, 1]) as an H.264 MP4 (odd sizes padded by one pixel).

    Constant frame rate `fps`, one video frame per input frame. Written atomically; returns the path.

    Args:
        path: the MP4 file to write.
        frames: [T, H, W, C] floats in [0, 1], C in 1, 3, 4 (or one frame [H, W, C]).
        fps: frames per second (positive).

    Returns:
        The path, as a `Path`.
    """
    import imageio.v2 as imageio

    fps = _check_fps(fps)
    video = _nonempty(to_uint8(frames))
    # yuv420p needs even sizes; repeat the last row/column rather than let ffmpeg rescale.
    pad_h, pad_w = video.shape[1] % 2, video.shape[2] % 2
    if pad_h or pad_w:
        video = np.pad(video, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    with atomic_file(path) as temporary:
        with imageio.get_writer(
            temporary, format="FFMPEG", mode="I", fps=fps, codec="libx264", pixelformat="yuv420p",
            macro_block_size=1,
        ) as writer:
            for frame in video:
                writer.append_data(frame)
    return Path(path)


def _png_frame_name(index: int, count: int) -> str:
    """File name of frame `index` of `count`: frame_0000.png, ... (wider when needed, so names sort)."""
    return f"frame_{index:0{max(4, len(str(count - 1)))}d}.png"


def write_png(path, image) -> Path:
    """Write one RGBA image [H, W, 4] (floats in [0, 1]) as a PNG, atomically (a temporary file, renamed).

    Args:
        path: the PNG file to write.
        image: [H, W, C] floats in [0, 1], C in 1, 3, 4 (missing alpha: opaque).

    Returns:
        The path, as a `Path`.
    """
    import imageio.v3 as iio

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.png")
    iio.imwrite(tmp, to_uint8_rgba(np.asarray(image)[None])[0])
    tmp.replace(path)
    return path


def write_png_folder(path, frames) -> Path:
    """Write frames [T, H, W, C] (floats in [0, 1]) as a folder of RGBA PNGs frame_0000.png, ....

    Alpha is kept (255 where the frames have none); values are quantized to 8 bits, nothing else.
    The folder is filled under a temporary name and renamed into place; an existing folder at `path`
    is replaced only if it holds nothing but frame_NNNN.png files. Returns the path.

    Args:
        path: the folder to write.
        frames: [T, H, W, C] floats in [0, 1], C in 1, 3, 4 (or one frame [H, W, C]).

    Returns:
        The path, as a `Path`.
    """
    from PIL import Image

    video = _nonempty(to_uint8_rgba(frames))
    with _atomic_folder(path) as temporary:
        for index, frame in enumerate(video):
            Image.fromarray(frame).save(temporary / _png_frame_name(index, len(video)))
    return Path(path)


def write_video(path, frames, fps: float = 20.0) -> Path:
    """Write a video chosen by the path: `.gif`, `.mp4`, or no suffix for a folder of RGBA PNGs.

    `fps` is recorded in GIF and MP4 files; a PNG folder has no frame rate. Returns the path.

    Args:
        path: the file or folder to write; its suffix (.gif, .mp4, none) picks the format.
        frames: [T, H, W, C] floats in [0, 1], C in 1, 3, 4 (or one frame [H, W, C]).
        fps: frames per second (positive, checked for every format).

    Returns:
        The path, as a `Path`; ValueError for another suffix.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".gif":
        return write_gif(path, frames, fps)
    if suffix == ".mp4":
        return write_mp4(path, frames, fps)
    if suffix == "":
        _check_fps(fps)  # same contract for every format, even where it is not stored
        return write_png_folder(path, frames)
    raise ValueError(
        f"unsupported video path {str(path)!r} (suffix {suffix!r}): use a .gif or .mp4 file, "
        "or a path without suffix for a folder of PNG frames"
    )




def _label_bitmap(text: str, width: int, height: int) -> np.ndarray:
    """A white strip [height, width, 3] with `text` drawn in black (matplotlib Agg, no global state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    dpi = 100
    figure = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    canvas = FigureCanvasAgg(figure)
    figure.patch.set_facecolor("white")
    figure.text(0.5, 0.5, text, ha="center", va="center", fontsize=max(6, 0.55 * height * 72 / dpi))
    canvas.draw()
    strip = np.asarray(canvas.buffer_rgba())[..., :3].astype(np.float32) / 255.0
    return strip[:height, :width]


def side_by_side(videos: Sequence, labels: Sequence[str] | None = None, *, min_height: int = 128,
                 gap: int = 4) -> np.ndarray:
    """One video [T, H', W', 3] showing `videos` (each [T, H, W, C]) next to each other with labels.

    Videos are upscaled by an integer factor (nearest) to at least `min_height` rows, padded to a common
    size and length (a shorter video holds its last frame); labels are drawn above each panel.

    Args:
        videos: the videos, each [T, H, W, C] floats in [0, 1] (at least one).
        labels: one label per video, or None for none.
        min_height: pixels, the least height of a panel after upscaling.
        gap: pixels of white between panels.

    Returns:
        [T', H', W', 3] float32 RGB in [0, 1], T' the longest video's length.
    """
    if not videos:
        raise ValueError("no videos to compare")
    if labels is not None and len(labels) != len(videos):
        raise ValueError(f"{len(labels)} labels for {len(videos)} videos")
    clips = [to_uint8(v).astype(np.float32) / 255.0 for v in videos]
    num_frames = max(c.shape[0] for c in clips)
    height = max(c.shape[1] for c in clips)
    scale = max(1, -(-min_height // height))
    panels = []
    for clip in clips:
        clip = clip.repeat(scale, axis=1).repeat(scale, axis=2)
        padded = np.ones((num_frames, height * scale, clip.shape[2], 3), np.float32)
        padded[: clip.shape[0], : clip.shape[1]] = clip
        padded[clip.shape[0] :, : clip.shape[1]] = clip[-1]
        panels.append(padded)
    label_height = max(14, (height * scale) // 8) if labels is not None else 0
    columns = []
    for i, panel in enumerate(panels):
        if labels is not None:
            strip = _label_bitmap(str(labels[i]), panel.shape[2], label_height)
            panel = np.concatenate([np.broadcast_to(strip, (num_frames, *strip.shape)), panel], axis=1)
        columns.append(panel)
        if i + 1 < len(panels) and gap:
            columns.append(np.ones((num_frames, panel.shape[1], gap, 3), np.float32))
    return np.concatenate(columns, axis=2)


def write_comparison(path, videos: Sequence, labels: Sequence[str] | None = None, *, fps: float = 20.0,
                     min_height: int = 128) -> Path:
    """Write a labelled side-by-side comparison (e.g. target, initial guess, fit); see `write_video`.

    Args:
        path: the file or folder to write (`write_video`).
        videos: the videos, each [T, H, W, C] floats in [0, 1].
        labels: one label per video, or None.
        fps: frames per second.
        min_height: pixels, the least height of a panel (`side_by_side`).

    Returns:
        The path, as a `Path`.
    """
    return write_video(path, side_by_side(videos, labels, min_height=min_height), fps)
