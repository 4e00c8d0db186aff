"""The implicit (linearized backward Euler) integrator: the closed-form step of a linear spring, free fall, stability
at any stiffness, kinematic pins, derivatives against float64 central differences, and the CG solve."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import ImplicitEuler, SemiImplicitEuler, StepWarning, cg_solve, replace_paths
from gradsim_jax.physics.particles import ParticleControl
from gradsim_jax.physics.types import Control


def _spring_pair(ke, kd, *, damping=0.0, x1=1.3, gravity=(0.0, 0.0, 0.0)):
    """A pinned particle at the origin and a free one of 2 kg at (x1, 0, 0) on a spring of rest length 1."""
    scene = gs.particles([[0.0, 0.0, 0.0], [x1, 0.0, 0.0]], mass=[1.0, 2.0], pinned=[True, False])
    scene = scene.add_springs([[0, 1]], ke, kd, rest=1.0)
    topology, params, state = scene.build(gravity=gravity, damping=damping)
    return topology, params, state


def test_a_linear_spring_takes_the_closed_form_backward_euler_step():
    # Along the spring's line the force is linear, so the linearized step is backward Euler itself:
    # v1 (m + dt^2 k + dt kd + dt m c) = m v0 - dt k (x0 - L);  x1 = x0 + dt v1.
    ke, kd, c, m, dt = 400.0, 3.0, 0.5, 2.0, 0.05
    with jax.enable_x64(True):
        topology, params, state = _spring_pair(ke, kd, damping=c)
        traj = gs.simulate(topology, params, state, frame_dt=dt, frames=40, substeps=1, integrator=ImplicitEuler(iterations=6))
        xs = np.asarray(traj.particles.x[:, 1, 0])
    x, v, expect = 1.3, 0.0, []
    for _ in range(40):
        v = (m * v - dt * ke * (x - 1.0)) / (m + dt * dt * ke + dt * kd + dt * m * c)
        x = x + dt * v
        expect.append(x)
    np.testing.assert_allclose(xs[1:], expect, rtol=0, atol=1e-12)
    # The step is stable and dissipative where the explicit one diverges (dt^2 k / m = 0.5 here; 40 below).
    assert abs(xs[-1] - 1.0) < 0.3 * 0.3


def test_free_fall_is_the_semi_implicit_one():
    with jax.enable_x64(True):
        scene = gs.particles([[0.0, 2.0, 0.0]], mass=[0.5])
        topology, params, state = scene.build()
        dt, n = 0.01, 30
        a = gs.simulate(topology, params, state, frame_dt=dt, frames=n, substeps=1, integrator=ImplicitEuler(iterations=3))
        b = gs.simulate(topology, params, state, frame_dt=dt, frames=n, substeps=1, integrator=SemiImplicitEuler())
        y = 2.0 - 9.81 * dt * dt * n * (n + 1) / 2
        np.testing.assert_allclose(np.asarray(a.particles.x[-1, 0, 1]), y, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(a.particles.x), np.asarray(b.particles.x), rtol=0, atol=1e-12)


def test_a_stiff_spring_stays_bounded_and_is_not_warned_about():
    ke, dt = 1.0e6, 0.01  # dt^2 k / m = 50: the explicit step blows up
    topology, params, state = _spring_pair(ke, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepWarning)
        traj = gs.simulate(topology, params, state, frame_dt=dt, frames=50, substeps=1, integrator=ImplicitEuler(iterations=6))
    x = np.asarray(traj.particles.x[:, 1, 0])
    assert np.all(np.isfinite(x)) and np.all(np.abs(x - 1.0) <= 0.3 + 1e-6)
    with pytest.warns(StepWarning):
        gs.simulate(topology, params, state, frame_dt=dt, frames=2, substeps=1, integrator=SemiImplicitEuler())


def test_pinned_particles_follow_their_kinematic_velocity():
    topology, params, state = _spring_pair(50.0, 1.0, gravity=(0.0, -9.81, 0.0))
    pinned_v = jnp.asarray([[0.3, -0.2, 0.1], [0.0, 0.0, 0.0]])
    control = Control(particles=ParticleControl(pinned_velocity=pinned_v))
    dt, n = 0.02, 10
    traj = gs.simulate(topology, params, state, frame_dt=dt, frames=n, substeps=1, integrator=ImplicitEuler(iterations=6),
                       control=control)
    np.testing.assert_allclose(np.asarray(traj.particles.x[-1, 0]), n * dt * np.asarray(pinned_v[0]), rtol=0,
                               atol=1e-5)
    # The free particle felt the moving pin: it differs from a run with the pin held still.
    still = gs.simulate(topology, params, state, frame_dt=dt, frames=n, substeps=1, integrator=ImplicitEuler(iterations=6))
    assert np.max(np.abs(np.asarray(traj.particles.x[-1, 1] - still.particles.x[-1, 1]))) > 1e-3


def _cloth():
    scene = gs.cloth_grid(3, 3, 0.1, 0.1, pos=(0.0, 1.0, 0.0), rot=(0.7071068, 0.7071068, 0.0, 0.0), mass=0.05,
                          fix_top=True, tri_ke=200.0, tri_ka=200.0, tri_kd=0.5, bend_ke=0.01, bend_kd=0.001)
    from gradsim_jax.geometry import mesh_edges
    scene = scene.add_springs(mesh_edges(scene.triangles), 500.0, 0.2)
    return scene.build(damping=0.3)


def test_gradient_matches_float64_central_differences():
    # A 4 x 4 cloth (48 degrees of freedom; 150 CG iterations solve each step to round-off in float64, so central
    # differences of the forward solve see the exact solve whose derivative the backward pass takes) with a
    # membrane, bending and edge springs, hanging from its top edge and swinging; the loss is its last positions'.
    with jax.enable_x64(True):
        topology, params, state = _cloth()
        weights = jnp.asarray(np.random.default_rng(0).normal(size=state.particles.x.shape))
        integrator = ImplicitEuler(iterations=150)

        def loss(theta):
            ke, kd, c = theta
            p = replace_paths(params, {"springs.ke": jnp.full_like(params.springs.ke, ke),
                                      "springs.kd": jnp.full_like(params.springs.kd, kd),
                                      "particles.damping": c})
            traj = gs.simulate(topology, p, state, frame_dt=1.0 / 60.0, frames=12, substeps=1, integrator=integrator)
            return jnp.sum(weights * traj.particles.x[-1])

        theta = jnp.asarray([60.0, 0.2, 0.3])
        grad = np.asarray(jax.grad(loss)(theta))
        for i in range(3):
            h = 1e-5 * float(theta[i])
            e = np.zeros(3)
            e[i] = h
            fd = (float(loss(theta + e)) - float(loss(theta - e))) / (2 * h)
            # central differences' error: h^2 f''' ~ 1e-10 relative, round-off 1e-16 / 1e-5 = 1e-11 relative; and
            # the springs' step Jacobian switches its sideways term off at the rest length (a kink the hanging
            # cloth's springs cross): a difference straddling it is off by up to ~h / (the step's scale), 1e-5
            np.testing.assert_allclose(grad[i], fd, rtol=1e-5, atol=1e-9 * abs(fd) + 1e-12)


def test_the_implicit_step_converges_to_the_explicit_one_as_the_step_shrinks():
    # Both are first-order methods of the same equations: their gap at a fixed time shrinks in proportion to dt.
    with jax.enable_x64(True):
        topology, params, state = _cloth()
        gaps = []
        for steps in (40, 80):
            dt = 0.2 / steps
            a = gs.simulate(topology, params, state, frame_dt=dt, frames=steps, substeps=1, integrator=ImplicitEuler(iterations=60))
            b = gs.simulate(topology, params, state, frame_dt=dt, frames=steps, substeps=1, integrator=SemiImplicitEuler())
            gaps.append(float(jnp.max(jnp.abs(a.particles.x[-1] - b.particles.x[-1]))))
    assert gaps[0] > 1e-5
    assert 1.6 < gaps[0] / gaps[1] < 2.4


def _system(n, shift, seed):
    """A random symmetric positive definite n x n system (a, b), float64 (call inside `enable_x64`)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, n))
    return jnp.asarray(q @ q.T + shift * np.eye(n)), jnp.asarray(rng.normal(size=n))


