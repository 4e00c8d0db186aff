"""Video writing and reading: GIF/MP4/PNG folders, resizing, alpha, side-by-side comparisons."""

import imageio.v2 as imageio
import numpy as np
import pytest
from PIL import Image

from gradsim_jax.files import atomic_file
from gradsim_jax.render.video import (
    gif_frame_duration_ms,
    load_target,
    load_video,
    side_by_side,
    write_comparison,
    write_gif,
    write_mp4,
    write_png_folder,
    write_video,
)


def _frames(t=4, h=32, w=32):
    frames = np.zeros((t, h, w, 4), np.float32)
    frames[..., :3] = 1.0  # white background
    for i in range(t):
        frames[i, 8:24, 4 + 2 * i : 20 + 2 * i, :3] = [1.0, 0.0, 0.0]
        frames[i, 8:24, 4 + 2 * i : 20 + 2 * i, 3] = 1.0
    return frames


def test_gif_round_trip_with_alpha_from_background(tmp_path):
    frames = _frames()
    path = write_gif(tmp_path / "out.gif", frames, fps=10)
    video = load_video(path, 32, background=(1.0, 1.0, 1.0))
    assert video.shape == (4, 32, 32, 4) and video.dtype == np.float32
    np.testing.assert_allclose(video[..., :3], frames[..., :3], atol=2 / 255)
    np.testing.assert_allclose(video[..., 3], frames[..., 3], atol=1e-6)


def test_mp4_round_trip_resized(tmp_path):
    frames = _frames(t=3, h=33, w=31)  # odd sizes are padded for yuv420p: 34 x 32
    path = write_mp4(tmp_path / "out.mp4", frames, fps=10)
    video = load_video(path, (17, 16))
    assert video.shape == (3, 17, 16, 4)
    np.testing.assert_allclose(video[..., 3], 1.0)
    # Lossy codec and resampling: the red block is still red in the middle.
    np.testing.assert_allclose(video[0, 8, 6, :3], [1.0, 0.0, 0.0], atol=0.15)


def test_frames_of_another_aspect_ratio_are_refused_not_squashed(tmp_path):
    """Issue 52: a 64 x 48 video fitted at 32 x 32 was resized to a square without a word."""
    path = write_png_folder(tmp_path / "target", _video("resting", t=2, h=48, w=64))
    with pytest.raises(ValueError, match=r"target: the frames are 64 x 48 px and the render 32 x 32 px, another "
                                         r"aspect ratio .* e\.g\. 32 x 24"):
        load_target(path, 32)
    assert load_target(path, (24, 32)).frames.shape == (2, 24, 32, 4)
    assert load_target(path, (25, 32)).frames.shape == (2, 25, 32, 4)  # within a pixel: rounding, not a squash
    with pytest.raises(ValueError, match=r"mask array: the frames are 10 x 10 px"):
        load_target(path, (24, 32), mask=np.ones((2, 10, 10)))


def test_png_folder_with_alpha_and_mask(tmp_path):
    frames = _frames(t=2, h=16, w=16)
    folder = tmp_path / "frames"
    folder.mkdir()
    for i, frame in enumerate(frames):
        imageio.imwrite(folder / f"{i:03d}.png", np.round(frame * 255).astype(np.uint8))  # RGBA
    video = load_video(folder, 8)
    assert video.shape == (2, 8, 8, 4)
    # 2 x 2 box averages of the alpha channel.
    np.testing.assert_allclose(video[..., 3], frames[..., 3].reshape(2, 8, 2, 8, 2).mean((2, 4)), atol=1e-6)
    mask = np.zeros((16, 16), np.float32)
    mask[:8] = 1.0
    video = load_video(folder, 16, mask=mask)
    np.testing.assert_allclose(video[:, :8, :, 3], 1.0)
    np.testing.assert_allclose(video[:, 8:, :, 3], 0.0)


def test_missing_video_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_video(tmp_path / "nope.mp4", 16)


def test_side_by_side_comparison(tmp_path):
    a, b = _frames(t=4), _frames(t=2, h=16, w=16)
    combined = side_by_side([a, b], ["target", "fit"], min_height=64)
    assert combined.shape[0] == 4
    assert combined.shape[1] > 64  # label strip on top
    path = write_comparison(tmp_path / "cmp.gif", [a, b], ["target", "fit"], min_height=64)
    assert imageio.mimread(path)[0].shape[:2] == combined.shape[1:3]
    with pytest.raises(ValueError):
        side_by_side([a], ["x", "y"])


