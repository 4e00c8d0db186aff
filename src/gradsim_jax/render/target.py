"""Reading target videos: `load_target` returns a `TargetVideo`, float32 [T, H, W, 4] resized to the render
size, with alpha from a mask, from the file's own alpha channel, or from the distance to a known background
color, and a record of where that alpha came from, the file's native size and its frame rate. `load_video`
reads frames as they are. MP4, GIF, a folder of images, or one picture; every unreadable input is a
ValueError that names the file in our words.

Host-side code (numpy, imageio, Pillow); nothing here is traced.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
# What imageio, Pillow and ffmpeg raise on unreadable or corrupt files: any exception at all. Pillow alone
# answers corrupt data with OSError, ValueError, SyntaxError, EOFError, IndexError, struct.error or
# DecompressionBombError (a header claiming a huge size), so no shorter list is safe.
_READ_ERRORS = (Exception,)


def _cannot_read(path: Path, err: BaseException) -> ValueError:
    """ValueError "<file>: cannot read frames: <reason>" in our words.

    imageio answers a corrupt file with advice to install plugins (the file is the problem, not the
    plugins), and ffmpeg's answer starts with its build banner; neither helps, so those become a plain
    reason with the last line ffmpeg printed.
    """
    text = str(err).strip()
    kind = "video" if path.suffix.lower() in (".mp4", ".gif", ".mov", ".avi", ".mkv", ".webm") else "image"
    reason = f"not a readable {path.suffix.lstrip('.').upper() or kind} {kind} (empty, truncated or corrupt?)"
    if "=== stderr ===" in text:
        head, _, stderr = text.partition("=== stderr ===")
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        reason += f": {head.strip()}" + (f"; ffmpeg says: {lines[-1]}" if lines else "")
    elif text and "backend" not in text:
        reason += f": {text.splitlines()[0]}"
    return ValueError(f"{path}: cannot read frames: {reason}")


def _read_image(path: Path) -> np.ndarray:
    """One image file as a uint8/uint16 array; unreadable files are a ValueError naming the file."""
    import imageio.v2 as imageio

    try:
        return np.asarray(imageio.imread(path))
    except _READ_ERRORS as err:
        raise _cannot_read(path, err) from err


def _fps_from_durations(durations_ms: Sequence) -> float | None:
    """The frame rate most frames play at: 1000 / the most common positive delay; None if no delay."""
    positive = [float(d) for d in durations_ms if d and d > 0]
    if not positive:
        return None
    counts = collections.Counter(positive)
    # Most common delay; ties go to the shortest, the likelier base period of a video.
    delay = min(counts, key=lambda d: (-counts[d], d))
    return 1000.0 / delay


def _gif_durations(path: Path) -> list:
    """Per-frame delays in ms of a GIF, as Pillow reports them (None where a frame has none)."""
    from PIL import Image

    with Image.open(path) as image:
        durations = []
        for index in range(getattr(image, "n_frames", 1)):
            image.seek(index)
            durations.append(image.info.get("duration"))
    return durations


def _read_movie(path: Path) -> tuple[list[np.ndarray], float | None]:
    """Frames and frame rate of a multi-frame file (GIF, MP4, ...); None when the file records none."""
    import imageio.v2 as imageio

    try:
        if path.suffix.lower() == ".gif":
            # Pillow first: it rejects a non-GIF at once, where imageio would try every plugin it has.
            fps = _fps_from_durations(_gif_durations(path))
            return [np.asarray(f) for f in imageio.mimread(path, memtest=False)], fps
        with imageio.get_reader(path) as reader:
            fps = reader.get_meta_data().get("fps")
            frames = [np.asarray(f) for f in reader]
    except _READ_ERRORS as err:
        raise _cannot_read(path, err) from err
    fps = float(fps) if isinstance(fps, (int, float)) and math.isfinite(fps) and fps > 0 else None
    return frames, fps


def _read_frames_and_fps(path) -> tuple[list[np.ndarray], float | None]:
    """uint8 frames [H, W, C] and the recorded frame rate (or None) of a video, image or image folder.

    A folder's images are sorted by name; files without an image suffix are ignored.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no video at {path}")
    fps = None
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES)
        if not files:
            raise ValueError(f"{path} holds no images ({', '.join(_IMAGE_SUFFIXES)})")
        frames = [_checked_pixels(p, _read_image(p)) for p in files]
    elif path.suffix.lower() in _IMAGE_SUFFIXES:
        frames = [_checked_pixels(path, _read_image(path))]
    else:
        frames, fps = _read_movie(path)
        frames = [_checked_pixels(path, f) for f in frames]
    if not frames:
        raise ValueError(f"{path} holds no frames")
    shapes = {f.shape[:2] for f in frames}
    if len(shapes) != 1:
        raise ValueError(f"frames of {path} differ in size: {sorted(shapes)}")
    return frames, fps


