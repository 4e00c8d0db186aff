"""Density fields as images (render/density.py): exact in its limits (no smoke: the background; dense smoke:
the colour map's last colour), rows flipped (the grid is y up), bilinear resampling exact on a linear ramp,
gradients against float64 finite differences, and our errors for bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.render.density import COLORMAPS, apply_colormap, density_image


def test_no_smoke_is_the_background_and_dense_smoke_the_last_colour():
    img = np.asarray(density_image(np.zeros((2, 5, 7)), background=(0.1, 0.2, 0.3)))
    assert img.shape == (2, 5, 7, 4)
    np.testing.assert_array_equal(img[..., :3], np.broadcast_to(np.float32([0.1, 0.2, 0.3]), (2, 5, 7, 3)))
    assert np.all(img[..., 3] == 0)
    dense = np.asarray(density_image(np.full((3, 3), 200.0), colormap="fire"))  # exp(-200) underflows: opacity 1
    np.testing.assert_allclose(dense[..., :3], np.broadcast_to(COLORMAPS["fire"][-1], (3, 3, 3)), atol=1e-6)
    assert np.all(dense[..., 3] == 1)


def test_each_pixel_is_its_cell_with_rows_flipped(x64):
    rng = np.random.default_rng(0)
    d = rng.uniform(0, 2, size=(4, 6))
    img = np.asarray(density_image(d, colormap="grey", scale=0.5, background=(0.0, 0.5, 1.0)))
    a = 1 - np.exp(-d[::-1] / 0.5)  # row 0 of the image is the top row of the grid
    expected = np.array([0.0, 0.5, 1.0]) * (1 - a[..., None]) + a[..., None] * a[..., None]  # grey: colour = a
    np.testing.assert_allclose(img[..., :3], expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(img[..., 3], a, rtol=1e-12)


def test_resampling_is_exact_on_a_linear_ramp(x64):
    # The density is resampled (bilinearly: exact on linear functions), then made an opacity 1 - exp(-d).
    nx, width = 8, 32
    ramp = 0.1 + 0.8 * (np.arange(nx) + 0.5) / nx  # linear in the cell centre x
    img = np.asarray(density_image(np.tile(ramp, (3, 1)), size=(12, width), colormap="grey"))
    centres = (np.arange(width) + 0.5) / width
    inside = (centres >= 0.5 / nx) & (centres <= 1 - 0.5 / nx)  # outside the first/last centre: held constant
    np.testing.assert_allclose(-np.log(1 - img[5, inside, 3]), 0.1 + 0.8 * centres[inside], rtol=1e-12)
    np.testing.assert_allclose(-np.log(1 - img[5, ~inside, 3]), np.where(centres[~inside] < 0.5, ramp[0], ramp[-1]),
                               rtol=1e-12)


def test_colormap_is_piecewise_linear_through_its_colours(x64):
    colors = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    out = np.asarray(apply_colormap(jnp.asarray([0.0, 0.25, 0.5, 0.75, 1.0]), colors))
    np.testing.assert_allclose(out, [[0, 0, 0], [0.5, 0, 0], [1, 0, 0], [1, 0.5, 0.5], [1, 1, 1]], atol=1e-15)


def test_gradient_matches_float64_finite_differences(x64):
    rng = np.random.default_rng(1)
    d0 = jnp.asarray(rng.uniform(0.1, 1.5, size=(5, 4)))
    target = jnp.asarray(rng.uniform(size=(9, 7, 4)))

    @jax.jit
    def loss(d, scale):
        return jnp.sum((density_image(d, size=(9, 7), colormap="fire", scale=scale) - target) ** 2)

    g_d, g_s = jax.jit(jax.grad(loss, argnums=(0, 1)))(d0, 0.8)
    eps = 1e-6
    direction = jnp.asarray(rng.normal(size=d0.shape))
    fd = (loss(d0 + eps * direction, 0.8) - loss(d0 - eps * direction, 0.8)) / (2 * eps)
    # The colour map's kinks (at its control colours) are crossed by no pixel within eps: central differences
    # are then O(eps^2) off; 1e-7 relative leaves rounding (1e-16 |loss| / eps) room.
    assert abs(float(jnp.sum(g_d * direction)) - float(fd)) < 1e-7 * abs(float(fd))
    fd_s = (loss(d0, 0.8 + eps) - loss(d0, 0.8 - eps)) / (2 * eps)
    assert abs(float(g_s) - float(fd_s)) < 1e-7 * abs(float(fd_s))


@pytest.mark.parametrize("kwargs,message", [
    (dict(colormap="viridis"), "colormap must be one of"),
    (dict(colormap=[[0.0, 0.0, 0.0]]), r"\[k, 3\]"),
    (dict(colormap=[[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]]), r"in \[0, 1\]"),
    (dict(background=(1.0, 0.0)), "background"),
    (dict(size=(0, 4)), "size"),
])
def test_bad_input_names_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        density_image(np.zeros((3, 3)), **kwargs)


# ------------------------------------------------------------------------------------------------
# The slab through a camera (density_slab_image).
# ------------------------------------------------------------------------------------------------


def _rays(camera):
    """Eye [3] and world ray directions [H, W, 3] of the pixel centres, from the camera's matrices (float64)."""
    rot = np.asarray(camera.rotation, np.float64)
    v, u = np.mgrid[0:camera.height, 0:camera.width].astype(np.float64)
    local = np.stack([(u - float(camera.principal[0])) / float(camera.focal[0]),
                      (v - float(camera.principal[1])) / float(camera.focal[1]), np.ones_like(u)], -1)
    return np.asarray(camera.eye, np.float64), local @ rot