# ----------------------------------------------------------------------------------------------------
# Every frame written reads back; GIF delays; PNG folders; atomic writes.


def _video(pattern, t=6, h=8, w=10):
    """Small RGBA videos: "still" = all frames identical; "resting" = motion, then a run of equal frames."""
    frames = np.zeros((t, h, w, 4), np.float32)
    frames[..., :3] = [0.2, 0.4, 0.6]
    frames[..., 3] = 1.0
    if pattern == "resting":
        for i in range(t):
            x = min(i, 2)  # moves for 2 frames, then rests: frames 2.. are identical
            frames[i, 2:6, x : x + 4, :3] = [1.0, 0.0, 0.0]
    return frames


def _write_any(fmt, tmp_path, frames, fps=10):
    return write_video(tmp_path / {"gif": "v.gif", "mp4": "v.mp4", "png": "v"}[fmt], frames, fps)


@pytest.mark.parametrize("pattern", ["still", "resting"])
@pytest.mark.parametrize("fmt", ["gif", "mp4", "png"])
def test_every_frame_reads_back(tmp_path, fmt, pattern):
    frames = _video(pattern)
    path = _write_any(fmt, tmp_path, frames)
    target = load_target(path, (8, 10))
    assert target.frames.shape == (6, 8, 10, 4)
    if fmt == "mp4":  # lossy codec with chroma subsampling: close on average, not per pixel
        assert np.abs(target.frames[..., :3] - frames[..., :3]).mean() < 0.05
    else:  # exact up to 8-bit quantization (few colors, so the GIF palette holds them all)
        np.testing.assert_allclose(target.frames[..., :3], frames[..., :3], atol=1 / 255)
    if fmt == "gif":
        with Image.open(path) as image:
            assert image.n_frames == 6


@pytest.mark.parametrize("fps", [10, 20, 25])
def test_gif_frames_carry_their_duration_in_ms(tmp_path, fps):
    path = write_gif(tmp_path / "v.gif", _video("resting"), fps=fps)
    durations = []
    with Image.open(path) as image:
        assert image.n_frames == 6
        for k in range(image.n_frames):
            image.seek(k)
            durations.append(image.info["duration"])
    assert durations == [round(1000 / fps)] * 6
    assert load_target(path, (8, 10)).fps == pytest.approx(fps)


def test_gif_duration_rounds_to_centiseconds():
    assert gif_frame_duration_ms(20) == 50
    assert gif_frame_duration_ms(30) == 30  # 33.3 ms is not representable; nearest is 3 cs
    assert gif_frame_duration_ms(1000) == 10  # never 0 (viewers would pick their own speed)
    with pytest.raises(ValueError):
        gif_frame_duration_ms(0)


def test_png_folder_round_trip_is_exact_with_alpha(tmp_path):
    rng = np.random.default_rng(0)
    frames = rng.uniform(size=(3, 5, 7, 4)).astype(np.float32)
    frames[1] = frames[0]  # a repeated frame stays a separate file
    path = write_png_folder(tmp_path / "frames", frames)
    assert sorted(p.name for p in path.iterdir()) == ["frame_0000.png", "frame_0001.png", "frame_0002.png"]
    with Image.open(path / "frame_0000.png") as image:
        assert image.mode == "RGBA"
    target = load_target(path, (5, 7))
    assert target.alpha_source == "alpha channel" and target.alpha_observed
    assert target.native_size == (5, 7) and target.fps is None
    np.testing.assert_allclose(target.frames, np.round(frames * 255) / 255, atol=1e-6)


