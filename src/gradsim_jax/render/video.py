"""Video in and out: write rendered [T, H, W, 4] videos as GIF/MP4, read target videos for fitting.

Conventions: videos are float arrays [T, H, W, C] with values in [0, 1], C = 4 (RGB + alpha) or 3.
Writers take the RGB channels (the renderer already blends the background into RGB) and quantize to
8 bits. `load_video` returns float32 [T, H, W, 4] resized to the render size, with alpha from a mask,
from the file's own alpha channel, or from the distance to a known background color.

Host-side code (numpy, imageio, Pillow, matplotlib); nothing here is traced.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


def to_uint8(frames) -> np.ndarray:
    """[T, H, W, C] floats in [0, 1] -> uint8 RGB [T, H, W, 3] (alpha dropped, gray expanded)."""
    frames = np.asarray(frames, dtype=np.float32)
    if frames.ndim == 3:
        frames = frames[None]
    if frames.ndim != 4:
        raise ValueError(f"frames must be [T, H, W, C], got shape {frames.shape}")
    if frames.shape[-1] == 1:
        frames = np.repeat(frames, 3, axis=-1)
    if frames.shape[-1] not in (3, 4):
        raise ValueError(f"frames must have 1, 3 or 4 channels, got {frames.shape[-1]}")
    rgb = np.nan_to_num(frames[..., :3], nan=0.0)
    return np.round(np.clip(rgb, 0.0, 1.0) * 255.0).astype(np.uint8)


def write_gif(path, frames, fps: float = 20.0) -> Path:
    """Write frames [T, H, W, C] (floats in [0, 1]) as a looping GIF; returns the path."""
    import imageio.v2 as imageio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimsave(path, list(to_uint8(frames)), format="GIF", duration=1.0 / fps, loop=0)
    return path


def write_mp4(path, frames, fps: float = 20.0) -> Path:
    """Write frames [T, H, W, C] (floats in [0, 1]) as an H.264 MP4 (odd sizes padded by one pixel)."""
    import imageio.v2 as imageio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    video = to_uint8(frames)
    # yuv420p needs even sizes; repeat the last row/column rather than let ffmpeg rescale.
    pad_h, pad_w = video.shape[1] % 2, video.shape[2] % 2
    if pad_h or pad_w:
        video = np.pad(video, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    with imageio.get_writer(
        path, format="FFMPEG", mode="I", fps=fps, codec="libx264", pixelformat="yuv420p", macro_block_size=1
    ) as writer:
        for frame in video:
            writer.append_data(frame)
    return path


def write_video(path, frames, fps: float = 20.0) -> Path:
    """Write a GIF or MP4, chosen by the file suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".gif":
        return write_gif(path, frames, fps)
    if suffix == ".mp4":
        return write_mp4(path, frames, fps)
    raise ValueError(f"unsupported video suffix {suffix!r}: use .gif or .mp4")


def _read_frames(path) -> list[np.ndarray]:
    """uint8 frames [H, W, C] from an MP4/GIF file or a folder of images (sorted by name)."""
    import imageio.v2 as imageio

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no video at {path}")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
        if not files:
            raise ValueError(f"{path} holds no images ({', '.join(_IMAGE_SUFFIXES)})")
        frames = [np.asarray(imageio.imread(p)) for p in files]
    elif path.suffix.lower() in _IMAGE_SUFFIXES:
        frames = [np.asarray(imageio.imread(path))]
    else:
        frames = [np.asarray(f) for f in imageio.mimread(path, memtest=False)]
    if not frames:
        raise ValueError(f"{path} holds no frames")
    shapes = {f.shape[:2] for f in frames}
    if len(shapes) != 1:
        raise ValueError(f"frames of {path} differ in size: {sorted(shapes)}")
    return frames


