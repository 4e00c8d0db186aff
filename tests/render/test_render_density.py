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

    def loss(d, scale):
        return jnp.sum((density_image(d, size=(9, 7), colormap="fire", scale=scale) - target) ** 2)

    g_d, g_s = jax.grad(loss, argnums=(0, 1))(d0, 0.8)
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
