"""Video writing and reading: GIF/MP4/PNG folders, resizing, alpha, side-by-side comparisons."""

import imageio.v2 as imageio
import numpy as np
import pytest

from gradsim_jax.render.video import load_video, side_by_side, write_comparison, write_gif, write_mp4


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
    frames = _frames(t=3, h=33, w=31)  # odd sizes are padded for yuv420p
    path = write_mp4(tmp_path / "out.mp4", frames, fps=10)
    video = load_video(path, (16, 20))
    assert video.shape == (3, 16, 20, 4)
    np.testing.assert_allclose(video[..., 3], 1.0)
    # Lossy codec and resampling: the red block is still red in the middle.
    np.testing.assert_allclose(video[0, 8, 7, :3], [1.0, 0.0, 0.0], atol=0.15)


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
