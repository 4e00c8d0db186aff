"""Host-side colour patterns: the vectorized checkerboard equals the per-face colorsys loop it replaced."""

import colorsys

import numpy as np

from gradsim_jax.geometry import cloth_grid, quat_from_axis_angle
from gradsim_jax.render.colors import checker_colors, hsv_to_rgb


def checker_colors_loop(triangles, x):
    """The Python loop over faces that checker_colors was (scenes/demos.py before the move)."""
    tris = np.asarray(triangles)
    x = np.asarray(x, np.float64)
    centroid = x[tris].mean(axis=1)
    lo, hi = centroid.min(0), centroid.max(0)
    t = (centroid - lo) / np.maximum(hi - lo, 1e-9)
    ext = np.argsort(-(hi - lo))[:2]
    u = np.floor(t[:, ext[0]] * 7.999).astype(int)
    v = np.floor(t[:, ext[1]] * 7.999).astype(int)
    parity = ((u + v) % 2).astype(float)
    hue = 0.85 * (0.6 * t[:, ext[0]] + 0.4 * t[:, ext[1]])
    rgb = [colorsys.hsv_to_rgb(h, 0.75, 1.0 - 0.45 * p) for h, p in zip(hue, parity)]
    return np.asarray(rgb, np.float32)


def test_checker_colors_equal_the_loop_on_a_grid_and_a_random_mesh():
    scene = cloth_grid(9, 7, 0.1, 0.05, rot=quat_from_axis_angle((1.0, 0.3, 0.0), 0.7))
    rng = np.random.default_rng(0)
    meshes = [(scene.triangles, scene.x), (rng.integers(0, 40, (60, 3)), rng.normal(size=(40, 3)))]
    for tris, x in meshes:
        colors = checker_colors(tris, x)
        assert colors.dtype == np.float32 and colors.shape == (len(tris), 3)
        np.testing.assert_array_equal(colors, checker_colors_loop(tris, x))


def test_hsv_to_rgb_matches_colorsys_in_every_sector():
    hue = np.linspace(0.0, 0.999, 37)
    value = np.linspace(0.2, 1.0, 37)
    expected = [colorsys.hsv_to_rgb(h, 0.6, v) for h, v in zip(hue, value)]
    np.testing.assert_array_equal(hsv_to_rgb(hue, 0.6, value), np.asarray(expected))
