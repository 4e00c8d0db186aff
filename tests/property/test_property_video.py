"""Property: `load_target` reads any target a user can hand it, or says in our words which file is wrong.

Targets: single images of every mode Pillow and OpenCV write (grey, grey + alpha, RGB, RGBA, palette,
1-bit, 16-bit grey and colour, 32-bit integer and float TIFF), folders of them (sizes that differ, junk
files, empty or corrupt images, a subfolder with an image suffix, no images at all), GIF and MP4 videos of
one or more frames, each possibly truncated, bit-flipped or padded with junk, random bytes under a video
or image suffix, and paths that do not exist; with random render sizes, masks, key colours, tolerances,
frame limits and expected frame counts.

Allowed outcomes: a `TargetVideo` of float32 frames [T, H, W, 4], finite and in [0, 1], with T as asked;
or a ValueError / FileNotFoundError whose message names the file, folder or argument at fault, never
imageio's "pip install imageio[...]" advice, ffmpeg's banner, or an OSError/KeyError/IndexError from a
library.
"""

import functools
import math
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

from gradsim_jax.render.video import TargetVideo, load_target, write_gif, write_mp4

from bounded import bounded

NOISE = ("pip install", "imageio[", "=== stderr ===", "ffmpeg version", "Traceback", "configuration:")
MODES = ["L", "LA", "RGB", "RGBA", "P", "1", "I;16", "I", "F", "RGB16", "RGBA16"]
IMAGE_SUFFIXES = [".png", ".png", ".jpg", ".bmp", ".tif", ".gif"]


# ---------------------------------------------------------------------------------------------------
# Files


