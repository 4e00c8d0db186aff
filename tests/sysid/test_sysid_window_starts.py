"""Multiple shooting's window start states (issue 37): the rate stencil, the tightened join weight, the windowed
loss of an ODE body, and start states read off a short chaotic recording (a double pendulum, 5 % off)."""

import jax
import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.scenes.ode import double_pendulum, simple_pendulum
from gradsim_jax.sysid.experiment import as_theta
from gradsim_jax.sysid.windows.runs import START_Q, START_QD, join_gap
from gradsim_jax.sysid.windows.starts import derivative_weights, estimate_window_states, pose_periods
from gradsim_jax.sysid.windows.windowed import Windows, continuity_weight, windowed_loss, windowed_terms
from gradsim_jax.sysid.windows.runs import window_states


def test_rate_stencil_is_exact_for_polynomials_and_the_join_weight_tightens_geometrically():
    dt = 1.0 / 30.0
    for offsets in ([-1, 0, 1], [-2, -1, 0, 1, 2], [-2, -1, 0]):
        w = derivative_weights(offsets, dt)
        degree = len(offsets) - 1
        for k in range(degree + 1):  # d/dt t^k at 0: 1 for k = 1, else 0 (float64 solve: 1e-9 of 1/dt)
            assert abs(np.dot(w, (np.asarray(offsets) * dt) ** k) - (k == 1)) < 1e-9
    np.testing.assert_allclose(derivative_weights([-1, 0, 1], dt), [-15.0, 0.0, 15.0], atol=1e-9)
    assert continuity_weight(2.0, 5, 10) == 2.0
    weights = [float(continuity_weight((0.1, 10.0), i, 5)) for i in range(5)]
    np.testing.assert_allclose(weights, [0.1, 0.1 * 10 ** 0.5, 1.0, 10 ** 0.5, 10.0], rtol=1e-6)
    with pytest.raises(ValueError, match="continuity"):
        continuity_weight((0.0, 1.0), 0, 5)


def test_an_angle_join_is_measured_on_the_circle_and_a_particle_join_is_not():
    assert pose_periods(simple_pendulum(size=8, frames=2)) == {"x": None, "q": pytest.approx(2.0 * np.pi)}
    gap = np.array([0.1, 2.0 * np.pi + 0.1, -4.0 * np.pi - 0.1, 3.0])
    # float32 rounding of 2 pi k + 0.1 (|k| <= 2): a few ulps of 12.6
    np.testing.assert_allclose(np.asarray(join_gap(np.float32(gap), np.float32(0.0), 2.0 * np.pi)),
                               [0.1, 0.1, -0.1, 3.0], atol=8 * np.spacing(np.float32(13.0)))
    np.testing.assert_array_equal(np.asarray(join_gap(gap, 0.0, None)), gap)


@pytest.mark.slow  # ~20 s; CI's 10 minutes are nearly full (the chaotic start test below runs there)
def test_ode_body_windows_join_on_its_own_motion_and_a_gap_costs_its_scaled_square():
    exp = simple_pendulum(size=16, frames=12)
    _, target = sysid.simulate_video(exp, {})
    windows = Windows(12, 6, 2)  # starts 0, 4, 6
    theta = dict(as_theta(exp, {}), **window_states(exp, {}, windows))
    terms = jax.jit(lambda th: windowed_terms(exp, target, th, windows, pose_scale=0.01))(theta)
    # Each window re-solves the same ODE on the same step grid from the run's own states: the joins agree to
    # float32 rounding of a 1 rad angle over a few steps (1e-5 rad), the images to the renderer's rounding.
    assert float(terms["join_q"].max()) < 1e-5 and float(terms["join_qd"].max()) < 1e-4
    assert float(terms["image"]) < 1e-8 and float(terms["continuity"]) < 1e-4
    gap = dict(theta, **{START_Q: theta[START_Q].at[-1].add(0.02)})
    terms = jax.jit(lambda th: windowed_terms(exp, target, th, windows, pose_scale=0.01))(gap)
    # one join of two off by 0.02 rad = 2 scales: (2^2 + 0) / 2 joins
    assert float(terms["continuity"]) == pytest.approx(2.0, rel=1e-3)
    # ... and a whole turn more is the same gap: an angle's join is measured on the circle
    turn = dict(gap, **{START_Q: gap[START_Q].at[-1].add(-2.0 * np.pi)})
    terms = jax.jit(lambda th: windowed_terms(exp, target, th, windows, pose_scale=0.01))(turn)
    assert float(terms["continuity"]) == pytest.approx(2.0, rel=1e-3)
    one = Windows(12, 12)
    full = jax.jit(windowed_loss(exp, target, one, shooting="truncated"))(as_theta(exp, {"pendulum_length": 1.02}))
    plain = jax.jit(sysid.make_loss(exp, target))(as_theta(exp, {"pendulum_length": 1.02}))
    assert float(full) == pytest.approx(float(plain), rel=1e-5)


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_start_states_read_off_a_chaotic_video_beat_a_run_of_the_guess():
    exp = double_pendulum(size=32, frames=45)
    _, target = sysid.simulate_video(exp, {})
    windows = Windows(45, 12, 3)  # starts 0, 9, 18, 27, 33
    truth = window_states(exp, {}, windows)
    guess = {"pendulum_length": np.array([[1.05, 0.95]], np.float32)}
    est = estimate_window_states(exp, target, guess, windows, free=["pendulum_length"])
    run = window_states(exp, guess, windows)

    def error(states, name):
        return np.abs(np.asarray(states[name]) - np.asarray(truth[name])).reshape(windows.count - 1, -1).max(1)

    # Each pose is fitted to its own frame (with the lengths free for that frame): within a few hundredths of
    # a radian at 32 px (one pixel is ~0.07 rad of the 1 m arm); the rates are central differences of those
    # poses over 2 frames (dt^2 / 6 |theta'''| ~ 0.1 rad/s for this swing, plus 0.03 rad / (2 dt) ~ 1 rad/s of
    # pose error at worst).
    assert error(est, START_Q).max() < 0.06, error(est, START_Q)
    assert error(est, START_QD).max() < 1.0, error(est, START_QD)
    # The 5 %-off guess's own run drifts from the video as the chaos grows; the video does not.
    assert error(run, START_Q)[-1] > 3 * error(est, START_Q)[-1]
    assert np.all(est["_pose_fit"]["fitted"] <= est["_pose_fit"]["predicted"] + 1e-7)


