"""The explicit step's stability check (`physics.stability`): its rates equal the largest eigenvalues of the
mass-scaled stiffness and damping matrices that JAX's derivatives of the forces give (float64), its limit
dt^2 k / m + 2 dt c / m < 4 is where semi-implicit Euler starts to blow up (a spring, a damped soft body),
`simulate` warns past it, and a fit of the FEM damping is kept under it."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.geometry.tet_shapes import box_tets
from gradsim_jax.physics import StepWarning, damping_limit, fem_energy, fem_forces, replace_paths, step_report


def _spring(ke, kd, mass=0.1):
    """Particle 1 (mass kg) hanging 1 m from the fixed particle 0 on one spring at its rest length, no gravity."""
    scene = gs.particles([[0.0, 0.0, 0.0], [0.0, -1.0, 0.0]], mass=[0.0, mass]).add_springs([[0, 1]], ke, kd)
    return scene.build(gravity=(0.0, 0.0, 0.0))


def _amplitude_ratio(top, par, st, dt, steps=400):
    """|x - rest| at the end over its start, for the particle pulled 1 cm along the spring."""
    x = np.asarray(st.particles.x).copy()
    x[1, 1] -= 0.01
    st = replace_paths(st, {"particles.x": jnp.asarray(x, st.particles.x.dtype)})
    traj = gs.simulate(top, par, st, frames=steps // 4, substeps=4, frame_dt=4 * dt, checkpoint=False)
    end = np.asarray(traj.particles.x[-1, 1], np.float64)
    return np.linalg.norm(end - [0.0, -1.0, 0.0]) / 0.01


def _decays_below_and_blows_up_above(growth, limit, margin, blown):
    """growth(dt) (the motion's end over its start) is below 1 at (1 - margin) x the limit, with no StepWarning,
    and above `blown` (or non-finite) at (1 + margin) x, with one that names the remedy."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepWarning)
        assert growth((1.0 - margin) * limit) < 1.0
    with pytest.warns(StepWarning, match="too long for the elastic elements.*substeps"):
        grown = growth((1.0 + margin) * limit)
    assert not np.isfinite(grown) or grown > blown


@pytest.mark.parametrize("ke,kd", [(1.0e3, 5.0), (10.0, 50.0)], ids=["stiffness-bound", "damping-bound"])
def test_a_spring_blows_up_just_past_the_reported_step_and_not_before(ke, kd):
    top, par, st = _spring(ke, kd)
    report = step_report(top, par, st)
    assert report.stiffness_rate == pytest.approx(ke / 0.1, rel=1e-6)  # the mass is a float32 0.1
    assert report.damping_rate == pytest.approx(kd / 0.1, rel=1e-6)
    k, c = report.stiffness_rate, report.damping_rate
    limit = report.max_stable_dt
    assert limit * limit * k + 2.0 * limit * c == pytest.approx(4.0, rel=1e-9)
    _decays_below_and_blows_up_above(lambda dt: _amplitude_ratio(top, par, st, dt), limit, 0.03, 10.0)


def _soft_cube(k_damp, pinned=None, activation=0.0):
    x, t = box_tets((1, 1, 1), (0.1, 0.1, 0.1), pattern=5)
    rng = np.random.default_rng(1)
    body = gs.soft_body(x, t, density=1000.0, k_mu=2.0e3 * (1 + rng.random(len(t))),
                        k_lambda=5.0e3 * (1 + rng.random(len(t))), k_damp=k_damp, pinned=pinned)
    top, par, st = body.build(gravity=(0.0, 0.0, 0.0))
    return top, replace_paths(par, {"fem.activation": jnp.full_like(par.fem.activation, activation)}), st


def test_the_rates_are_the_largest_eigenvalues_of_the_force_derivatives_float64():
    with jax.enable_x64(True):
        top, par, st = _soft_cube(k_damp=np.linspace(5.0, 15.0, 5), pinned=[0], activation=0.05)
        par = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a,
                           par)
        x = jnp.asarray(par.fem.rest_x, jnp.float64)
        n = x.shape[0]
        # Jitted: evaluated eagerly, every primitive of the derivatives compiled on its own (9 s instead of 1).
        stiffness = jax.jit(jax.hessian(lambda y: fem_energy(top, par, y.reshape(n, 3))))(x.ravel())
        damping = -jax.jit(jax.jacobian(lambda v: fem_forces(top, par, x, v.reshape(n, 3)).ravel()))(jnp.zeros(3 * n))
        mass = np.asarray(par.particles.mass, np.float64)
        s = np.repeat(np.where(np.arange(n) == 0, 0.0, 1.0 / np.sqrt(mass)), 3)  # particle 0 pinned
        expect = [float(np.linalg.eigvalsh(s[:, None] * np.asarray(a) * s[None, :]).max())
                  for a in (stiffness, damping)]
        report = step_report(top, par)
    assert report.stiffness_rate == pytest.approx(expect[0], rel=1e-5)
    assert report.damping_rate == pytest.approx(expect[1], rel=1e-5)
    assert report.elements == 5