def _as_float(frame: np.ndarray) -> np.ndarray:
    """[H, W, 4] float32 in [0, 1] (gray expanded; missing alpha set to 1)."""
    frame = np.asarray(frame)
    scale = 65535.0 if frame.dtype == np.uint16 else 255.0 if frame.dtype == np.uint8 else 1.0
    frame = frame.astype(np.float32) / scale
    if frame.ndim == 2:
        frame = frame[..., None]
    if frame.shape[-1] in (1, 2):  # gray, gray + alpha
        gray = np.repeat(frame[..., :1], 3, axis=-1)
        alpha = frame[..., 1:2] if frame.shape[-1] == 2 else np.ones_like(frame[..., :1])
        frame = np.concatenate([gray, alpha], axis=-1)
    elif frame.shape[-1] == 3:
        frame = np.concatenate([frame, np.ones_like(frame[..., :1])], axis=-1)
    return frame


def resize(image: np.ndarray, size) -> np.ndarray:
    """Area-average (down) or bilinear (up) resize of a float image [H, W, C] to `size` = (H, W)."""
    from PIL import Image

    height, width = size
    if image.shape[:2] == (height, width):
        return image.astype(np.float32)
    shrinking = height <= image.shape[0] and width <= image.shape[1]
    method = Image.Resampling.BOX if shrinking else Image.Resampling.BILINEAR
    channels = [
        np.asarray(Image.fromarray(np.ascontiguousarray(image[..., c], dtype=np.float32)).resize((width, height), method))
        for c in range(image.shape[-1])
    ]
    return np.stack(channels, axis=-1).astype(np.float32)


def _size_hw(size) -> tuple[int, int]:
    if isinstance(size, (int, np.integer)):
        return int(size), int(size)
    height, width = size
    return int(height), int(width)


def load_video(
    path,
    size,
    *,
    background=None,
    mask=None,
    tolerance: float = 0.1,
    max_frames: int | None = None,
) -> np.ndarray:
    """Read a target video as float32 [T, H, W, 4] (RGB + alpha in [0, 1]) resized to the render size.

    path: an .mp4 or .gif file, a single image, or a folder of images (frames sorted by file name).
    size: render size, an int (square) or (height, width).
    Alpha, in order of precedence:
      - `mask`: a path like `path` (first channel used) or an array [T, H, W] / [H, W] in [0, 1];
      - the file's own alpha channel (RGBA PNGs);
      - `background` RGB in [0, 1]: alpha = clip(max_channel |rgb - background| / tolerance, 0, 1), so
        pixels within `tolerance` of the background color are transparent;
      - otherwise alpha is 1.
    max_frames: keep at most this many leading frames.
    """
    height, width = _size_hw(size)
    raw = _read_frames(path)
    if max_frames is not None:
        raw = raw[:max_frames]
    has_alpha = raw[0].ndim == 3 and raw[0].shape[-1] in (2, 4)
    frames = np.stack([resize(_as_float(f), (height, width)) for f in raw])
    if mask is not None:
        if isinstance(mask, (str, os.PathLike)):
            masks = np.stack([resize(_as_float(m), (height, width))[..., 0] for m in _read_frames(mask)])
        else:
            masks = np.asarray(mask, np.float32)
            if masks.ndim == 2:
                masks = masks[None]
            masks = np.stack([resize(m[..., None], (height, width))[..., 0] for m in masks])
        if masks.shape[0] == 1:
            masks = np.repeat(masks, frames.shape[0], axis=0)
        if masks.shape[0] < frames.shape[0]:
            raise ValueError(f"mask has {masks.shape[0]} frames, video has {frames.shape[0]}")
        frames[..., 3] = np.clip(masks[: frames.shape[0]], 0.0, 1.0)
    elif not has_alpha and background is not None:
        bg = np.broadcast_to(np.asarray(background, np.float32), (3,))
        distance = np.max(np.abs(frames[..., :3] - bg), axis=-1)
        frames[..., 3] = np.clip(distance / tolerance, 0.0, 1.0)
    return frames.astype(np.float32)


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
    """Write a labelled side-by-side comparison (e.g. target, initial guess, fit) as GIF or MP4."""
    return write_video(path, side_by_side(videos, labels, min_height=min_height), fps)