def _checked_pixels(path: Path, frame: np.ndarray) -> np.ndarray:
    """`frame` if `_as_float` can map it to [0, 1]: 8- or 16-bit unsigned, boolean, or finite floats (taken
    as [0, 1], clipped); a ValueError naming the file otherwise (32-bit integers have no agreed white)."""
    if frame.dtype in (np.uint8, np.uint16, np.bool_):
        return frame
    if np.issubdtype(frame.dtype, np.floating):
        if not np.all(np.isfinite(frame)):
            raise ValueError(f"{path}: pixel values are not finite (NaN or inf in a floating-point image)")
        return frame
    raise ValueError(f"{path}: {frame.dtype} pixels are not supported: save the frames as 8- or 16-bit images")


def _read_frames(path) -> list[np.ndarray]:
    """uint8 frames [H, W, C] from an MP4/GIF file or a folder of images (sorted by name)."""
    return _read_frames_and_fps(path)[0]


def _has_alpha(frame: np.ndarray) -> bool:
    return frame.ndim == 3 and frame.shape[-1] in (2, 4)


def _as_float(frame: np.ndarray) -> np.ndarray:
    """[H, W, 4] float32 in [0, 1] (gray expanded; missing alpha set to 1)."""
    frame = np.asarray(frame)
    scale = 65535.0 if frame.dtype == np.uint16 else 255.0 if frame.dtype == np.uint8 else 1.0
    frame = np.clip(frame.astype(np.float32) / scale, 0.0, 1.0)  # float images: [0, 1] by convention
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
    """Area-average (down) or bilinear (up) resize of a float image [H, W, C] to `size` = (H, W).

    Args:
        image: [H, W, C] float image.
        size: (height, width) pixels of the result.

    Returns:
        [height, width, C] float32 image.
    """
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
    """(height, width) from an int or a pair of ints, each at least 1; ValueError naming `size` otherwise."""
    pair = (size, size) if isinstance(size, (int, np.integer)) else size
    try:
        height, width = pair
    except (TypeError, ValueError):
        raise ValueError(f"size must be an int or (height, width), got {size!r}") from None
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in (height, width)):
        raise ValueError(f"size must be positive integers (render height and width in pixels), got {size!r}")
    return int(height), int(width)


def _check_target_options(background, tolerance, max_frames, expected_frames) -> None:
    """ValueError naming the argument: background 3 finite numbers, tolerance finite and positive, frame
    counts None or at least 1."""
    if background is not None:
        try:
            bg = np.asarray(background, np.float64)
        except (TypeError, ValueError):
            bg = np.full(0, np.nan)
        if bg.size not in (1, 3) or not np.all(np.isfinite(bg)):
            raise ValueError(f"background (key color) must be RGB, 3 finite numbers, got {background!r}")
        if not 0.0 < tolerance < math.inf:
            raise ValueError(f"tolerance (of the key color) must be a positive number, got {tolerance!r}")
    for name, count in (("max_frames", max_frames), ("expected_frames", expected_frames)):
        if count is not None and not (isinstance(count, (int, np.integer)) and count >= 1):
            raise ValueError(f"{name} must be None or at least 1, got {count!r}")


def _apply_undistort(undistort: Callable | None, image: np.ndarray, what: str) -> np.ndarray:
    """`undistort(image)` checked to return an image [H', W', C] with the same channel count C."""
    if undistort is None:
        return image
    result = np.asarray(undistort(image), dtype=np.float32)
    if result.ndim != 3 or result.shape[-1] != image.shape[-1]:
        raise ValueError(
            f"undistort must return an image [H, W, {image.shape[-1]}] for a {what} "
            f"{tuple(image.shape)}, got shape {tuple(result.shape)}"
        )
    return result


