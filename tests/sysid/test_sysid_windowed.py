"""Windowed fits (multiple shooting, truncated backpropagation) on a tiny version of gradSim's demo cloth."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from gradsim_jax.diagnostics.precision import cast_floats
from gradsim_jax.sysid.windows.runs import START_V, START_X, window_states
from gradsim_jax.sysid.windows.windowed import Windows, fit_windowed, windowed_loss, windowed_terms
from gradsim_jax.fit.windows import window_length_for
from gradsim_jax.scenes import gradsim_demo_cloth
from gradsim_jax.scenes.demos import finish_experiment
from gradsim_jax.sysid import default_theta, experiment_arrays, make_loss, simulate_video, with_arrays
from gradsim_jax.sysid.experiment import as_theta

FREE = ("mass", "stiffness")


def tiny_cloth(frames=12, size=16, substeps=8):
    """A 4 x 2 demo cloth (15 particles, 2 anchors), anchor damping lowered so that 8 substeps are stable."""
    scene = gradsim_demo_cloth(4, 2, 0.25, tri_ke=400.0, tri_ka=400.0, tri_kd=2.0, anchor_ke=400.0,
                               anchor_kd=10.0)
    topology, params, state0 = scene.build()
    theta = default_theta(topology, params, state0, FREE)
    exp = finish_experiment("tiny_demo_cloth", topology, params, state0, theta, size=size, frames=frames,
                            substeps=substeps, frame_dt=1.0 / 30.0, elevation=10.0, azimuth=0.0)
    return exp, simulate_video(exp, theta)[1]


@pytest.fixture(scope="module")
def tiny():
    return tiny_cloth()


def test_windows_cover_the_recording_with_equal_lengths():
    w = Windows(frames=20, length=8, overlap=2)
    assert w.starts == (0, 6, 12)
    assert w.frame_index()[-1, -1] == 20 and w.frame_index().shape == (3, 8)
    assert Windows(20, 8, 3).starts == (0, 5, 10, 12)  # the last one shifted to end at frame 20
    assert Windows(20, 20).starts == (0,) and Windows(20, 8).cuts() == (8, 16)
    assert list(Windows(20, 8, 2, stride=3).offsets()) == [1, 4, 7]
    for bad in (dict(length=21), dict(length=8, overlap=8), dict(length=0), dict(length=8, stride=0)):
        with pytest.raises(ValueError):
            Windows(20, **bad)
    # A third of the gradient horizon: issue 12's demo cloth, 10 % apart at 1440 steps, 32 substeps a frame.
    assert window_length_for(1440, 32) == 15 and window_length_for(1440, 32, safety=0.5) == 22
    with pytest.raises(ValueError, match="horizon_steps"):
        window_length_for(0, 32)


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end run; `make test-all` runs it
def test_one_window_is_the_full_horizon_loss_and_truncation_changes_only_the_gradient(tiny):
    exp, target = tiny
    theta = as_theta(exp, {"mass": 1.3, "stiffness": 300.0})
    full_value, full_grad = jax.jit(jax.value_and_grad(make_loss(exp, target)))(theta)
    one = Windows(exp.frames, exp.frames)
    # (multiple shooting's value and gradient are checked against finite differences below)
    value, grad = jax.jit(jax.value_and_grad(windowed_loss(exp, target, one, shooting="truncated")))(theta)
    np.testing.assert_allclose(value, full_value, rtol=1e-6)
    for n in FREE:
        np.testing.assert_allclose(grad[n], full_grad[n], rtol=1e-5)
    value, grad = jax.jit(jax.value_and_grad(
        windowed_loss(exp, target, Windows(exp.frames, 4), shooting="truncated")))(theta)
    np.testing.assert_allclose(value, full_value, rtol=1e-6)  # the same forward run
    for n in FREE:
        assert np.isfinite(grad[n]) and abs(grad[n] - full_grad[n]) > 1e-3 * abs(full_grad[n])


def test_continuity_is_zero_when_the_start_states_are_the_run_and_grows_with_a_gap(tiny):
    exp, target = tiny
    windows = Windows(exp.frames, 6, 2)
    theta = dict(as_theta(exp, {"mass": 1.3}), **window_states(exp, {"mass": 1.3}, windows))
    terms = jax.jit(lambda th: windowed_terms(exp, target, th, windows))(theta)
    assert terms["join_x"].shape == (windows.count - 1,)
    assert float(terms["continuity"]) < 1e-8 and float(np.max(terms["join_x"])) < 1e-6
    # 2 cm on one particle of the last window's start (whose own run reaches no join): only the last join
    # opens, by mean over 2 joins of mean over 17 x 3 entries of (dx / 0.01)^2 = (2^2 / 51) / 2.
    gap = theta[START_X].at[-1, 3, 1].add(0.02)
    terms = windowed_terms(exp, target, dict(theta, **{START_X: gap}), windows, position_scale=0.01)
    np.testing.assert_allclose(terms["continuity"], 4.0 / 51 / 2, rtol=1e-3)
    np.testing.assert_allclose(terms["join_x"], [0.0, 0.02 / np.sqrt(17)], rtol=1e-3, atol=1e-6)


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores); `make test-all` runs it
def test_windowed_loss_gradient_matches_finite_differences_in_float64(x64):
    exp32, target = tiny_cloth(frames=6, size=12, substeps=8)
    exp = with_arrays(exp32, cast_floats(experiment_arrays(exp32), jnp.float64))
    target = jnp.asarray(target, jnp.float64)
    windows = Windows(exp.frames, 3, 1)
    base = dict(as_theta(exp, {"mass": 1.2, "stiffness": 350.0}))
    starts = window_states(exp, base, windows)
    starts = {k: v + 1e-3 * jax.random.normal(jax.random.key(i), v.shape, v.dtype) for i, (k, v) in
              enumerate(starts.items())}  # joins that do not match: the penalty's gradient is not zero
    loss = windowed_loss(exp, target, windows, continuity=0.5, position_scale=0.01, velocity_scale=0.3)

    def of(log_mass, log_stiffness, x, v):
        return loss(dict(base, mass=jnp.exp(log_mass), stiffness=jnp.exp(log_stiffness), **{START_X: x, START_V: v}))

    args = (jnp.log(base["mass"]), jnp.log(base["stiffness"]), starts[START_X], starts[START_V])
    assert args[2].dtype == jnp.float64
    check_grads(jax.jit(of), args, order=1, modes=["rev"], eps=1e-5, atol=1e-6, rtol=1e-5)


def test_bad_windowed_inputs_are_refused(tiny):
    exp, target = tiny
    with pytest.raises(ValueError, match="overlap"):
        windowed_loss(exp, target, Windows(exp.frames, 4, 1), shooting="truncated")
    with pytest.raises(ValueError, match="shooting"):
        windowed_loss(exp, target, Windows(exp.frames, 4), shooting="direct")
    with pytest.raises(ValueError, match="experiment has"):
        windowed_loss(exp, target, Windows(exp.frames - 1, 4))
    with pytest.raises(ValueError, match="must have shape"):
        windowed_loss(exp, target, Windows(exp.frames, 4))(as_theta(exp, {}))


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_reduced_demo_windowed_fit_recovers_mass_and_stiffness(tiny):
    exp, target = tiny
    result = fit_windowed(exp, target, {"mass": 1.4, "stiffness": 240.0}, FREE, window=4, shooting="truncated",
                          iterations=20, learning_rate=0.05, polish=10, progress=False)
    assert abs(float(result.theta["mass"]) / 1.0 - 1) < 0.01
    assert abs(float(result.theta["stiffness"]) / 400.0 - 1) < 0.01
    assert result.windows.cuts() == (4, 8) and result.starts == {} and result.loss < result.history["loss"][0]
