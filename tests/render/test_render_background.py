"""Per-pixel background images: the [3] case, tiled vs dense, chunked tiles, gradients, bad shapes.

The tests compare renderers with one another (or use left-right symmetric meshes and masks), so they
do not depend on the image's left/right orientation.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_render_rasterize import cloth as rasterize_cloth
from test_render_rasterize import square

from gradsim_jax.render import (
    RenderSettings,
    VertexColors,
    camera_from_eye,
    render,
    render_dense,
    render_video,
    render_with_stats,
)

SIZE = 16

jit_render = jax.jit(render)
jit_render_dense = jax.jit(render_dense, static_argnames=("with_color",))


def cloth(nx=4, ny=3, cell=0.3):
    return rasterize_cloth(nx, ny, cell)


def front_camera(width=SIZE, height=None, distance=2.5):
    height = width if height is None else height
    return camera_from_eye(jnp.array([0.0, 0.0, -distance]), width=width, height=height)


def random_background(height, width, seed=0, dtype=np.float32):
    return jnp.asarray(np.random.default_rng(seed).uniform(0, 1, (height, width, 3)), dtype)


def _colors(num_vertices, seed=1):
    return VertexColors(np.random.default_rng(seed).uniform(0, 1, (num_vertices, 3)).astype(np.float32))


# Lists per pixel, 4 x 4 tiles, 3 tiles per chunk: many chunks, a padded last chunk, empty tiles skipped.
CHUNKED = RenderSettings(gamma=1e-2, tile_size=4, tile_capacity=24, pixel_capacity=12, pairs_per_chunk=16 * 12 * 3)
ONE_CHUNK = RenderSettings(gamma=1e-2, tile_size=8, tile_capacity=32, pixel_capacity=32)


# ------------------------------------------------------------------------------------------------
# Values.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("supersample", [1, pytest.param(2, marks=pytest.mark.slow)])  # 2: suite time
def test_uniform_image_equals_constant_background(supersample):
    v, f = cloth()
    cam = front_camera()
    colors = _colors(len(v))
    rgb = np.array([0.2, 0.5, 0.7], np.float32)
    image_bg = jnp.broadcast_to(jnp.asarray(rgb), (SIZE, SIZE, 3))
    for settings in (ONE_CHUNK, CHUNKED):
        settings = dataclasses.replace(settings, supersample=supersample)
        constant = jit_render(cam, v, f, colors, background=rgb, settings=settings)
        per_pixel = jit_render(cam, v, f, colors, background=image_bg, settings=settings)
        assert per_pixel.shape == (SIZE, SIZE, 4)
        np.testing.assert_allclose(per_pixel, constant, atol=1e-6)
    constant = jit_render_dense(cam, v, f, colors, background=rgb, settings=settings)
    per_pixel = jit_render_dense(cam, v, f, colors, background=image_bg, settings=settings)
    np.testing.assert_allclose(per_pixel, constant, atol=1e-6)


@pytest.mark.parametrize("supersample", [1, 2])
def test_background_image_tiled_equals_dense_and_shows_far_from_the_mesh(supersample):
    size = 20
    v, f = square(0.3)  # left-right symmetric, centered
    cam = front_camera(size)
    colors = _colors(len(v))
    background = random_background(size, size)
    settings = dataclasses.replace(ONE_CHUNK, supersample=supersample)
    tiled = jit_render(cam, v, f, colors, background=background, settings=settings)
    dense = jit_render_dense(cam, v, f, colors, background=background, settings=settings)
    np.testing.assert_allclose(tiled, dense, atol=1e-5)
    # The square covers the central ~8 x 8 pixels: a 4-pixel border ring is far from it.
    far = np.ones((size, size), bool)
    far[4:-4, 4:-4] = False
    tiled = np.asarray(tiled)
    np.testing.assert_array_equal(tiled[far][:, :3], np.asarray(background)[far])
    np.testing.assert_array_equal(tiled[far][:, 3], 0.0)
    assert tiled[..., 3].max() > 0.9
    # Alpha does not depend on the background.
    black = jit_render(cam, v, f, colors, settings=settings)
    np.testing.assert_allclose(tiled[..., 3], black[..., 3], atol=1e-7)


def test_chunked_tiles_with_background_image_equal_dense():
    # A non-square image that is no whole number of tiles (padding pixels) and a small mesh (empty tiles).
    width, height = 30, 26
    v, f = cloth(nx=4, ny=2, cell=0.25)  # 16 faces: more than a pixel keeps
    cam = front_camera(width, height)
    colors = _colors(len(v))
    background = random_background(height, width, seed=3)
    image, stats = jax.jit(render_with_stats)(cam, v, f, colors, background=background, settings=CHUNKED)
    assert int(stats.overflow) == 0
    dense = jit_render_dense(cam, v, f, colors, background=background, settings=CHUNKED)
    assert image.shape == (height, width, 4)
    np.testing.assert_allclose(image, dense, atol=1e-5)
    empty = np.asarray(image[..., 3]) == 0
    assert empty.sum() > width * height // 2
    np.testing.assert_array_equal(np.asarray(image)[empty][:, :3], np.asarray(background)[empty])


def test_render_video_with_background_image():
    v, f = cloth()
    cam = front_camera()
    frames = jnp.stack([jnp.asarray(v) * (1.0 + 0.1 * t) for t in range(3)])
    background = random_background(SIZE, SIZE, seed=4)
    video = jax.jit(lambda fr, bg: render_video(cam, fr, f, background=bg, settings=CHUNKED))(frames, background)
    loop = jnp.stack([jit_render(cam, frame, f, background=background, settings=CHUNKED) for frame in frames])
    assert video.shape == (3, SIZE, SIZE, 4)
    np.testing.assert_allclose(video, loop, atol=1e-5)


# ------------------------------------------------------------------------------------------------
# Gradients.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings", [pytest.param(ONE_CHUNK, marks=pytest.mark.slow), pytest.param(CHUNKED, marks=pytest.mark.slow),
                 # suite time: the supersampled case below is chunked too
                 dataclasses.replace(CHUNKED, supersample=2)], ids=["one_chunk", "chunked", "ss2"]
)
def test_background_image_gradients_match_dense_autodiff(settings):
    with jax.enable_x64(True):
        width, height = 14, 12
        v, f = cloth(nx=4, ny=2, cell=0.25)
        # Jittered off the symmetric grid, where pixel centers meet edges and the loss has kinks.
        v = v + np.random.default_rng(9).uniform(-0.03, 0.03, v.shape)
        cam = front_camera(width, height)
        colors = _colors(len(v))
        weights = jnp.asarray(np.random.default_rng(5).uniform(-1, 1, (height, width, 4)))
        params = (jnp.asarray(v, jnp.float64), random_background(height, width, seed=6, dtype=np.float64))

        def tiled(p):
            image, stats = render_with_stats(cam, p[0], f, colors, background=p[1], settings=settings)
            return jnp.sum(weights * image), stats.overflow

        def dense(p):
            return jnp.sum(weights * render_dense(cam, p[0], f, colors, background=p[1], settings=settings))

        (value, overflow), g_tiled = jax.jit(jax.value_and_grad(tiled, has_aux=True))(params)
        dense_value, g_dense = jax.jit(jax.value_and_grad(dense))(params)
        assert int(overflow) == 0
        np.testing.assert_allclose(value, dense_value, rtol=1e-9)
        for name, gt, gd in zip(("vertices", "background"), g_tiled, g_dense):
            assert gt.dtype == jnp.float64 and gt.shape == gd.shape
            np.testing.assert_allclose(gt, gd, rtol=1e-7, atol=1e-9, err_msg=name)
            assert float(jnp.abs(gt).max()) > 0, name
        # Far from the mesh a background pixel passes straight through: its gradient is the RGB weight.
        np.testing.assert_allclose(g_tiled[1][0, 0], weights[0, 0, :3], rtol=1e-12)


def test_background_pixel_finite_differences():
    with jax.enable_x64(True):
        v, f = square(0.3)
        cam = front_camera(SIZE)
        colors = _colors(len(v))
        weights = jnp.asarray(np.random.default_rng(7).uniform(-1, 1, (SIZE, SIZE, 4)))
        background = random_background(SIZE, SIZE, seed=8, dtype=np.float64)
        vertices = jnp.asarray(v, jnp.float64)

        @jax.jit
        def value_and_grad(bg):
            return jax.value_and_grad(
                lambda b: jnp.sum(weights * render(cam, vertices, f, colors, background=b, settings=CHUNKED))
            )(bg)

        _, grad = value_and_grad(background)
        alpha = np.asarray(jit_render(cam, vertices, f, colors, settings=CHUNKED)[..., 3])
        # Pixels on the soft edge (partial background weight), inside and far from the square.
        edge = np.argwhere((alpha > 0.05) & (alpha < 0.95))
        assert len(edge) > 0
        pixels = [tuple(edge[0]), tuple(edge[len(edge) // 2]), (SIZE // 2, SIZE // 2), (0, SIZE - 1)]
        eps = 1e-6
        for r, c in pixels:
            for k in range(3):
                delta = jnp.zeros_like(background).at[r, c, k].set(eps)
                fd = (value_and_grad(background + delta)[0] - value_and_grad(background - delta)[0]) / (2 * eps)
                np.testing.assert_allclose(float(grad[r, c, k]), float(fd), rtol=1e-6, atol=1e-9)
        assert 0 < abs(float(grad[pixels[0]][0])) < abs(float(weights[pixels[0]][0]))


# ------------------------------------------------------------------------------------------------
# Shapes.
# ------------------------------------------------------------------------------------------------


def test_wrong_background_shape_is_rejected():
    v, f = square()
    cam = front_camera(8, 6)
    for shape in [(2,), (6, 8), (6, 8, 4), (8, 6, 3), (6, 9, 3), (48, 3), (1, 6, 8, 3)]:
        with pytest.raises(ValueError, match="background"):
            render(cam, v, f, background=np.zeros(shape, np.float32))
        with pytest.raises(ValueError, match="background"):
            render_dense(cam, v, f, background=np.zeros(shape, np.float32))
    # With supersampling the image is given at the output size.
    with pytest.raises(ValueError, match="background"):
        render(cam, v, f, background=np.zeros((12, 16, 3), np.float32), settings=RenderSettings(supersample=2))
    with pytest.raises(ValueError, match="background"):
        jax.jit(render)(cam, v, f, background=np.zeros((6, 9, 3), np.float32))
