"""The convergence verdict of a fit (`fit.convergence`): noise floor of a target, and assess's rules."""

import numpy as np
import pytest

from gradsim_jax.fit.convergence import FLOOR_FACTOR, RATIO_TOL, STEP_TOL, assess, noise_floor, noise_sigma


def test_noise_sigma_of_white_noise_on_a_smooth_image():
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:64, 0:64] / 64.0
    smooth = 0.3 + 0.2 * x + 0.1 * y  # cancelled by the Laplacian difference
    frames = np.stack([smooth + 0.02 * rng.normal(size=smooth.shape) for _ in range(4)])[..., None]
    assert noise_sigma(frames)[0] == pytest.approx(0.02, rel=0.05)
    assert noise_floor(frames) == pytest.approx(0.02 ** 2 + (1 / 255) ** 2 / 12, rel=0.1)


def _assess(final, *, floor=1e-6, initial=1e-2, step=0.0):
    return assess(initial_loss=initial, final_loss=final, floor=floor, grad_norm=0.0, last_step=step)


def test_at_the_floor_is_converged_without_a_caution():
    v = _assess(2e-6)
    assert v.converged and v.reasons == () and v.advice == ()


def test_explained_by_the_ratio_alone_is_converged_with_a_caution():
    final = 0.5 * RATIO_TOL * 1e-2  # under 2 % of the initial loss, 100 x the floor
    assert final > FLOOR_FACTOR * 1e-6
    v = _assess(final)
    assert v.converged and v.reasons == ()
    assert len(v.advice) == 1 and "100 x the target's noise floor" in v.advice[0] and "local minimum" in v.advice[0]


def test_unexplained_or_moving_is_not_converged():
    v = _assess(5e-4)  # 5 % of the initial loss, 500 x the floor
    assert not v.converged and any("not explained" in r for r in v.reasons)
    v = _assess(2e-6, step=10 * STEP_TOL)  # moving, above the floor
    assert not v.converged and any("still moving" in r for r in v.reasons)
    v = _assess(5e-7, step=10 * STEP_TOL)  # below the floor its last steps chase noise
    assert v.converged and v.reasons == ()
    assert not _assess(float("nan")).converged