def _kinetic_growth(top, par, st, dt, steps=240):
    v = np.random.default_rng(0).normal(scale=0.01, size=np.shape(st.particles.v))
    st = replace_paths(st, {"particles.v": jnp.asarray(v, st.particles.v.dtype)})
    traj = gs.simulate(top, par, st, frames=steps // 4, substeps=4, frame_dt=4 * dt, checkpoint=False)
    speed = np.asarray(traj.particles.v, np.float64)
    return np.sum(speed[-1] ** 2) / np.sum(speed[0] ** 2)


def test_a_damped_soft_body_blows_up_past_the_reported_step_and_decays_before_it():
    # Damping-dominated (the wobble of a 10 cm cube of 2-10 kPa at 200 Pa s is overdamped): the criterion is
    # then exact, and `damping_limit` is the factor on the damping that reaches it.
    top, par, st = _soft_cube(k_damp=200.0)
    limit = step_report(top, par).max_stable_dt
    assert np.isfinite(limit)
    _decays_below_and_blows_up_above(lambda dt: _kinetic_growth(top, par, st, dt), limit, 0.05, 100.0)
    at = step_report(top, par, dt=0.5 * limit)
    factor = damping_limit(at, margin=1.0)
    assert factor > 1.0
    scaled = replace_paths(par, {"fem.k_damp": par.fem.k_damp * factor})
    assert step_report(top, scaled, dt=0.5 * limit).criterion == pytest.approx(4.0, rel=1e-3)


def test_nothing_to_check_and_stable_scenes_report_no_message():
    top, par, st = gs.particles([[0.0, 0.0, 0.0]]).build()
    report = step_report(top, par, st, dt=0.1)
    assert report.elements == 0 and report.stable and report.message == "" and math.isinf(report.max_stable_dt)
    top, par, st = _soft_cube(k_damp=1.0)
    assert step_report(top, par, st, dt=1e-4).message == ""


def test_cloth_rates_are_the_largest_eigenvalues_of_the_force_derivatives_float64():
    # A membrane with bending, per-triangle stiffness and an activation, on a curved rest shape (the hinges at
    # their rest angles), one corner pinned.
    from gradsim_jax.physics import bending_forces, membrane_forces
    from gradsim_jax.physics.cloth import dihedral_angle

    rng = np.random.default_rng(0)
    scene = gs.cloth_grid(3, 2, 0.1, 0.12, mass=0.01, tri_ke=100.0, tri_ka=150.0, tri_kd=0.5, bend_ke=0.05,
                          bend_kd=0.01, fix_left=True)
    with jax.enable_x64(True):
        top, par, st = scene.build()
        par = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a,
                           par)
        n, t = st.particles.x.shape[0], top.cloth.triangles.shape[0]
        x = np.array(par.cloth.rest_x, np.float64)
        x[:, 2] += 0.02 * rng.standard_normal(n)
        hinges = np.asarray(top.cloth.bend_edges)
        rest = jax.vmap(dihedral_angle)(*(jnp.asarray(x)[hinges[:, k]] for k in range(4)))
        par = replace_paths(par, {"cloth.rest_x": jnp.asarray(x), "cloth.bend_rest": rest,
                                  "cloth.tri_ke": jnp.asarray(100.0 * (1.0 + rng.random(t))),
                                  "cloth.tri_activation": jnp.asarray(0.05 * rng.random(t))})
        x = jnp.asarray(x)

        def force(y, v):
            return (membrane_forces(top, par, y, v) + bending_forces(top, par, y, v)).ravel()

        zero = jnp.zeros_like(x)
        stiffness = -jax.jit(jax.jacobian(lambda y: force(y.reshape(n, 3), zero)))(x.ravel())
        damping = -jax.jit(jax.jacobian(lambda v: force(x, v.reshape(n, 3))))(zero.ravel())
        mass = np.asarray(par.particles.mass, np.float64)
        free = ~np.asarray(top.particles.pinned) & (mass > 0)
        s = np.repeat(np.where(free, 1.0 / np.sqrt(np.where(free, mass, 1.0)), 0.0), 3)
        expect = [float(np.linalg.eigvalsh(s[:, None] * np.asarray(a) * s[None, :]).max())
                  for a in (stiffness, damping)]
        report = step_report(top, par, replace_paths(st, {"particles.x": x}))
    assert np.abs(np.asarray(stiffness) - np.asarray(stiffness).T).max() < 1e-9 * np.abs(np.asarray(stiffness)).max()
    assert report.stiffness_rate == pytest.approx(expect[0], rel=1e-5)
    assert report.damping_rate == pytest.approx(expect[1], rel=1e-5)
    assert report.elements == t + hinges.shape[0]