def _limit_frames(raw: list, path, max_frames: int | None, expected_frames: int | None) -> list:
    """Apply `max_frames`, then check the count against `expected_frames` (too few: error; too many:
    keep the first `expected_frames`, with a warning)."""
    found = len(raw)
    if max_frames is not None:
        raw = raw[:max_frames]
    if expected_frames is None:
        return raw
    expected_frames = int(expected_frames)
    if len(raw) < expected_frames:
        kept = f" (max_frames={max_frames} keeps {len(raw)})" if len(raw) < found else ""
        raise ValueError(
            f"{path} holds {found} frames{kept}; expected {expected_frames} "
            "(one per rendered frame, the initial state included)"
        )
    if len(raw) > expected_frames:
        warnings.warn(
            f"{path} holds {len(raw)} frames; using the first {expected_frames} and dropping the last "
            f"{len(raw) - expected_frames} (`gradsim-jax predict` scores a fit on them)",
            stacklevel=3,
        )
    return raw[:expected_frames]


#: How far (relative) a side of the render may be from the one that keeps the target's aspect ratio before
#: `load_target` refuses to resize (a squash): 1 %, or one pixel where that is more (sizes are whole pixels).
ASPECT_TOLERANCE = 0.01


def check_aspect(native_hw, size_hw, what: str) -> None:
    """ValueError when frames of `native_hw` = (height, width) px would be squashed into `size_hw`: neither side
    of `size_hw` is within ASPECT_TOLERANCE (or one pixel) of the one that keeps the frames' aspect ratio.

    Args:
        native_hw: (height, width) pixels of the frames.
        size_hw: (height, width) pixels of the render.
        what: what the message calls the frames (e.g. the file).
    """
    (h, w), (height, width) = native_hw, size_hw
    keeps_height = abs(height - width * h / w) <= max(1.0, ASPECT_TOLERANCE * height)
    keeps_width = abs(width - height * w / h) <= max(1.0, ASPECT_TOLERANCE * width)
    if not (keeps_height or keeps_width):
        fitting = max(1, round(width * h / w))
        raise ValueError(
            f"{what}: the frames are {w} x {h} px and the render {width} x {height} px, another aspect ratio "
            f"({w / h:.4g} against {width / height:.4g}): resizing would squash them. Render at the frames' aspect "
            f"(a scene file's [render] width and height, e.g. {width} x {fitting}), or crop the frames to the "
            "render's")


def _load_masks(mask, size, count: int, undistort: Callable | None) -> np.ndarray:
    """Mask frames [count, H, W] in [0, 1] at `size` from a path or an array [T, H, W] / [H, W].

    A path's first channel is used. Each mask frame goes through `undistort` as [H, W, 1] at its own
    resolution, then is resized. One mask frame applies to every video frame; more than `count` are
    cut; fewer (but more than one) is an error.
    """
    if isinstance(mask, (str, os.PathLike)):
        raw = [_as_float(m)[..., :1] for m in _read_frames(mask)]
        source = str(mask)
    else:
        masks = np.asarray(mask, np.float32)
        if masks.ndim == 2:
            masks = masks[None]
        if masks.ndim != 3:
            raise ValueError(f"mask must be [T, H, W] or [H, W], got shape {masks.shape}")
        raw = [m[..., None] for m in masks]
        source = "mask array"
    if len(raw) != 1 and len(raw) < count:
        raise ValueError(f"{source} has {len(raw)} mask frames, the video has {count}")
    raw = [_apply_undistort(undistort, m, "mask frame") for m in raw[:count]]
    check_aspect(raw[0].shape[:2], size, source)
    masks = np.stack([resize(m, size)[..., 0] for m in raw])
    if masks.shape[0] == 1:
        masks = np.repeat(masks, count, axis=0)
    return np.clip(masks, 0.0, 1.0)


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: comparing frame arrays with == is ambiguous
class TargetVideo:
    """A target video prepared for fitting, and what the file actually observed.

    frames: float32 [T, H, W, 4], RGB + alpha in [0, 1], resized to the render size.
    alpha_source: where alpha came from: "mask", "alpha channel" (the file's own), "key color"
        (distance to a background color), or None: alpha was not observed and is 1 everywhere.
    native_size: (height, width) of the file's frames before undistortion and resizing.
    fps: frame rate recorded in the file (GIF delays, MP4 metadata), or None (image folders, or files
        recording none).
    """

    frames: np.ndarray
    alpha_source: str | None
    native_size: tuple[int, int]
    fps: float | None

    @property
    def alpha_observed(self) -> bool:
        """Whether alpha carries information (from a mask, the file, or a key color)."""
        return self.alpha_source is not None


