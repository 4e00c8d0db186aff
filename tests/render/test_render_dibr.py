"""DIB-R mode of the rasterizer (`RenderSettings(coverage="dibr")`): covered pixels against exact
perspective-correct barycentric interpolation, the soft silhouette outside against its formula, the tiled
renderer against the dense reference, and gradients against float64 finite differences."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sheets import wavy_sheet

from gradsim_jax.render import (
    FaceColors,
    RenderSettings,
    Texture,
    VertexColors,
    look_at_camera,
    render,
    render_dense,
    render_with_stats,
)

SIZE = 24
DIBR = RenderSettings(coverage="dibr", tile_size=4, tile_capacity=32)


def cloth(nx=6, ny=4, cell=0.25):
    """A wavy sheet (`sheets.wavy_sheet`) in float64."""
    return wavy_sheet(nx, ny, cell, np.float64)


def _camera(dtype=jnp.float32, size=SIZE):
    return look_at_camera(2.2, 15.0, 20.0, width=size, height=size, dtype=dtype)


def _np_screen(camera, v):
    """Screen xy and camera depth of `v` [N, 3], in float64, from the camera's own matrices."""
    from gradsim_jax.render.camera import project

    with jax.enable_x64(True):
        cam64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), camera)
        xy, z = project(cam64, jnp.asarray(v, jnp.float64))
        return np.asarray(xy), np.asarray(z)


def _pixel_centers(size):
    c = (2 * np.arange(size) + 1 - size) / size
    x, y = np.meshgrid(c, -c)
    return np.stack([x, y], -1).reshape(-1, 2)


def _exact_image(camera, v, f, vertex_rgb, size):
    """Exact rasterization: per pixel the front covering face (smallest perspective-correct depth) and its
    perspective-correct barycentric interpolation of the vertex colours; the distance of each pixel
    centre to the nearest edge of that face (in screen units); covered mask."""
    xy, z = _np_screen(camera, v)
    p = _pixel_centers(size)
    best_z = np.full(len(p), np.inf)
    rgb = np.zeros((len(p), 3))
    margin = np.full(len(p), np.inf)
    for tri in f:
        a, b, c = xy[tri]
        area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        if abs(area) < 1e-12:
            continue

        def edge(q0, q1):
            return ((q1[0] - q0[0]) * (p[:, 1] - q0[1]) - (q1[1] - q0[1]) * (p[:, 0] - q0[0])) / area

        u = np.stack([edge(b, c), edge(c, a), edge(a, b)], 1)  # screen barycentrics
        inside = np.all(u > 0, axis=1)
        w = u / z[tri]
        depth = 1.0 / w.sum(1)
        bary = w * depth[:, None]
        front = inside & (depth < best_z)
        best_z[front] = depth[front]
        rgb[front] = bary[front] @ vertex_rgb[tri]
        lengths = [np.linalg.norm(xy[tri[(k + 1) % 3]] - xy[tri[k]]) for k in range(3)]
        dist = np.min(np.abs(u) * abs(area) / np.asarray([lengths[1], lengths[2], lengths[0]]), axis=1)
        margin[front] = dist[front]
    return rgb.reshape(size, size, 3), np.isfinite(best_z).reshape(size, size), margin.reshape(size, size)


def test_covered_pixels_take_exact_barycentric_interpolation():
    """Each covered pixel's colour is the front face's perspective-correct interpolation of its vertex
    colours, whatever sigma (SoftRas's is blended with neighbours and background). float32 tolerance: the
    barycentrics come from products of screen coordinates of O(1) over areas of O(0.05): ~1e-5 relative."""
    v, f = cloth()
    rgb = np.random.default_rng(0).uniform(0, 1, (len(v), 3))
    camera = _camera()
    exact, covered, margin = _exact_image(camera, v, f, rgb, SIZE)
    assert 100 < covered.sum() < SIZE * SIZE - 50
    background = np.asarray([0.2, 0.3, 0.4])
    for sigma in (1e-5, 1e-3):
        settings = dataclasses.replace(DIBR, sigma=sigma)
        image = np.asarray(render(camera, jnp.asarray(v, jnp.float32), f,
                                                              VertexColors(jnp.asarray(rgb, jnp.float32)),
                                                              background=background, settings=settings))
        # Pixels whose centre is within 1e-4 of an edge could fall either side in float32.
        sure = covered & (margin > 1e-4)
        assert sure.sum() > 0.9 * covered.sum()
        np.testing.assert_allclose(image[sure][:, :3], exact[sure], atol=5e-5)
        np.testing.assert_array_equal(image[covered][:, 3], 1.0)
        np.testing.assert_allclose(image[~covered][:, :3], np.broadcast_to(background, (int((~covered).sum()), 3)),
                                   atol=1e-7)
    # SoftRas at the same sigma blends across edges: it is not exact there.
    soft = np.asarray(render(camera, jnp.asarray(v, jnp.float32), f, VertexColors(jnp.asarray(rgb, jnp.float32)),
                             background=background, settings=RenderSettings(sigma=1e-3)))
    assert np.abs(soft[covered][:, :3] - exact[covered]).max() > 1e-2