@pytest.mark.slow  # 35 s cold; CI's 10 minutes: `make test-all` runs it
def test_a_start_that_cannot_be_read_off_the_video_falls_back_to_the_guess_run_with_a_warning(monkeypatch):
    from gradsim_jax.sysid.windows import starts as window_starts

    exp = double_pendulum(size=16, frames=12)
    _, target = sysid.simulate_video(exp, {})
    windows = Windows(12, 6, 2)  # starts 0, 4, 6
    real = window_starts.derivative_weights
    calls = []

    def broken_first(*args):  # the first window's rate comes out NaN (as a cloth's that blew up does)
        calls.append(1)
        return real(*args) * (np.nan if len(calls) == 1 else 1.0)

    monkeypatch.setattr(window_starts, "derivative_weights", broken_first)
    guess = {"pendulum_length": np.array([[1.05, 0.95]], np.float32)}
    with pytest.warns(RuntimeWarning, match=r"window start\(s\) \[1\] could not be read off the video"):
        est = estimate_window_states(exp, target, guess, windows, steps=2)
    run = window_states(exp, guess, windows)
    np.testing.assert_array_equal(np.asarray(est[START_Q])[0], np.asarray(run[START_Q])[0])
    assert np.all(np.isfinite(np.asarray(est[START_Q]))) and list(est["_pose_fit"]["fallback"]) == [1]


def test_search_grid_covers_a_turn_with_the_prediction_and_unwrap_keeps_one_branch():
    from gradsim_jax.sysid.windows.starts import SEARCH_CANDIDATES, search_offsets, unwrap

    coarse, fine = search_offsets(2, 2 * np.pi)
    assert coarse.shape == (256, 2) and len(coarse) <= SEARCH_CANDIDATES  # 16 x 16
    assert np.any(np.all(coarse == 0.0, axis=1)) and np.any(np.all(fine == 0.0, axis=1))  # the prediction itself
    spacing = 2 * np.pi / 16
    assert np.allclose(np.diff(np.unique(coarse[:, 0])), spacing) and np.ptp(coarse[:, 0]) == pytest.approx(
        2 * np.pi - spacing)
    assert np.ptp(fine[:, 1]) == pytest.approx(spacing)  # the fine grid spans one coarse spacing
    assert search_offsets(1, 1.0)[0].shape == (256, 1) and search_offsets(3, 1.0)[0].shape == (216, 3)
    angles = np.array([3.1, -3.1, 9.5])
    np.testing.assert_allclose(unwrap(angles, 3.0, 2 * np.pi), [3.1, 2 * np.pi - 3.1, 9.5 - 2 * np.pi], rtol=1e-6)


@pytest.mark.slow  # 38 s cold (the search's program); CI's 10 minutes: `make test-all` runs it, bench_chaos at scale
def test_a_lost_pose_is_found_again_by_the_search_over_whole_turns():
    """The prediction of a start pose 2 rad off (a window whose previous start was lost in the chaos): the
    pose fit from it alone stays in a wrong minimum; starting from the search it finds the pose."""
    from gradsim_jax.physics.ode import ode_coordinates
    from gradsim_jax.sysid.windows.starts import _pose_fit, default_pose_scales, pose_search_period

    exp = double_pendulum(size=32, frames=6)
    _, target = sysid.simulate_video(exp, {})
    traj = jax.jit(lambda th: sysid.trajectory(exp, th))(as_theta(exp, {}))
    state = jax.tree.map(lambda a: a[4], traj)
    truth, _ = ode_coordinates(exp.topology.ode.system, state.ode)
    predicted = {"q": (truth + np.array([[2.0, -1.5]], np.float32))[None]}
    theta = as_theta(exp, {})
    period = pose_search_period(exp)
    assert period == pytest.approx(2 * np.pi)
    scales = default_pose_scales(exp)
    lost, _, _ = jax.jit(lambda: _pose_fit(exp, theta, predicted, state, target[4:5], scales, "rgba", 30, 0.5,
                                           1e-4))()
    found, before, after = jax.jit(lambda: _pose_fit(exp, theta, predicted, state, target[4:5], scales, "rgba", 30,
                                                     0.5, 1e-4, period=period))()
    wrapped = lambda q: (np.asarray(q)[0] - np.asarray(truth) + np.pi) % (2 * np.pi) - np.pi  # noqa: E731
    assert np.abs(wrapped(lost["q"])).max() > 0.5  # the fit from the prediction alone does not get there
    # From the search's best (a 16 x 16 grid, then 5 x 5 within 0.39 rad) the fit reaches the true pose: the
    # image's noise-free, so to well under a degree (the bobs are 2 px wide at 32 px)
    assert np.abs(wrapped(found["q"])).max() < 0.02
    assert float(after[0]) < 1e-2 * float(before[0])
