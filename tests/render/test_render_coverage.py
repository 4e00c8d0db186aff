"""The "box" edge model: exact area coverage of pixels, seamless meshes, gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.render import FaceColors, RenderSettings, render, render_dense
from gradsim_jax.render.camera import with_image_size
from gradsim_jax.render.coverage import triangle_square_area


def sampled_area(vertices, center=(0.0, 0.0), side=1.0, n=400):
    """Fraction of the square covered by the triangle, by n x n point samples (numpy)."""
    s = ((np.arange(n) + 0.5) / n - 0.5) * side
    x, y = np.meshgrid(s + center[0], s + center[1])
    x0, y0, x1, y1, x2, y2 = vertices

    def side_of(xa, ya, xb, yb):
        return (xb - xa) * (y - ya) - (yb - ya) * (x - xa)

    a, b, c = side_of(x0, y0, x1, y1), side_of(x1, y1, x2, y2), side_of(x2, y2, x0, y0)
    return (((a >= 0) & (b >= 0) & (c >= 0)) | ((a <= 0) & (b <= 0) & (c <= 0))).mean()


def test_triangle_square_area_is_exact(x64):
    rng = np.random.default_rng(3)
    for _ in range(60):
        v = rng.uniform(-1.2, 1.2, 6)
        for footprint in (1.0, 1.5):
            got = float(triangle_square_area(0.1, -0.2, jnp.asarray(v), 1.0, footprint))
            assert got == pytest.approx(sampled_area(v, (0.1, -0.2), footprint), abs=2e-3)


def test_faces_sharing_edges_and_vertices_cover_exactly(x64):
    """A fan of triangles around a vertex on a straight outline, and a square split along its diagonal:
    the covered fraction of any pixel is the union's, with no seam and no overcount at the vertex."""
    fan = [(0.0, 0.0), (1.0, 0.0), (0.7, 0.6), (-0.2, 0.9), (-1.0, 0.0)]  # half-plane y > 0 near the origin
    tris = [jnp.asarray([*fan[0], *fan[k], *fan[k + 1]]) for k in range(1, 4)]
    for cx, cy in [(0.0, 0.0), (0.1, -0.3), (0.05, 0.2), (-0.1, 0.2)]:
        total = sum(float(triangle_square_area(cx, cy, t, 1.0, 0.5)) for t in tris)
        expected = float(np.clip(cy + 0.25, 0.0, 0.5)) / 0.5  # a 0.5-wide square cut by y = 0
        assert total == pytest.approx(expected, abs=1e-9)


def _scene():
    top, _, st = gs.cloth_grid(3, 3, 0.2, 0.2, pos=(-0.3, -0.3, 0.0), mass=0.05).build()
    rng = np.random.default_rng(0)
    x = jnp.asarray(st.particles.x, jnp.float64) + 0.01 * jnp.asarray(rng.normal(size=st.particles.x.shape))
    colors = FaceColors(jnp.asarray(rng.uniform(0.2, 0.9, (top.cloth.triangles.shape[0], 3))))
    return top.cloth.triangles, x, colors, rng


def test_box_render_matches_supersampled_hard_coverage(x64):
    """Alpha equals the covered fraction of each pixel, measured on a 16 x 16 sample grid per pixel."""
    faces, x, colors, _ = _scene()
    camera = gs.look_at_camera(2.0, 10.0, 20.0, width=20, height=16)
    settings = RenderSettings(coverage="box")
    alpha = np.asarray(jax.jit(lambda v: render(camera, v, faces, colors, settings=settings))(x)[..., 3])
    fine_camera = with_image_size(camera, 320, 256)
    fine = np.asarray(jax.jit(lambda v: render(fine_camera, v, faces, colors, settings=settings))(x)[..., 3])
    # The fine render's pixels are almost all fully in or out: averaging 16 x 16 blocks measures area.
    sampled = fine.reshape(16, 16, 20, 16).mean(axis=(1, 3))
    assert 5 < alpha.sum() and np.abs(alpha - sampled).max() < 0.02
    assert alpha.max() == pytest.approx(1.0) and alpha.min() == 0.0


def test_box_colour_is_blended_by_coverage(x64):
    faces, x, colors, rng = _scene()
    camera = gs.look_at_camera(2.0, 10.0, 20.0, width=20, height=16)
    background = jnp.asarray(rng.uniform(0, 1, (16, 20, 3)))
    image = render(camera, x, faces, colors, background=background, settings=RenderSettings(coverage="box"))
    empty = np.asarray(image[..., 3]) == 0
    np.testing.assert_allclose(np.asarray(image[..., :3])[empty], np.asarray(background)[empty], atol=1e-12)


@pytest.mark.parametrize("supersample", [1, pytest.param(2, marks=pytest.mark.slow)])  # 2: suite time
def test_box_gradients_tiled_dense_and_finite_differences(x64, supersample):
    faces, x, colors, rng = _scene()
    camera = gs.look_at_camera(2.0, 10.0, 20.0, width=12, height=10)
    background = jnp.asarray(rng.uniform(0, 1, (10, 12, 3)))
    settings = RenderSettings(coverage="box", supersample=supersample, tile_capacity=64, pixel_capacity=32)
    w = jnp.asarray(rng.normal(size=(10, 12, 4)))

    @jax.jit
    def tiled(v, b):
        return jnp.sum(w * render(camera, v, faces, colors, background=b, settings=settings))

    @jax.jit
    def dense(v, b):
        return jnp.sum(w * render_dense(camera, v, faces, colors, background=b, settings=settings))

    assert float(tiled(x, background)) == pytest.approx(float(dense(x, background)), rel=1e-12)
    g_tiled = jax.jit(jax.grad(tiled, (0, 1)))(x, background)
    g_dense = jax.jit(jax.grad(dense, (0, 1)))(x, background)
    for a, b in zip(g_tiled, g_dense):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-10)
    direction = jnp.asarray(rng.normal(size=x.shape))
    eps = 1e-6
    fd = (tiled(x + eps * direction, background) - tiled(x - eps * direction, background)) / (2 * eps)
    assert float(jnp.sum(g_tiled[0] * direction)) == pytest.approx(float(fd), rel=1e-5)


def test_coverage_setting_is_checked():
    with pytest.raises(ValueError, match="coverage"):
        RenderSettings(coverage="exact")
    with pytest.raises(ValueError, match="pixel_footprint"):
        RenderSettings(coverage="box", pixel_footprint=4.0)
