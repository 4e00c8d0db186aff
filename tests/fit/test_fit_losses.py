"""Video losses and the sigma schedule: values, masks, frame subsets, traced arguments, gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.fit.losses import (
    frame_subsample,
    masked_mse,
    random_frames,
    rgba_mse,
    sigma_schedule,
    silhouette_loss,
    soft_iou,
)


def _videos(t=4, h=5, w=6):
    k1, k2 = jax.random.split(jax.random.key(0))
    return jax.random.uniform(k1, (t, h, w, 4)), jax.random.uniform(k2, (t, h, w, 4))


def test_rgba_mse_is_the_mean_over_everything():
    a, b = _videos()
    np.testing.assert_allclose(rgba_mse(a, b), np.mean((np.asarray(a) - np.asarray(b)) ** 2), rtol=1e-6)
    assert float(rgba_mse(a, a)) == 0.0


def test_silhouette_loss_ignores_colour():
    a, b = _videos()
    recoloured = a.at[..., :3].set(0.0)
    assert float(silhouette_loss(a, b)) == float(silhouette_loss(recoloured, b))
    np.testing.assert_allclose(silhouette_loss(a, b), np.mean((np.asarray(a)[..., 3] - np.asarray(b)[..., 3]) ** 2), rtol=1e-6)


def test_soft_iou_term():
    square = jnp.zeros((1, 4, 4, 4)).at[:, :2, :2, 3].set(1.0)
    shifted = jnp.zeros((1, 4, 4, 4)).at[:, :2, 1:3, 3].set(1.0)
    np.testing.assert_allclose(soft_iou(square[..., 3], shifted[..., 3]), [2.0 / 6.0], rtol=1e-5)
    mse = float(silhouette_loss(square, shifted))
    np.testing.assert_allclose(silhouette_loss(square, shifted, iou_weight=0.5), mse + 0.5 * (1 - 2.0 / 6.0), rtol=1e-5)
    assert float(silhouette_loss(square, square, iou_weight=1.0)) == pytest.approx(0.0, abs=1e-6)


def test_frame_subsample():
    video = jnp.arange(10)[:, None, None, None] * jnp.ones((10, 2, 2, 4))
    np.testing.assert_array_equal(frame_subsample(video, 3)[:, 0, 0, 0], [0, 3, 6, 9])
    np.testing.assert_array_equal(frame_subsample(video, 4, offset=1)[:, 0, 0, 0], [1, 5, 9])
    with pytest.raises(ValueError, match="every >= 1"):
        frame_subsample(video, 0)


def test_masked_mse_with_2d_and_3d_masks_and_frames():
    a, b = _videos()
    err = np.mean((np.asarray(a) - np.asarray(b)) ** 2, axis=-1)  # [T, H, W]
    np.testing.assert_allclose(masked_mse(a, b), err.mean(), rtol=1e-6)

    mask2 = np.zeros((5, 6), bool)
    mask2[1:3, 2:5] = True
    np.testing.assert_allclose(masked_mse(a, b, jnp.asarray(mask2)), err[:, mask2].mean(), rtol=1e-6)

    mask3 = np.random.default_rng(0).uniform(size=(4, 5, 6)).astype(np.float32)
    frames = np.array([0, 2])
    expected = (mask3[frames] * err[frames]).sum() / mask3[frames].sum()
    got = jax.jit(masked_mse)(a, b, jnp.asarray(mask3), jnp.asarray(frames))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    np.testing.assert_allclose(masked_mse(a, b, frames=jnp.asarray(frames)), err[frames].mean(), rtol=1e-6)


def test_masked_mse_with_an_empty_mask_is_zero_with_a_finite_gradient():
    a, b = _videos()
    empty = jnp.zeros((5, 6))
    value, grad = jax.value_and_grad(masked_mse)(a, b, empty)
    assert float(value) == 0.0 and bool(jnp.all(grad == 0.0))
    with pytest.raises(ValueError, match="mask must be"):
        masked_mse(a, b, jnp.ones(6))


def test_random_frames_are_distinct_sorted_and_keyed():
    idx = jax.jit(random_frames, static_argnums=(1, 2))(jax.random.key(0), 20, 5)
    assert idx.dtype == jnp.int32 and idx.shape == (5,)
    assert len(set(idx.tolist())) == 5 and idx.tolist() == sorted(idx.tolist())
    assert bool(jnp.all((idx >= 0) & (idx < 20)))
    np.testing.assert_array_equal(idx, random_frames(jax.random.key(0), 20, 5))
    assert idx.tolist() != random_frames(jax.random.key(1), 20, 5).tolist()


def test_sigma_schedule_is_geometric_and_traceable():
    assert float(sigma_schedule(0, 11, 1e-2, 1e-4)) == pytest.approx(1e-2, rel=1e-6)
    assert float(sigma_schedule(10, 11, 1e-2, 1e-4)) == pytest.approx(1e-4, rel=1e-5)
    assert float(sigma_schedule(5, 11, 1e-2, 1e-4)) == pytest.approx(1e-3, rel=1e-5)  # geometric midpoint
    assert float(sigma_schedule(50, 11, 1e-2, 1e-4)) == pytest.approx(1e-4, rel=1e-5)  # clamped
    traced = jax.jit(lambda i: sigma_schedule(i, 11, 1e-2, 1e-4))
    values = np.array([float(traced(jnp.int32(i))) for i in range(11)])
    np.testing.assert_allclose(values[1:] / values[:-1], 10 ** -0.2, rtol=1e-5)
    assert traced(jnp.int32(3)).dtype == jnp.float32
    with pytest.raises(ValueError, match="positive"):
        sigma_schedule(0, 10, 0.0, 1.0)
