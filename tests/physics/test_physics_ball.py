"""Bouncing balls with exact impacts (physics.ball): free flight against the closed form, apex heights
against e^2 per bounce, impact times against the closed form, friction at impacts and while resting, the
gradient of the final position across an impact against float64 finite differences, and bad input."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry.ode import balls
from gradsim_jax.physics import simulate
from gradsim_jax.physics.ball import BallState


def _run(x, v, *, frames=60, substeps=2, frame_dt=1 / 30, g=9.0, **kwargs):
    top, par, st = balls(x, v, **kwargs).build(gravity=(0.0, -g, 0.0))
    traj = simulate(top, par, st, frames=frames, substeps=substeps, frame_dt=frame_dt)
    return top, par, st, np.asarray(traj.ode.x), np.asarray(traj.ode.v)


def test_free_flight_is_the_exact_arc(x64):
    _, _, _, x, v = _run([0.0, 50.0, 0.0], [1.0, 2.0, -0.5], frames=30, radius=0.5)
    t = np.arange(31)[:, None] / 30
    np.testing.assert_allclose(x[:, 0], [0.0, 50.0, 0.0] + t * [1.0, 2.0, -0.5] + 0.5 * t ** 2 * [0.0, -9.0, 0.0],
                               rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(v[:, 0, 1], 2.0 - 9.0 * t[:, 0], atol=1e-13)


def test_apex_heights_fall_by_e_squared_per_bounce_and_impacts_are_on_time(x64):
    e, r, h0, g = 0.7, 0.75, 5.0, 9.0
    _, _, _, x, v = _run([0.0, h0, 0.0], [1.0, 0.0, 0.0], frames=150, substeps=1, radius=r, restitution=e, g=g)
    # Between impacts, the apex (height above the contact level) is (y - r) + vy^2 / 2g, exactly.
    apex = (x[:, 0, 1] - r) + v[:, 0, 1] ** 2 / (2 * g)
    levels = [apex[0]]
    for a in apex[1:]:
        if abs(a - levels[-1]) > 1e-9:
            levels.append(a)
    assert len(levels) >= 4
    np.testing.assert_allclose(np.array(levels[1:]) / np.array(levels[:-1]), e ** 2, rtol=1e-12)
    # The first impact at t1 = sqrt(2 (h0 - r) / g), the k-th flight lasts 2 e^k v1 / g.
    v1 = np.sqrt(2 * g * (h0 - r))
    impacts = np.sqrt(2 * (h0 - r) / g) + np.concatenate([[0.0], np.cumsum(2 * v1 * e ** np.arange(1, 4) / g)])
    t = np.arange(151) / 30
    for k, ti in enumerate(impacts):
        after = np.searchsorted(t, ti)  # the first frame after the k-th impact
        s = t[after] - ti
        np.testing.assert_allclose(x[after, 0, 1], r + e ** (k + 1) * v1 * s - 0.5 * g * s * s, atol=1e-12)
    np.testing.assert_allclose(x[:, 0, 0], 1.0 * t, atol=1e-12)  # no friction: the horizontal speed is kept


def test_friction_slows_the_ball_at_impacts_and_stops_it_at_rest(x64):
    mu, e, g = 0.1, 0.5, 9.0
    _, _, _, x, v = _run([0.0, 0.5, 0.0], [3.0, 0.0, 0.0], frames=240, radius=0.25, restitution=e, friction=mu, g=g)
    v_in = np.sqrt(2 * g * 0.25)
    # The first impact takes mu (1 + e) v_in off the horizontal speed.
    first = np.argmax(v[:, 0, 1] > 0)
    assert v[first, 0, 0] == pytest.approx(3.0 - mu * (1 + e) * v_in, rel=1e-12)
    assert np.all(np.diff(v[:, 0, 0]) <= 1e-15)
    # It ends at rest on the plane, stopped by sliding friction.
    np.testing.assert_allclose(x[-1, 0, 1], 0.25, atol=1e-9)
    np.testing.assert_allclose(v[-1, 0], 0.0, atol=1e-12)


@pytest.mark.parametrize("speed", [2.0, 4.0])
def test_gradient_across_an_impact_matches_float64_finite_differences(x64, speed):
    # A ball thrown down and sideways onto the plane: with speed 2 it has bounced once by the end, with 4
    # twice (either side of a change in the number of bounces the derivative is smooth).
    top, par, st = balls([0.0, 2.0, 0.0], [1.0, -1.0, 0.0], radius=0.3, restitution=0.6,
                         friction=0.2).build(gravity=(0.0, -9.0, 0.0))

    def final(launch, e, g):
        state = dataclasses.replace(st, ode=BallState(x=st.ode.x, v=jnp.asarray([[launch * 0.6, -launch * 0.8, 0.0]])))
        params = dataclasses.replace(par, ode=dataclasses.replace(par.ode, restitution=jnp.asarray([e])),
                                     world=dataclasses.replace(par.world, gravity=jnp.asarray([0.0, g, 0.0])))
        traj = simulate(top, params, state, frames=30, substeps=1, frame_dt=1 / 30)
        return traj.ode.x[-1, 0, 0] + 2.0 * traj.ode.x[-1, 0, 1]

    args = (jnp.asarray(speed), jnp.asarray(0.6), jnp.asarray(-9.0))
    grads = jax.jit(jax.grad(final, argnums=(0, 1, 2)))(*args)
    f = jax.jit(final)
    h = 1e-6
    for i in range(3):
        up = [a + h if k == i else a for k, a in enumerate(args)]
        down = [a - h if k == i else a for k, a in enumerate(args)]
        fd = (f(*up) - f(*down)) / (2 * h)
        assert float(grads[i]) == pytest.approx(float(fd), rel=1e-6, abs=1e-8), i
    # The derivative does depend on the impacts: the launch speed's differs from the free-flight one.
    assert abs(float(grads[0]) - (0.6 - 2 * 0.8)) > 0.1


@pytest.mark.parametrize("kwargs, message", [
    (dict(restitution=1.2), r"Params.ode.restitution\[0\] = 1.2 is not a finite value in \[0, 1\]"),
    (dict(restitution=-0.1), r"Params.ode.restitution\[0\] = -0.1 is not a finite value in \[0, 1\]"),
    (dict(radius=0.0), r"Params.ode.radius\[0\] = 0.0 is not a finite value > 0"),
    (dict(friction=-1.0), r"Params.ode.friction\[0\] = -1.0 is not a finite value >= 0"),
    (dict(v=[float("nan"), 0.0, 0.0]), r"State.ode.v\[0, 0\] = nan is not finite"),
    (dict(radius=[0.5, 0.5]), r"balls: radius must be one value or \[1\]"),
])
def test_bad_input_names_the_field(kwargs, message):
    v = kwargs.pop("v", 0.0)
    with pytest.raises(ValueError, match=message):
        balls([0.0, 1.0, 0.0], v, **kwargs)


def test_gravity_out_of_the_ground_is_refused():
    with pytest.raises(ValueError, match="needs gravity into its ground"):
        balls([0.0, 1.0, 0.0]).build(gravity=(0.0, 9.81, 0.0))
