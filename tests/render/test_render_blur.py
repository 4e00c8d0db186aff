"""The Gaussian blur of rendered frames and the edge sharpness that chooses it (`render.blur`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.render.blur import (
    BLUR_MAX, edge_channel, edge_mask, edge_sharpness, gaussian_blur, gaussian_weights, matching_blur,
)


def _step(width=48, offset=0.3):
    """An image [H, W, 4] whose alpha is a vertical step edge between columns (a sharp outline)."""
    x = np.arange(width) - width / 2 + offset
    alpha = (x > 0).astype(np.float64)
    img = np.zeros((width, width, 4))
    img[..., 3] = alpha[None, :]
    img[..., :3] = alpha[None, :, None] * [0.8, 0.4, 0.2]
    return img


def test_blur_keeps_a_uniform_image_and_is_the_identity_at_zero_width():
    flat = jnp.full((12, 10, 4), 0.37)
    np.testing.assert_allclose(gaussian_blur(flat, 1.3), flat, rtol=1e-6)  # normalized weights, edge padding
    img = jnp.asarray(np.random.default_rng(0).uniform(size=(9, 11, 3)), jnp.float32)
    np.testing.assert_array_equal(gaussian_blur(img, 0.0), img)
    w = np.asarray(gaussian_weights(0.8))
    assert w.sum() == pytest.approx(1.0, rel=1e-6) and np.argmax(w) == w.size // 2


def test_blur_of_a_step_is_the_gaussian_cdf_and_its_width_derivative_matches_finite_differences(x64):
    """A step edge blurred by sigma: the error function profile sampled at the pixels (exact in the
    window); d/dsigma of the blurred image equals central differences (float64), finite at sigma = 0."""
    from math import erf, sqrt

    img = jnp.asarray(_step(offset=0.5))  # the edge halfway between two pixel centres
    sigma = 0.9
    row = np.asarray(gaussian_blur(img, sigma))[0, :, 3]
    x = np.arange(48) - 24 + 0.5
    # The sampled Gaussian's weight past each pixel centre, within the window (+-6 px: 6.7 sigma).
    k = np.arange(-6, 7)
    w = np.exp(-0.5 * (k / sigma) ** 2)
    w /= w.sum()
    expected = np.array([w[(x[i] - k) > 0].sum() for i in range(48)])
    np.testing.assert_allclose(row, expected, atol=1e-12)
    # Whole-pixel samples of the Gaussian: near the continuous CDF (0.711 half a pixel past the edge).
    assert row[24] == pytest.approx(0.5 * (1 + erf(0.5 / (sigma * sqrt(2)))), abs=0.02)

    @jax.jit
    def f(s):
        return jnp.sum(gaussian_blur(img, s)[..., 3] * jnp.linspace(0.0, 1.0, 48))

    grad = jax.jit(jax.grad(f))
    g = float(grad(sigma))
    h = 1e-6
    assert g == pytest.approx(float((f(sigma + h) - f(sigma - h)) / (2 * h)), rel=1e-6)
    assert np.isfinite(float(grad(0.0)))


def test_edge_sharpness_falls_as_one_over_the_width_and_matching_blur_recovers_a_blur():
    """R of a Gaussian-blurred step: 1 / (2 sqrt(pi) s) for s >~ 1 px (sampling adds the pixel's own width
    below); `matching_blur` finds a blur applied to a render from the two alone, within 0.05 px."""
    sharp = _step()[None, ..., 3]
    for sigma in (1.5, 2.0):
        r = edge_sharpness(np.asarray(gaussian_blur(jnp.asarray(sharp)[..., None], sigma))[..., 0])
        assert r == pytest.approx(1.0 / (2.0 * np.sqrt(np.pi) * sigma), rel=0.05)
    for sigma in (0.5, 0.8, 1.2):
        target = np.asarray(gaussian_blur(jnp.asarray(sharp)[..., None], sigma))[..., 0]
        assert matching_blur(target, sharp) == pytest.approx(sigma, abs=0.05)
    assert matching_blur(sharp, sharp) == 0.0
    very = np.asarray(gaussian_blur(jnp.asarray(sharp)[..., None], 20.0, radius=40))[..., 0]
    assert matching_blur(very, sharp) == BLUR_MAX


def test_edge_channel_and_mask():
    img = _step()[None]
    np.testing.assert_array_equal(edge_channel(img, True), img[..., 3])
    luma = edge_channel(img, False)
    assert luma.max() == pytest.approx(0.299 * 0.8 + 0.587 * 0.4 + 0.114 * 0.2)
    mask = edge_mask(img[..., 3])
    cols = np.flatnonzero(mask[0].any(axis=0))
    assert cols.min() >= 22 and cols.max() <= 26  # the outline and a pixel either side, nothing else