def write_image(path: Path, mode: str, height: int, width: int, seed: int) -> Path:
    """An image of `mode` at `path`; modes the suffix cannot hold fall back to one it can (Pillow's
    choice) or to a TIFF, so every file written is a real image."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    if mode in ("RGB16", "RGBA16"):  # 16-bit colour: OpenCV writes it, Pillow cannot
        import cv2

        channels = 3 if mode == "RGB16" else 4
        path = path.with_suffix(".png")
        cv2.imwrite(str(path), rng.integers(0, 65536, (height, width, channels), dtype=np.uint16))
        return path
    if mode == "I;16":
        image = Image.fromarray(rng.integers(0, 65536, (height, width), dtype=np.uint16))
        path = path.with_suffix(".png")
    elif mode == "I":
        image = Image.fromarray(rng.integers(-(2**31), 2**31 - 1, (height, width), dtype=np.int32))
        path = path.with_suffix(".tif")
    elif mode == "F":
        values = rng.uniform(-2.0, 3.0, (height, width)).astype(np.float32)
        values.flat[0] = [np.nan, np.inf, 0.5][seed % 3]
        image = Image.fromarray(values)
        path = path.with_suffix(".tif")
    else:
        image = Image.fromarray(rng.integers(0, 256, (height, width, 4), dtype=np.uint8)).convert(mode)
        if path.suffix in (".jpg", ".bmp", ".gif") and mode in ("LA", "RGBA"):
            image = image.convert("RGB")
        if path.suffix == ".jpg" and mode in ("P", "1"):
            image = image.convert("L")
    image.save(path)
    return path


@functools.lru_cache(maxsize=None)
def video_bytes(kind: str, frames: int) -> bytes:
    """A small valid GIF or MP4 (8 x 6 px, `frames` frames), made once per session."""
    with tempfile.TemporaryDirectory() as folder:
        video = np.random.default_rng(frames).uniform(0.0, 1.0, (frames, 6, 8, 3)).astype(np.float32)
        path = Path(folder) / f"v.{kind}"
        (write_gif if kind == "gif" else write_mp4)(path, video, fps=25.0)
        return path.read_bytes()


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """`data` unchanged, truncated, with a run of bytes inverted, or with junk appended."""
    how = draw(st.sampled_from(["none", "none", "truncate", "flip", "append"]))
    if how == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    if how == "flip":
        start = draw(st.integers(0, max(0, len(data) - 1)))
        length = draw(st.integers(1, 64))
        return data[:start] + bytes(b ^ 0xFF for b in data[start:start + length]) + data[start + length:]
    if how == "append":
        return data + draw(st.binary(min_size=1, max_size=32))
    return data


IMAGE = st.tuples(st.sampled_from(MODES), st.integers(1, 9), st.integers(1, 9), st.integers(0, 2**16),
                  st.sampled_from(IMAGE_SUFFIXES))


@st.composite
def targets(draw):
    """A recipe `make(folder) -> path` for a target and a description of it."""
    kind = draw(st.sampled_from(["image", "image", "folder", "folder", "gif", "gif", "mp4", "bytes", "missing"]))
    if kind == "image":
        mode, h, w, seed, suffix = draw(IMAGE)
        spoil = draw(st.booleans())
        cut = draw(st.floats(0.0, 1.0))

        def make(folder):
            path = write_image(folder / f"t{suffix}", mode, h, w, seed)
            if spoil:
                data = path.read_bytes()
                path.write_bytes(data[: int(cut * len(data))])
            return path
        return make
    if kind == "folder":
        images = draw(st.lists(IMAGE, max_size=3))
        same_size = draw(st.booleans())
        junk = draw(st.lists(st.sampled_from(["notes.txt", "bad.png", "empty.png", "sub.png/", "x.jpg", ".hidden"]),
                             max_size=2, unique=True))
        junk_bytes = draw(st.binary(max_size=24))

        def make(folder):
            root = folder / "frames"
            root.mkdir()
            for k, (mode, h, w, seed, suffix) in enumerate(images):
                write_image(root / f"frame_{k:04d}{suffix}", mode, *((5, 7) if same_size else (h, w)), seed)
            for name in junk:
                if name.endswith("/"):
                    (root / name[:-1]).mkdir()
                else:
                    (root / name).write_bytes(b"" if name == "empty.png" else junk_bytes)
            return root
        return make
    if kind in ("gif", "mp4"):
        data = draw(damaged(video_bytes(kind, draw(st.integers(1, 3)))))

        def make(folder):
            path = folder / f"t.{kind}"
            path.write_bytes(data)
            return path
        return make
    if kind == "bytes":
        data = draw(st.binary(max_size=64))
        suffix = draw(st.sampled_from([".mp4", ".gif", ".png", ".jpg", ".tif", ".mov", ".avi", ".webm", ""]))

        def make(folder):
            path = folder / f"t{suffix}"
            path.write_bytes(data)
            return path
        return make
    return lambda folder: folder / "missing.gif"


SIZES = st.one_of(st.integers(1, 10), st.tuples(st.integers(1, 10), st.integers(1, 10)))
COLOURS = st.one_of(st.none(), st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)))
COUNTS = st.one_of(st.none(), st.integers(1, 4))
#: Options no caller should pass: each must be refused naming its argument.
BAD_OPTIONS = st.one_of(
    st.sampled_from([0, -3, (0, 4), (4, -1), (2.5, 3), "8", (1, 2, 3), True]).map(lambda v: ("size", v)),
    st.sampled_from([(math.nan, 0, 0), (0, 0), "red", (0, math.inf, 0)]).map(lambda v: ("background", v)),
    st.sampled_from([0.0, -0.1, math.nan, math.inf]).map(lambda v: ("tolerance", v)),
    st.sampled_from([0, -1, 1.5]).map(lambda v: ("max_frames", v)),
    st.sampled_from([0, -2, 2.0]).map(lambda v: ("expected_frames", v)),
)


def check_target(result, path, size, expected_frames, max_frames):
    assert isinstance(result, TargetVideo)
    frames = result.frames
    h, w = (size, size) if isinstance(size, int) else size
    assert frames.dtype == np.float32 and frames.ndim == 4 and frames.shape[1:] == (h, w, 4), frames.shape
    assert frames.shape[0] >= 1
    if expected_frames is not None:
        assert frames.shape[0] == expected_frames
    if max_frames is not None:
        assert frames.shape[0] <= max_frames
    assert np.all(np.isfinite(frames)), f"{path}: non-finite target frames"
    assert frames.min() >= 0.0 and frames.max() <= 1.0, (path, frames.min(), frames.max())
    assert all(isinstance(n, int) and n > 0 for n in result.native_size)
    assert result.fps is None or (math.isfinite(result.fps) and result.fps > 0)


def check_error(error, names):
    message = str(error)
    assert any(name in message for name in names), (type(error).__name__, message, names)
    for noise in NOISE:
        assert noise not in message, message


@bounded(100)
@given(target=targets(), size=SIZES, background=COLOURS, tolerance=st.floats(0.01, 1.0), max_frames=COUNTS,
       expected_frames=COUNTS, mask=st.one_of(st.none(), st.none(), targets()))
def test_any_target_loads_or_names_the_file(target, size, background, tolerance, max_frames, expected_frames,
                                            mask):
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "video").mkdir()
        (folder / "mask").mkdir()
        path = target(folder / "video")
        mask_path = None if mask is None else mask(folder / "mask")
        try:
            result = load_target(path, size, background=background, mask=mask_path, tolerance=tolerance,
                                 max_frames=max_frames, expected_frames=expected_frames)
        except (ValueError, FileNotFoundError) as e:
            event(f"refused: {type(e).__name__}")
            check_error(e, [str(path)] + ([str(mask_path)] if mask_path is not None else []))
            return
        event("loaded")
        check_target(result, path, size, expected_frames, max_frames)


@bounded(25)
@given(bad=BAD_OPTIONS, frames=st.integers(1, 3))
def test_a_bad_option_is_refused_by_name_before_reading(bad, frames):
    name, value = bad
    options = {"background": (0.0, 0.0, 0.0), "tolerance": 0.1, name: value}
    size = options.pop("size", 8)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.gif"
        path.write_bytes(video_bytes("gif", frames))
        try:
            load_target(path, size, **options)
        except ValueError as e:
            check_error(e, [name])
            return
    raise AssertionError(f"{name}={value!r} was accepted")


@bounded(30)
@given(mode=st.sampled_from(MODES), frames=st.integers(1, 3), suffix=st.sampled_from([".png", ".jpg", ".bmp", ".tif"]),
       size=st.integers(1, 9), seed=st.integers(0, 100))
def test_every_image_mode_in_a_folder_loads(mode, frames, suffix, size, seed):
    """Well-formed images of one size load, whatever their mode and bit depth, as frames in [0, 1]."""
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        for k in range(frames):
            write_image(root / f"frame_{k:04d}{suffix}", mode, 5, 7, seed + k)
        try:
            result = load_target(root, size := (size, max(1, round(size * 7 / 5))))  # the images' aspect
        except ValueError as e:
            # Refused by name, and only these: a float image holding NaN or inf (written in every third one),
            # and 32-bit integer pixels, which have no agreed white level.
            assert str(root) in str(e), str(e)
            refusable = (mode == "F" and "not finite" in str(e)) or (mode == "I" and "int32 pixels" in str(e))
            assert refusable, str(e)
            return
        check_target(result, root, size, None, None)
        assert result.frames.shape[0] == frames and result.native_size == (5, 7)