def load_target(
    path,
    size,
    *,
    background=None,
    mask=None,
    tolerance: float = 0.1,
    max_frames: int | None = None,
    undistort: Callable[[np.ndarray], np.ndarray] | None = None,
    expected_frames: int | None = None,
) -> TargetVideo:
    """Read a target video for fitting; see `TargetVideo` for what is returned.

    Alpha, in order of precedence:
      - `mask`: a path like `path` (first channel used) or an array [T, H, W] / [H, W] in [0, 1]; one
        mask frame applies to all video frames, fewer mask frames than video frames is an error;
      - the file's own alpha channel (RGBA PNGs);
      - `background` RGB in [0, 1]: alpha = clip(max_channel |rgb - background| / tolerance, 0, 1), so
        pixels within `tolerance` of the background color are transparent;
      - otherwise alpha is 1 (`alpha_source` None).
    Unreadable or corrupt files raise ValueError("<file>: cannot read frames: ...").

    Args:
        path: an .mp4 or .gif file, a single image, or a folder of images (frames sorted by file name;
            files without an image suffix ignored).
        size: render size, an int (square) or (height, width); frames of another aspect ratio are refused
            (`check_aspect`: resizing would squash them).
        background: the key color, RGB in [0, 1] (3 numbers), or None (see the alpha rules above).
        mask: a path like `path` or an array [T, H, W] / [H, W] in [0, 1], or None (see the alpha rules).
        tolerance: the key color's distance (max over channels, in [0, 1] units) at which alpha reaches 1.
        max_frames: keep at most this many leading frames.
        undistort: optional callable applied to each frame before resizing, at the file's native
            resolution: video frames as float32 [H, W, 4] (RGB + alpha, alpha 1 if the file has none),
            mask frames as float32 [H, W, 1], values in [0, 1]. It must return [H', W', same C]. Masks
            are assumed to be in the same (distorted) camera geometry as the video.
        expected_frames: the number of frames the caller needs. Fewer (after `max_frames`) is a
            ValueError stating both counts; more keeps the first `expected_frames` with a warning.

    Returns:
        `TargetVideo` (frames float32 [T, H, W, 4]).
    """
    height, width = _size_hw(size)
    _check_target_options(background, tolerance, max_frames, expected_frames)
    raw, fps = _read_frames_and_fps(path)
    native_size = tuple(int(n) for n in raw[0].shape[:2])
    raw = _limit_frames(raw, path, max_frames, expected_frames)
    if not raw:
        raise ValueError(f"{path}: no frames left (max_frames={max_frames})")
    has_alpha = any(_has_alpha(f) for f in raw)
    frames = [_apply_undistort(undistort, _as_float(f), "video frame") for f in raw]
    check_aspect(frames[0].shape[:2], (height, width), str(path))
    frames = np.stack([resize(f, (height, width)) for f in frames])
    if mask is not None:
        frames[..., 3] = _load_masks(mask, (height, width), frames.shape[0], undistort)
        alpha_source = "mask"
    elif has_alpha:
        alpha_source = "alpha channel"
    elif background is not None:
        bg = np.broadcast_to(np.asarray(background, np.float32), (3,))
        distance = np.max(np.abs(frames[..., :3] - bg), axis=-1)
        frames[..., 3] = np.clip(distance / tolerance, 0.0, 1.0)
        alpha_source = "key color"
    else:
        alpha_source = None
    return TargetVideo(frames.astype(np.float32), alpha_source, native_size, fps)


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

    Same as `load_target(...).frames`; see `load_target` for the arguments and the alpha rules.

    Args:
        path: the video, image or folder of images (`load_target`).
        size: render size, an int (square) or (height, width).
        background: the key color, RGB in [0, 1], or None.
        mask: a mask path or array [T, H, W] / [H, W] in [0, 1], or None.
        tolerance: the key color's distance at which alpha reaches 1.
        max_frames: keep at most this many leading frames.

    Returns:
        float32 [T, H, W, 4], RGB + alpha in [0, 1].
    """
    return load_target(
        path, size, background=background, mask=mask, tolerance=tolerance, max_frames=max_frames
    ).frames