def test_undamped_and_sparsely_damped_meshes_of_any_size_are_checked_without_an_arpack_error():
    """Issue 34, item 1: k_damp = 0 on a body of more than DENSE_MAX / 3 particles left ARPACK with an
    all-zero Krylov space ("ARPACK error -9: Starting vector is zero"); one damped tet among 90 gives a
    rank-12 damping matrix. Both now report their rates: 0 for no damping, and for the one tet the same rate
    as the power iteration and as the dense matrix of its 4 particles."""
    v, t = box_tets((3, 3, 2), (0.15, 0.15, 0.1), pattern=5)
    top, par, st = gs.soft_body(v, t, k_damp=0.0).build()
    assert top.particles.count * 3 > 90  # past the dense branch: Lanczos
    report = step_report(top, par, dt=1e-3)
    assert report.damping_rate == 0.0 and report.stiffness_rate > 0.0
    assert report.criterion == pytest.approx(1e-6 * report.stiffness_rate, rel=1e-12)
    for method in ("lanczos", "power"):
        assert step_report(top, par, dt=1e-3, method=method).damping_rate == 0.0
    damp = np.zeros(t.shape[0])
    damp[7] = 10.0
    one = replace_paths(par, {"fem.k_damp": jnp.asarray(damp, par.fem.k_damp.dtype)})
    lanczos = step_report(top, one, dt=1e-3).damping_rate
    power = step_report(top, one, dt=1e-3, method="power", iterations=2000, rtol=1e-9).damping_rate
    assert lanczos > 0.0 and lanczos == pytest.approx(power, rel=1e-3)
    undamped = replace_paths(par, {"fem.k_damp": jnp.zeros_like(par.fem.k_damp), "fem.k_mu": jnp.zeros_like(
        par.fem.k_mu), "fem.k_lambda": jnp.zeros_like(par.fem.k_lambda)})
    nothing = step_report(top, undamped, dt=1e-3)
    assert nothing.stable and nothing.criterion == 0.0 and nothing.max_stable_dt == math.inf
