"""Pendulums as ODE bodies (physics.pendulum, physics.ode): periods against the analytic small-angle period and
the exact large-angle (elliptic) one, the large-angle motion against a float64 reference solution, the double
pendulum's equations against the textbook closed form, energy conservation and dissipation, gradients against
float64 finite differences, rendering, and bad input."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import ellipk

from gradsim_jax.geometry.ode import ode_body, pendulum
from gradsim_jax.physics import simulate
from gradsim_jax.physics.ode import EDRIFT, FunctionOde, OdeSolver, energy_drift, ode_trajectory
from gradsim_jax.physics.pendulum import PendulumState, accelerations, bob_positions, energy
from gradsim_jax.render.mesh import scene_faces, scene_vertices


def _crossing_times(theta, dt):
    """Times of the downward zero crossings of theta (linear interpolation between samples)."""
    s = np.where((theta[:-1] > 0) & (theta[1:] <= 0))[0]
    return (s + theta[s] / (theta[s] - theta[s + 1])) * dt


def _swing(theta0, *, length=1.0, g=9.81, frames=3000, frame_dt=1e-3, substeps=1, damping=0.0):
    top, par, st = pendulum([length], [1.0], [theta0], damping=damping).build(gravity=(0.0, -g, 0.0))
    traj = simulate(top, par, st, frames=frames, substeps=substeps, frame_dt=frame_dt)
    return np.asarray(traj.ode.theta[:, 0, 0]), np.asarray(traj.ode.omega[:, 0, 0])


def test_small_angle_period(x64):
    length, g, theta0, dt = 0.7, 9.81, 0.01, 1e-3
    theta, _ = _swing(theta0, length=length, g=g, frame_dt=dt)
    period = np.mean(np.diff(_crossing_times(theta, dt)))
    # The exact period exceeds 2 pi sqrt(l/g) by theta0^2/16 = 6.25e-6 relatively; linear interpolation of a
    # crossing errs by ~ (omega dt)^2 theta0 / 8 / |theta'| ~ 1e-6 dt relatively: the bound is 2e-5.
    assert period == pytest.approx(2 * np.pi * np.sqrt(length / g), rel=2e-5)


def test_large_angle_period_and_motion_against_float64_references(x64):
    length, g, theta0, dt = 1.3, 9.81, 2.5, 1e-3
    theta, omega = _swing(theta0, length=length, g=g, frames=6000, frame_dt=dt)
    period = np.mean(np.diff(_crossing_times(theta, dt)))
    exact = 4 * np.sqrt(length / g) * ellipk(np.sin(theta0 / 2) ** 2)  # scipy's ellipk takes m = k^2
    # Crossing interpolation: the curvature at a crossing is zero (theta'' = -g/l sin 0), so its error is
    # O(dt^3 theta''') ~ 1e-9 of the period; Tsit5's global error at dt = 1 ms is ~1e-10.
    assert period == pytest.approx(exact, rel=1e-7)
    assert abs(period / (2 * np.pi * np.sqrt(length / g)) - 1) > 0.2  # far from the small-angle period
    ts = np.arange(6001) * dt
    ref = solve_ivp(lambda t, y: [y[1], -g / length * np.sin(y[0])], (0, ts[-1]), [theta0, 0.0], method="DOP853",
                    t_eval=ts, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(theta, ref.y[0], atol=1e-8)
    np.testing.assert_allclose(omega, ref.y[1], atol=1e-7)


def test_double_pendulum_equations_match_the_closed_form(x64):
    rng = np.random.default_rng(3)
    l1, l2, m1, m2, g = 0.8, 1.3, 1.5, 0.7, 9.81
    top, par, st = pendulum([l1, l2], [m1, m2], [0.0, 0.0]).build(gravity=(0.0, -g, 0.0))
    for _ in range(5):
        t1, t2, w1, w2 = rng.uniform(-3, 3, 4)
        a = np.asarray(accelerations(par.ode, g, jnp.asarray([[t1, t2]]), jnp.asarray([[w1, w2]])))[0]
        d = t1 - t2
        den = 2 * m1 + m2 - m2 * np.cos(2 * d)
        a1 = (-g * (2 * m1 + m2) * np.sin(t1) - m2 * g * np.sin(t1 - 2 * t2)
              - 2 * np.sin(d) * m2 * (w2 ** 2 * l2 + w1 ** 2 * l1 * np.cos(d))) / (l1 * den)
        a2 = (2 * np.sin(d) * (w1 ** 2 * l1 * (m1 + m2) + g * (m1 + m2) * np.cos(t1)
                               + w2 ** 2 * l2 * m2 * np.cos(d))) / (l2 * den)
        np.testing.assert_allclose(a, [a1, a2], rtol=1e-10)


def _double(theta=(3 * np.pi / 7, 3 * np.pi / 4), damping=0.0, g=10.0):
    return pendulum([1.0, 1.0], [1.0, 1.0], list(theta), damping=damping).build(gravity=(0.0, -g, 0.0))


@pytest.mark.slow  # suite time (CI's 10 minutes on 2 cores); `make test-all` runs it
def test_double_pendulum_conserves_energy_and_damping_dissipates_it(x64):
    top, par, st = _double()
    traj = simulate(top, par, st, frames=120, substeps=8, frame_dt=1 / 30)  # 4 s of chaotic motion
    e = np.asarray(jax.jit(jax.vmap(lambda y: energy(par.ode, 10.0, y)))(traj.ode))[:, 0]
    # Tsit5 at dt = 1/240 s: local error ~ C dt^5 per step with |y^(5)| ~ 1e3 rad/s^5 here, 960 steps: ~1e-6.
    assert np.max(np.abs(e - e[0])) / abs(e[0]) < 1e-5
    top, par, st = _double(damping=0.3)
    traj = simulate(top, par, st, frames=120, substeps=8, frame_dt=1 / 30)
    e = np.asarray(jax.jit(jax.vmap(lambda y: energy(par.ode, 10.0, y)))(traj.ode))[:, 0]
    assert np.all(np.diff(e) < 0)  # dE/dt = -sum c (omega_j - omega_{j-1})^2 < 0 while anything moves
    assert e[-1] < e[0] - 1.0


def test_energy_drift_reports_the_dissipation_and_its_conservative_twin_the_solver(x64):
    top, par, st = _double(damping=0.3)
    traj = simulate(top, par, st, frames=120, substeps=8, frame_dt=1 / 30)
    system = top.ode.system
    report = energy_drift(system, par.ode, par.world, traj.ode)
    e = np.asarray(jax.jit(jax.vmap(lambda y: energy(par.ode, 10.0, y)))(traj.ode))[:, 0]
    assert report["unit"] == "J" and report["initial"] == [e[0]] and report["final"] == [e[-1]]
    np.testing.assert_allclose(report["max_drift"], [e[0] - e.min()], rtol=1e-12)  # it only falls (test above)
    twin = system.conservative(par.ode)
    assert np.all(np.asarray(twin.damping) == 0) and np.all(np.asarray(par.ode.damping) == 0.3)
    motion = ode_trajectory(top.ode, twin, par.world, st.ode, 120, 1 / 30, 8)
    # Same bound as the undamped run above (it is that run): Tsit5's truncation over 960 steps, ~1e-6.
    assert energy_drift(system, twin, par.world, motion)["relative"][0] < 1e-5
    assert EDRIFT == 0.05
    assert energy_drift(FunctionOde(lambda t, y, p, w: y, lambda p, y: y, np.zeros((1, 3))), None, None, None) is None


def test_the_adaptive_solver_agrees_with_the_fixed_step_one(x64):
    top, par, st = _double()
    fixed = simulate(top, par, st, frames=30, substeps=16, frame_dt=1 / 30)
    adaptive = simulate(top, par, st, frames=30, substeps=4, frame_dt=1 / 30,
                        ode_solver=OdeSolver(solver="dopri8", adaptive=True, rtol=1e-11, atol=1e-11))
    np.testing.assert_allclose(adaptive.ode.theta, fixed.ode.theta, atol=1e-7)


@pytest.mark.parametrize("adjoint", ["direct", pytest.param("recursive", marks=pytest.mark.slow)])  # suite time
def test_gradient_matches_float64_finite_differences(x64, adjoint):
    top, par, st = _double(damping=0.1)
    solver = OdeSolver(adjoint=adjoint)

    def final_bob(length, mass, damping, theta0):
        ode = dataclasses.replace(par.ode, length=length, mass=mass, damping=damping)
        state = dataclasses.replace(st, ode=PendulumState(theta=theta0, omega=st.ode.omega))
        traj = simulate(top, dataclasses.replace(par, ode=ode), state, frames=15, substeps=4, frame_dt=1 / 30,
                        ode_solver=solver)
        return jnp.sum(bob_positions(ode, traj.ode.theta[-1])[0, 1, :2] * jnp.asarray([1.0, 0.5]))

    args = [par.ode.length, par.ode.mass, par.ode.damping, st.ode.theta]
    grads = jax.jit(jax.grad(final_bob, argnums=(0, 1, 2, 3)))(*args)
    final_bob = jax.jit(final_bob)
    h = 1e-6
    for i, (a, g) in enumerate(zip(args, grads)):
        for j in range(2):
            e = jnp.zeros_like(a).at[0, j].set(h)
            up = [x + e if k == i else x for k, x in enumerate(args)]
            down = [x - e if k == i else x for k, x in enumerate(args)]
            fd = (final_bob(*up) - final_bob(*down)) / (2 * h)
            # Central differences: O(h^2 f''') + rounding 1e-16 / h ~ 1e-10 on values of order 1.
            assert float(g[0, j]) == pytest.approx(float(fd), rel=1e-6, abs=1e-8), (i, j)


def test_rendered_vertices_follow_the_bobs(x64):
    top, par, st = pendulum([1.0, 0.5], [1.0, 2.0], [0.3, -0.4], bob_radius=0.1, pivot=(0.2, 3.0, 0.0)).build()
    verts = np.asarray(scene_vertices(top, par, st))
    faces = scene_faces(top)
    assert faces.max() == len(verts) - 1 and faces.min() == 0
    per_bob = len(top.ode.system.bob_faces) // 2 + 2  # an icosphere has V = F / 2 + 2 vertices
    centres = np.asarray(bob_positions(par.ode, st.ode.theta))[0]
    for b in range(2):
        np.testing.assert_allclose(verts[b * per_bob:(b + 1) * per_bob].mean(0), centres[b], atol=1e-12)
    np.testing.assert_allclose(centres[0], [0.2 + np.sin(0.3), 3.0 - np.cos(0.3), 0.0])
    rods = verts[2 * per_bob:]
    assert rods.shape == (16, 3)
    np.testing.assert_allclose(rods[:8].mean(0), (centres[0] + [0.2, 3.0, 0.0]) / 2, atol=1e-12)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lengths=[-1.0]), r"Params.ode.length\[0, 0\] = -1.0 is not a finite value > 0"),
    (dict(masses=[0.0]), r"Params.ode.mass\[0, 0\] = 0.0 is not a finite value > 0"),
    (dict(theta=[float("nan")]), r"State.ode.theta\[0, 0\] = nan is not finite"),
    (dict(damping=[-0.1]), r"Params.ode.damping\[0, 0\] = -0.1 is not a finite value >= 0"),
    (dict(masses=[1.0, 2.0]), r"pendulum masses needs one value per link \(1\)"),
])
def test_bad_input_names_the_field(kwargs, message):
    args = dict(lengths=[1.0], masses=[1.0], theta=[0.5]) | kwargs
    with pytest.raises(ValueError, match=message):
        pendulum(args.pop("lengths"), args.pop("masses"), args.pop("theta"), **args)


def test_bad_values_reaching_simulate_name_the_field_and_sideways_gravity_is_refused():
    top, par, st = pendulum([1.0], [1.0], [0.5]).build()
    bad = dataclasses.replace(par, ode=dataclasses.replace(par.ode, length=jnp.asarray([[-2.0]])))
    with pytest.raises(ValueError, match=r"Params.ode.length\[0, 0\] = -2.0"):
        simulate(top, bad, st, frames=2, substeps=1, frame_dt=0.01)
    with pytest.raises(ValueError, match="x or z components"):
        pendulum([1.0], [1.0], [0.5]).build(gravity=(1.0, -9.81, 0.0))


def test_a_users_own_ode_body(x64):
    # A harmonic oscillator along x drawn as one triangle that it carries: y = (x, v), x'' = -k x.
    tri = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0]])
    system = FunctionOde(field_fn=lambda t, y, p, g: (y[1], -p["k"] * y[0]),
                         vertices_fn=lambda p, y: jnp.asarray(tri) + jnp.stack([y[0], 0.0, 0.0]),
                         face_array=[[0, 1, 2]])
    top, par, st = ode_body(system, {"k": np.asarray(4.0)}, (np.asarray(1.0), np.asarray(0.0))).build()
    traj = simulate(top, par, st, frames=100, substeps=4, frame_dt=0.01)
    np.testing.assert_allclose(traj.ode[0], np.cos(2.0 * np.arange(101) * 0.01), atol=1e-9)
    np.testing.assert_allclose(np.asarray(scene_vertices(top, par, st))[0], [1.0, 0.0, 0.0])
    direct = ode_trajectory(top.ode, par.ode, par.world, st.ode, 100, 0.01, 4)
    np.testing.assert_allclose(direct[0], traj.ode[0], atol=0)
    bad = dataclasses.replace(st, ode=(jnp.asarray(float("nan")), jnp.asarray(0.0)))
    with pytest.raises(ValueError, match=r"State.ode\[0\] = nan is not finite"):
        simulate(top, par, bad, frames=2, substeps=1, frame_dt=0.01)