def test_outside_alpha_is_the_soft_silhouette_formula():
    """An uncovered pixel's alpha is 1 - prod_j (1 - exp(-d_j^2 / sigma)) over faces within the cutoff
    (d_j: distance to face j); beyond the cutoff of every face it is 0."""
    v = np.array([[-0.4, -0.3, 0.0], [0.5, -0.2, 0.0], [0.0, 0.45, 0.0], [0.6, 0.5, 0.1], [0.9, 0.0, 0.2]])
    f = np.array([[0, 1, 2], [1, 3, 2], [1, 4, 3]], np.int32)
    camera = _camera()
    sigma = 2e-3
    settings = dataclasses.replace(DIBR, sigma=sigma)
    alpha = np.asarray(render(camera, jnp.asarray(v, jnp.float32), f, settings=settings))[..., 3]
    xy, _ = _np_screen(camera, v)
    p = _pixel_centers(SIZE)
    transmit = np.ones(len(p))
    inside_any = np.zeros(len(p), bool)
    for tri in f:
        pts = xy[tri]
        d = np.full(len(p), np.inf)
        signs = []
        for k in range(3):
            a, b = pts[k], pts[(k + 1) % 3]
            e = b - a
            t = np.clip(((p - a) @ e) / (e @ e), 0, 1)
            d = np.minimum(d, np.linalg.norm(p - a - t[:, None] * e, axis=1))
            signs.append(e[0] * (p[:, 1] - a[1]) - e[1] * (p[:, 0] - a[0]))
        signs = np.stack(signs)
        inside = np.all(signs > 0, 0) | np.all(signs < 0, 0)
        inside_any |= inside
        cover = np.exp(-d * d / sigma)
        transmit *= np.where(~inside & (cover >= settings.dist_eps), 1 - cover, 1.0)
    expected = np.where(inside_any, 1.0, 1.0 - transmit).reshape(SIZE, SIZE)
    partial = (expected > 1e-3) & (expected < 0.999)
    assert partial.sum() > 20  # the test sees the soft band
    # float32: d^2 / sigma of O(10) with ~1e-6 relative error in d^2 moves exp by ~1e-5.
    np.testing.assert_allclose(alpha, expected, atol=5e-5)
    alpha_only = np.asarray(jax.jit(lambda x: render_with_stats(camera, x, f, settings=settings, with_color=False)[0])(
        jnp.asarray(v, jnp.float32)))
    np.testing.assert_allclose(alpha_only, alpha, atol=1e-7)


@pytest.mark.parametrize("per_pixel", [False, True])
def test_tiled_equals_dense(per_pixel):
    v, f = cloth()
    rgb = np.random.default_rng(1).uniform(0, 1, (len(f), 3)).astype(np.float32)
    settings = dataclasses.replace(DIBR, sigma=1e-3, pixel_capacity=8 if per_pixel else 32)
    camera = _camera()
    image, stats = render_with_stats(camera, jnp.asarray(v, jnp.float32), f, FaceColors(rgb), settings=settings)
    assert int(stats.tile_overflow) == 0 and int(stats.pixel_overflow) == 0
    dense = render_dense(camera, jnp.asarray(v, jnp.float32), f, FaceColors(rgb), settings=settings)
    np.testing.assert_allclose(np.asarray(image), np.asarray(dense), atol=1e-6)


def test_gradients_match_finite_differences():
    """float64: a loss of the RGBA image (vertex colours, face colours through lights-free shading, a
    texture) and of the alpha-only silhouette, against central differences along random directions, in
    the vertices, the colours, the texture and the background."""
    with jax.enable_x64(True):
        v, f = cloth()
        v = v + np.random.default_rng(7).uniform(-0.03, 0.03, v.shape)  # no pixel centre near an edge
        rng = np.random.default_rng(2)
        uv = (v[:, :2] - v[:, :2].min(0)) / np.ptp(v[:, :2], 0)
        uv = 0.05 + 0.9 * uv + rng.uniform(-0.02, 0.02, uv.shape)
        weights = jnp.asarray(rng.uniform(-1, 1, (3, SIZE, SIZE, 4)))
        camera = _camera(jnp.float64)
        settings = dataclasses.replace(DIBR, sigma=3e-3)
        params = {"vertices": jnp.asarray(v), "vertex_rgb": jnp.asarray(rng.uniform(0, 1, (len(v), 3))),
                  "texture": jnp.asarray(rng.uniform(0, 1, (5, 7, 3))), "background": jnp.asarray([0.1, 0.5, 0.9])}

        def loss(p):
            a = render(camera, p["vertices"], f, VertexColors(p["vertex_rgb"]), background=p["background"],
                       settings=settings)
            b = render(camera, p["vertices"], f, Texture(p["texture"], jnp.asarray(uv)), settings=settings)
            c = render_with_stats(camera, p["vertices"], f, settings=settings, with_color=False)[0]
            return jnp.sum(weights[0] * a) + jnp.sum(weights[1] * b) + jnp.sum(weights[2, ..., 0] * c)

        value_and_grad = jax.jit(jax.value_and_grad(loss))
        _, grad = value_and_grad(params)
        for name in params:
            assert float(jnp.abs(grad[name]).max()) > 0, name
        directions = np.random.default_rng(3)
        eps = 1e-6
        for _ in range(3):
            d = {k: jnp.asarray(directions.normal(size=np.shape(x))) for k, x in params.items()}
            plus = {k: params[k] + eps * d[k] for k in params}
            minus = {k: params[k] - eps * d[k] for k in params}
            fd = (value_and_grad(plus)[0] - value_and_grad(minus)[0]) / (2 * eps)
            analytic = sum(jnp.sum(grad[k] * d[k]) for k in params)
            np.testing.assert_allclose(float(analytic), float(fd), rtol=1e-5, atol=1e-8)


def test_bad_coverage_is_named():
    with pytest.raises(ValueError, match="coverage must be one of 'softras', 'box', 'dibr'"):
        RenderSettings(coverage="dib-r")