def test_write_video_rejects_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"\.gif.*\.mp4.*folder"):
        write_video(tmp_path / "v.avi", _video("still"))
    assert list(tmp_path.iterdir()) == []


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path):
    frames = _video("resting")
    for name in ("v.gif", "v.mp4", "v", "v"):  # the folder twice: replacing our own frames is fine
        write_video(tmp_path / name, frames, fps=10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v", "v.gif", "v.mp4"]
    assert len(list((tmp_path / "v").iterdir())) == 6
    # A write that fails midway leaves the previous file untouched and no temporary behind.
    before = (tmp_path / "v.gif").read_bytes()
    with pytest.raises(RuntimeError), atomic_file(tmp_path / "v.gif") as temporary:
        temporary.write_bytes(b"GIF89a partial")
        raise RuntimeError("killed")
    assert (tmp_path / "v.gif").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v", "v.gif", "v.mp4"]


def test_png_folder_never_replaces_a_folder_holding_other_files(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="notes.txt"):
        write_png_folder(folder, _video("still"))
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


# ----------------------------------------------------------------------------------------------------
# load_target: what was observed, frame counts, undistortion, unreadable files.


def test_load_target_reports_where_alpha_came_from(tmp_path):
    frames = _frames(t=3, h=16, w=16)
    mp4 = load_target(write_mp4(tmp_path / "v.mp4", frames, fps=10), 16)
    assert mp4.alpha_source is None and not mp4.alpha_observed
    assert mp4.fps == pytest.approx(10) and mp4.native_size == (16, 16)
    np.testing.assert_allclose(mp4.frames[..., 3], 1.0)
    folder = load_target(write_png_folder(tmp_path / "frames", frames), 8)
    assert folder.alpha_source == "alpha channel"
    gif = write_gif(tmp_path / "v.gif", frames, fps=10)
    assert load_target(gif, 16, background=(1.0, 1.0, 1.0)).alpha_source == "key color"
    masked = load_target(gif, 16, mask=np.ones((16, 16)), background=(1.0, 1.0, 1.0))
    assert masked.alpha_source == "mask" and masked.alpha_observed
    assert load_target(gif, 16).alpha_source is None


def test_expected_frames_too_few_is_an_error_with_both_counts(tmp_path):
    path = write_gif(tmp_path / "target.gif", _video("resting", t=5), fps=10)
    with pytest.raises(ValueError, match=r"target\.gif holds 5 frames.*expected 7"):
        load_target(path, 8, expected_frames=7)


def test_expected_frames_too_many_warns_and_keeps_the_first(tmp_path):
    frames = _video("resting", t=5)
    path = write_png_folder(tmp_path / "target", frames)
    with pytest.warns(UserWarning, match="dropping the last 2"):
        target = load_target(path, (8, 10), expected_frames=3)
    np.testing.assert_allclose(target.frames[..., :3], frames[:3, ..., :3], atol=1 / 255)
    assert load_target(path, (8, 10), expected_frames=5).frames.shape[0] == 5  # exact: no warning


def test_mask_with_fewer_frames_than_the_video_is_an_error(tmp_path):
    path = write_png_folder(tmp_path / "target", _video("resting", t=3))
    with pytest.raises(ValueError, match="2 mask frames.*3"):
        load_target(path, (8, 10), mask=np.ones((2, 8, 10)))


def test_undistort_runs_on_native_frames_before_resizing(tmp_path):
    frames = _video("resting", t=3, h=16, w=12)
    path = write_png_folder(tmp_path / "target", frames)
    mask = np.zeros((16, 12), np.float32)
    mask[:, :6] = 1.0
    shapes = []

    def mirror(image):
        shapes.append(image.shape)
        assert image.dtype == np.float32 and 0.0 <= image.min() and image.max() <= 1.0
        return image[:, ::-1]

    target = load_target(path, (8, 6), mask=mask, undistort=mirror)
    assert shapes == [(16, 12, 4)] * 3 + [(16, 12, 1)]
    assert target.native_size == (16, 12)
    plain = load_target(path, (8, 6))
    np.testing.assert_allclose(target.frames[..., :3], plain.frames[:, :, ::-1, :3], atol=1e-6)
    mirrored_mask = np.zeros((3, 8, 6), np.float32)
    mirrored_mask[..., 3:] = 1.0  # the mask's left half, mirrored, then box-averaged 2 x 2
    np.testing.assert_allclose(target.frames[..., 3], mirrored_mask, atol=1e-6)


@pytest.mark.parametrize("name", ["target.mp4", "target.gif"])
def test_corrupt_video_file_is_a_clear_error(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(np.random.default_rng(1).bytes(600))
    with pytest.raises(ValueError, match=rf"{name}: cannot read frames"):
        load_target(path, 8)


def test_image_folder_ignores_junk_but_not_corrupt_images(tmp_path):
    path = write_png_folder(tmp_path / "target", _video("resting", t=2))
    (tmp_path / "target" / "README.txt").write_text("not a frame")
    assert load_target(path, (8, 10)).frames.shape[0] == 2
    (tmp_path / "target" / "frame_0002.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(ValueError, match=r"frame_0002\.png: cannot read frames"):
        load_target(path, (8, 10))
