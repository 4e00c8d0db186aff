"""The rasterizer's one-hot row selection (`RenderSettings.one_hot_rows`, the TPU's default) against its gathers:
the same images and gradients for every coverage model, colour kind and candidate layout, also when a tile's
list has empty slots next to a face whose screen row is not finite."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sheets import wavy_sheet

from gradsim_jax.render import FaceColors, Lights, RenderSettings, Texture, VertexColors, look_at_camera, render
from gradsim_jax.render import rasterize

EPS32 = float(np.finfo(np.float32).eps)


def _colors(kind, v, faces):
    rng = np.random.default_rng(1)
    if kind == "face":
        return FaceColors(jnp.asarray(rng.uniform(0.2, 1.0, (len(faces), 3)), jnp.float32))
    if kind == "vertex":
        return VertexColors(jnp.asarray(rng.uniform(0.2, 1.0, (len(v), 3)), jnp.float32))
    image = jnp.asarray(rng.uniform(0.0, 1.0, (8, 8, 3)), jnp.float32)
    return Texture(image, jnp.asarray((v[:, :2] - v[:, :2].min(0)) / np.ptp(v[:, :2], 0), jnp.float32))


def _image_and_gradient(camera, v, faces, colors, settings):
    """The image and the gradient of a fixed random projection of it, in one compiled program."""
    lights = Lights(jnp.asarray(0.4), jnp.asarray(0.6), jnp.asarray([0.3, 1.0, 0.6]))
    weights = jnp.asarray(np.random.default_rng(2).normal(size=(camera.height, camera.width, 4)), jnp.float32)

    def run(x):
        image, pullback = jax.vjp(lambda y: render(camera, y, jnp.asarray(faces), colors, lights=lights,
                                                   settings=settings), x)
        return image, pullback(weights[..., : image.shape[-1]] if image.ndim == 3 else weights[..., 0])[0]

    image, grad = jax.jit(run)(jnp.asarray(v))
    return np.asarray(image), np.asarray(grad)


# (coverage, colour kind, pixel capacity): a pixel capacity below the tile's gives each pixel its own list
# (local indices into the tile's rows); at the tile's, every pixel takes the whole list (no selection).
# The hand-written rule with local indices is the next test's (softras, face colours, 4 a pixel). DIB-R's kernel
# takes its rows through the same `pair_rows` as autodiff's (the texture case).
CASES = [
    ("softras", "texture", 4),  # autodiff's kernel
    ("box", "vertex", 24),  # the hand-written rule and the area coverage, every pixel taking its tile's list
]


@pytest.mark.parametrize("coverage, kind, pixel_capacity", CASES)
def test_one_hot_rows_match_gathers(coverage, kind, pixel_capacity):
    v, faces = wavy_sheet()
    camera = look_at_camera(2.2, 15.0, 20.0, width=32, height=24)
    # 4 px tiles, 24 faces a tile at most and chunks of a few tiles: several chunks, tiles with empty slots.
    base = RenderSettings(tile_size=4, tile_capacity=24, pixel_capacity=pixel_capacity, pairs_per_chunk=1536,
                          coverage=coverage)
    colors = _colors(kind, v, faces)
    image_g, grad_g = _image_and_gradient(camera, v, faces, colors, dataclasses.replace(base, one_hot_rows=False))
    image_h, grad_h = _image_and_gradient(camera, v, faces, colors, dataclasses.replace(base, one_hot_rows=True))
    assert np.all(np.isfinite(image_h)) and np.all(np.isfinite(grad_h))
    assert np.max(np.abs(grad_g)) > 0
    # The same rows reach the same arithmetic (a one-hot product with finite rows is exact): the images differ
    # at most by the compiler's contraction of a few multiply-adds, a few ulps of values in [0, 1].
    np.testing.assert_allclose(image_h, image_g, rtol=0, atol=8 * EPS32)
    # The gradient's per-face sums run in another order: float32 rounding of sums of up to (pixels in a tile)
    # x (faces a pixel) = 16 x 24 terms, each bounded by the largest gradient entry.
    np.testing.assert_allclose(grad_h, grad_g, rtol=0, atol=16 * 24 * EPS32 * np.max(np.abs(grad_g)))


def test_empty_slots_beside_a_face_with_infinite_screen_row():
    """A face with a corner in the camera's plane (depth 0) projects to inf and is dropped; the tiles' empty
    slots must not carry its row into the one-hot products (0 x inf = NaN)."""
    v, faces = wavy_sheet(4, 3)
    camera = look_at_camera(2.2, 15.0, 20.0, width=24, height=24)
    rotation, translation = np.asarray(camera.rotation), np.asarray(camera.translation)
    eye = (-rotation.T @ translation).astype(np.float32)  # the camera's centre: depth 0
    v = np.concatenate([v, eye[None], (eye + [0.1, 0.0, 0.0])[None], (eye + [0.0, 0.1, 0.0])[None]])
    n = len(v)
    faces = np.concatenate([[[n - 3, n - 2, n - 1]], faces]).astype(np.int32)  # first: the first empty slot
    colors = _colors("face", v, faces)
    base = RenderSettings(tile_size=4, tile_capacity=16, pixel_capacity=4)
    image_g, grad_g = _image_and_gradient(camera, v, faces, colors, dataclasses.replace(base, one_hot_rows=False))
    image_h, grad_h = _image_and_gradient(camera, v, faces, colors, dataclasses.replace(base, one_hot_rows=True))
    assert np.all(np.isfinite(image_h)) and np.all(np.isfinite(grad_h[:-3]))
    np.testing.assert_allclose(image_h, image_g, rtol=0, atol=8 * EPS32)
    np.testing.assert_allclose(grad_h[:-3], grad_g[:-3], rtol=0, atol=16 * 16 * EPS32 * np.max(np.abs(grad_g[:-3])))


def test_one_hot_rows_follow_the_backend(monkeypatch):
    assert rasterize.one_hot_rows(RenderSettings()) == (jax.default_backend() in rasterize.ONE_HOT_BACKENDS)
    monkeypatch.setattr(rasterize, "ONE_HOT_BACKENDS", (jax.default_backend(),))
    assert rasterize.one_hot_rows(RenderSettings())
    assert not rasterize.one_hot_rows(RenderSettings(one_hot_rows=False))
