"""The host-side Levenberg-Marquardt polish (`fit.least_squares`)."""

import numpy as np

from gradsim_jax.fit import least_squares

T = np.linspace(0.0, 2.0, 25)


def _residual(z):
    amplitude, rate = z
    return amplitude * np.exp(-rate * T) - 1.7 * np.exp(-0.8 * T)


def _linearize(z, calls):
    calls.append(np.array(z))
    amplitude, rate = z
    e = np.exp(-rate * T)
    return _residual(z), np.stack([e, -amplitude * T * e], axis=1)


def test_trials_by_the_jacobian_take_the_same_steps_and_linearize_once_per_trial():
    calls_two, calls_one, residuals = [], [], []

    def residual(z):
        residuals.append(len(calls_two))  # how many linearizations came before
        return _residual(z)

    two = least_squares.levenberg_marquardt(residual, lambda z: _linearize(z, calls_two), [1.0, 2.0], steps=30,
                                            tol=1e-12)
    one = least_squares.levenberg_marquardt(None, lambda z: _linearize(z, calls_one), [1.0, 2.0], steps=30,
                                            tol=1e-12)
    np.testing.assert_allclose(one.z, [1.7, 0.8], rtol=1e-6)
    np.testing.assert_allclose(one.z, two.z, rtol=1e-12)
    assert [c for c, _ in one.steps] == [c for c, _ in two.steps]
    np.testing.assert_allclose(one.jacobian, two.jacobian, rtol=1e-12)
    # Without a residual function every accepted trial's Jacobian is kept: no evaluation twice at one point.
    assert len({tuple(c) for c in calls_one}) == len(calls_one)
    # With one, trials go by the Jacobian until one is rejected (that trial's Jacobian is the only one wasted),
    # then by the residual: one linearization per accepted step, at most one more.
    assert len({tuple(c) for c in calls_two}) == len(calls_two)
    assert len(one.steps) + 1 <= len(calls_two) <= len(one.steps) + 2
    assert residuals and (len(calls_two) == len(one.steps) + 2) and residuals[0] >= 2


def test_the_polish_stops_once_the_gauss_newton_step_is_below_step_tol():
    loose = least_squares.levenberg_marquardt(None, lambda z: _linearize(z, []), [1.0, 2.0], steps=30, tol=0.0,
                                              step_tol=1e-3)
    tight = least_squares.levenberg_marquardt(None, lambda z: _linearize(z, []), [1.0, 2.0], steps=30, tol=0.0,
                                              step_tol=1e-10)
    # the loose run ends at the first point whose step is <= 1e-3 max(1, |z|); the tight one goes further
    assert np.all(np.abs(loose.gauss_newton_step) <= 1e-3 * np.maximum(1.0, np.abs(loose.z)))
    assert len(loose.steps) < len(tight.steps)
    before = loose.steps[-2][1]
    j = _linearize(before, [])
    assert np.max(np.abs(np.linalg.lstsq(j[1], -j[0], rcond=None)[0])) > 1e-3
    np.testing.assert_allclose(tight.z, [1.7, 0.8], rtol=1e-9)


def test_masked_unknowns_keep_their_values():
    result = least_squares.levenberg_marquardt(None, lambda z: _linearize(z, []), [1.0, 0.8], mask=[True, False],
                                               steps=20, tol=1e-12, step_tol=0.0)
    assert result.z[1] == 0.8
    np.testing.assert_allclose(result.z[0], 1.7, rtol=1e-9)
    assert result.jacobian.shape == (T.size, 1)


def test_zero_rank_deficient_and_non_finite_jacobians_stop_without_an_exception():
    """Issue 34's audit of the linear solves: a quantity the video does not see (a zero column), two that
    only act together (equal columns) and a Jacobian of a simulation that blew up (NaN) each end the polish
    with a result, never a LinAlgError; the known parts still move."""
    zero = least_squares.levenberg_marquardt(None, lambda z: (np.ones(4), np.zeros((4, 2))), [1.0, 2.0])
    assert zero.steps == [] and np.all(zero.z == [1.0, 2.0]) and np.all(np.isfinite(zero.gauss_newton_step))

    def twins(z):  # r = (z0 + z1) - 3 at every point: only the sum is determined
        return np.full(5, z[0] + z[1] - 3.0), np.ones((5, 2))

    both = least_squares.levenberg_marquardt(None, twins, [0.0, 0.0], steps=20, tol=1e-14)
    assert abs(both.z.sum() - 3.0) < 1e-6 and both.cost < 1e-10
    broken = least_squares.levenberg_marquardt(None, lambda z: (np.ones(3), np.full((3, 2), np.nan)), [1.0, 2.0])
    assert broken.steps == [] and np.all(np.isnan(broken.gauss_newton_step))