def test_slab_on_a_linear_ramp_is_beer_lambert_along_each_ray(x64):
    """A density linear in x and y (bilinear sampling is exact on it inside the cell centres) seen from an
    oblique camera: each pixel whose ray meets the slab has opacity 1 - exp(-rho(hit) / (scale cos)) with the
    hit point and cos computed here; the others are background with alpha 0."""
    from gradsim_jax.render.camera import camera_from_eye
    from gradsim_jax.render.density import density_slab_image

    ny, nx = 8, 10
    corner, extent = np.array([-1.0, -0.8, 0.2]), np.array([2.0, 1.6])
    xs = corner[0] + (np.arange(nx) + 0.5) * extent[0] / nx
    ys = corner[1] + (np.arange(ny) + 0.5) * extent[1] / ny
    ramp = lambda x, y: 0.3 + 0.4 * (x - corner[0]) + 0.25 * (y - corner[1])  # noqa: E731
    d = ramp(xs[None, :], ys[:, None])
    camera = camera_from_eye(jnp.array([0.7, 0.5, -2.5]), jnp.array([0.0, 0.0, 0.2]), width=24, height=20,
                             dtype=jnp.float64)
    img = np.asarray(density_slab_image(camera, d, corner=corner, extent=extent, colormap="grey", scale=0.5,
                                        background=(0.0, 0.5, 1.0)))
    eye, ray = _rays(camera)
    t = (corner[2] - eye[2]) / ray[..., 2]
    hit = eye + t[..., None] * ray
    rel = (hit[..., :2] - corner[:2]) / extent
    inside = np.all((rel >= 0) & (rel <= 1), -1) & (t > 0)
    # bilinear between cell centres, clamped to the border cells: exact for the ramp between the centres
    centre = np.all((rel * [nx, ny] >= 0.5) & (rel * [nx, ny] <= [nx - 0.5, ny - 0.5]), -1) & inside
    assert centre.sum() > 60 and (~inside).sum() > 20
    cos = np.abs(ray[..., 2]) / np.linalg.norm(ray, axis=-1)
    a = 1 - np.exp(-ramp(hit[..., 0], hit[..., 1]) / (0.5 * cos))
    np.testing.assert_allclose(img[..., 3][centre], a[centre], rtol=1e-12)
    np.testing.assert_allclose(img[..., 0][centre], a[centre] ** 2, rtol=1e-12)  # grey: colour a over black
    np.testing.assert_array_equal(img[..., 3][~inside], 0.0)
    np.testing.assert_allclose(img[..., :3][~inside], np.broadcast_to([0.0, 0.5, 1.0], ((~inside).sum(), 3)))


def test_slab_seen_head_on_at_its_pixel_size_is_the_flat_image_at_the_centre(x64):
    from gradsim_jax.render.camera import Camera
    from gradsim_jax.render.density import density_slab_image

    rng = np.random.default_rng(3)
    d = rng.uniform(0, 2, size=(9, 9))
    # A camera on the slab's axis whose 9 x 9 pixels each see one cell: the centre pixel's ray is normal.
    camera = Camera.from_intrinsics(9.0, 9.0, 4.0, 4.0, 9, 9, eye=(0.5, 0.5, -1.0), at=(0.5, 0.5, 0.0), up=(0.0, 1.0, 0.0),
                                    dtype=jnp.float64)
    slab = np.asarray(density_slab_image(camera, d, corner=(0.0, 0.0, 0.0), extent=(1.0, 1.0)))
    flat = np.asarray(density_image(d))
    np.testing.assert_allclose(slab[4, 4], flat[4, 4], rtol=1e-12)


def test_slab_gradient_matches_float64_finite_differences(x64):
    from gradsim_jax.render.camera import look_at_camera
    from gradsim_jax.render.density import density_slab_image

    d = jnp.asarray(np.random.default_rng(1).uniform(0, 1.5, size=(6, 7)))
    weights = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, size=(16, 16, 4)))

    def loss(p):
        camera = look_at_camera(p["distance"], 10.0, 15.0, width=16, height=16, view_angle=25.0, dtype=jnp.float64)
        img = density_slab_image(camera, p["density"], corner=(-0.5, -0.5, 0.0), extent=p["extent"],
                                 colormap="fire", scale=p["scale"])
        return jnp.sum(weights * img)

    params = {"density": d, "distance": jnp.asarray(2.5), "extent": jnp.asarray([1.0, 1.1]), "scale": jnp.asarray(0.7)}
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    _, g = value_and_grad(params)
    rng = np.random.default_rng(4)
    for _ in range(2):
        direction = {k: jnp.asarray(rng.normal(size=np.shape(v))) for k, v in params.items()}
        eps = 1e-6
        plus = {k: params[k] + eps * direction[k] for k in params}
        minus = {k: params[k] - eps * direction[k] for k in params}
        fd = (value_and_grad(plus)[0] - value_and_grad(minus)[0]) / (2 * eps)
        analytic = sum(jnp.sum(g[k] * direction[k]) for k in params)
        np.testing.assert_allclose(float(analytic), float(fd), rtol=1e-6)
    assert all(float(jnp.abs(g[k]).max()) > 0 for k in params)