def test_cg_solve_solves_and_differentiates_like_a_dense_solve():
    with jax.enable_x64(True):
        a, b = _system(6, 6.0, 1)
        np.testing.assert_allclose(cg_solve(lambda u: a @ u, b, 12), jnp.linalg.solve(a, b), rtol=1e-10)

        def f(s):
            return jnp.sum(cg_solve(lambda u: (a + s * jnp.eye(6)) @ u, b, 12) ** 2)

        def g(s):
            return jnp.sum(jnp.linalg.solve(a + s * jnp.eye(6), b) ** 2)

        np.testing.assert_allclose(jax.grad(f)(0.5), jax.grad(g)(0.5), rtol=1e-9)
        # a right-hand side of zero (a system at rest): zero, not 0 / 0
        assert np.all(np.asarray(cg_solve(lambda u: a @ u, jnp.zeros(6), 5)) == 0.0)



def test_a_cloth_pushed_together_buckles_without_blowing_up():
    # Two opposite edges of a stiff spring cloth (Blender's springs on every edge) driven towards each other: its
    # springs compress by far more than the 3 % at which their exact sideways stiffness makes the step's system
    # indefinite (dt^2 k / m = 36 here); the springs' own Jacobian for the step (`spring_system_jvp`) keeps it
    # definite, and the cloth buckles out of its plane with its edges near their rest lengths.
    from gradsim_jax.geometry import mesh_edges

    scene = gs.cloth_grid(8, 8, 0.05, 0.05, mass=0.05, fix_left=True, fix_right=True, tri_ke=0.0, tri_ka=0.0,
                          tri_kd=0.0)
    edges = mesh_edges(scene.triangles)
    scene = scene.add_springs(edges, 2.0e5, 20.0)
    topology, params, state = scene.build(gravity=(0.0, -9.81, 0.0))
    pinned = np.asarray(topology.particles.pinned)
    x0 = np.asarray(state.particles.x)
    inward = np.where(x0[:, 0:1] < 0.2, 1.0, -1.0) * np.array([[0.3, 0.0, 0.0]])  # 0.6 m/s closing speed
    control = Control(particles=ParticleControl(pinned_velocity=jnp.asarray(np.where(pinned[:, None], inward, 0.0))))
    traj = gs.simulate(topology, params, state, frame_dt=1 / 30, frames=15, substeps=5, control=control,
                       integrator=ImplicitEuler(iterations=40))
    x = np.asarray(traj.particles.x)
    assert np.all(np.isfinite(x))
    span = x[-1, pinned, 0].max() - x[-1, pinned, 0].min()
    assert span < 0.4 - 0.25  # the edges came 0.3 m closer together
    lengths = np.linalg.norm(x[-1, edges[:, 0]] - x[-1, edges[:, 1]], axis=-1)
    rest = np.linalg.norm(x0[edges[:, 0]] - x0[edges[:, 1]], axis=-1)
    assert np.median(np.abs(lengths / rest - 1)) < 0.05  # buckled, not squashed in its plane
    assert np.ptp(x[-1, :, 1]) > 0.05  # out of its plane


def test_cg_stops_at_its_tolerance():
    # With a tolerance the iterations stop once |r| <= tol |b|: the answer is that close, and a loose tolerance
    # leaves a larger residual than the full run (so it did stop early).
    with jax.enable_x64(True):
        a, b = _system(40, 0.5, 2)
        exact = np.linalg.solve(np.asarray(a), np.asarray(b))
        full = np.asarray(cg_solve(lambda u: a @ u, b, 400))
        loose = np.asarray(cg_solve(lambda u: a @ u, b, 400, tolerance=0.1))
        np.testing.assert_allclose(full, exact, rtol=1e-8, atol=1e-8)
        residual = np.linalg.norm(np.asarray(a) @ loose - np.asarray(b)) / np.linalg.norm(np.asarray(b))
        assert 1e-6 < residual <= 0.1
