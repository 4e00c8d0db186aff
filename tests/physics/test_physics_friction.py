"""Friction through sliding to rest (issue 34, item 7): the contact's damping and friction taken backward
(`SemiImplicitEuler(implicit_contact=True)`, `physics.contact.implicit_penalty_force`) keep a particle or a
cloth that stops on the ground at rest instead of chattering, and their gradients finite, smooth and equal to
central differences; Warp's explicit penalty (`implicit_contact=False`) chatters at the same settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import SemiImplicitEuler, implicit_penalty_force, penalty_force, replace_paths

G = 9.81
DT = 1.0 / 960.0  # 32 substeps of 30 fps
UP = jnp.array([0.0, 1.0, 0.0])


def _slider(mu, v0=1.0, mass=0.01, ke=1.0e3, kd=10.0, kf=100.0, radius=0.01):
    """One particle resting on the ground (at its equilibrium depth m g / ke), sliding at v0 along x."""
    y = radius - mass * G / ke
    return gs.particles([[0.0, y, 0.0]], v=[[v0, 0.0, 0.0]], mass=mass).build(
        ground=True, contact_ke=ke, contact_kd=kd, contact_kf=kf, contact_mu=mu, particle_radius=radius)


def _run(top, par, st, frames, implicit=True):
    return gs.simulate(top, par, st, frames=frames, substeps=32, frame_dt=1.0 / 30.0,
                       integrator=SemiImplicitEuler(implicit_contact=implicit))


def test_a_sliding_particle_stops_where_coulomb_says_and_stays_there(x64):
    """Distance v0^2 / (2 mu g) to within one step of motion (v0 dt: semi-implicit Euler's offset), and at
    rest afterwards. At these settings (dt kf / m = 10.4) Warp's explicit friction chatters at about
    mu g dt per step around the stop instead."""
    mu, v0 = 0.5, 1.0
    top, par, st = _slider(mu, v0)
    traj = _run(top, par, st, frames=20)  # 0.67 s; it stops after v0 / (mu g) = 0.2 s
    x = np.asarray(traj.particles.x[:, 0, 0])
    v = np.asarray(traj.particles.v[:, 0])
    assert abs(x[-1] - v0 ** 2 / (2.0 * mu * G)) < v0 * DT
    assert np.abs(v[10:]).max() < 1e-12  # at rest from frame 10 (0.33 s) on, along every axis
    explicit = _run(top, par, st, frames=20, implicit=False)
    chatter = np.abs(np.asarray(explicit.particles.v[10:, 0, 0])).max()
    assert chatter > 0.1 * mu * G * DT


def test_the_stop_distance_gradient_is_the_analytic_one(x64):
    """d(v0^2 / (2 mu g)) / d mu = -v0^2 / (2 mu^2 g), to the discretization's relative error (v0 dt over the
    distance: 1 %) with some margin; reverse mode equals central differences."""
    mu = 0.5

    def stop(m):
        top, par, st = _slider(0.5)
        par = replace_paths(par, {"contact.mu": m})
        return _run(top, par, st, frames=12).particles.x[-1, 0, 0]

    grad = float(jax.jit(jax.grad(stop))(jnp.float64(mu)))
    assert grad == pytest.approx(-1.0 / (2.0 * mu * mu * G), rel=3e-2)
    f, h = jax.jit(stop), 1e-5 * mu
    assert grad == pytest.approx(float((f(mu + h) - f(mu - h)) / (2.0 * h)), rel=1e-6)


def _skidding_cloth():
    """Issue 34's skidding cloth, shortened: a 5 x 3 cloth of 10 g particles (tri_ke 300) thrown sideways at
    1 m/s just above the floor (contact ke 1000, kd 10, kf 100, mu 0.35); it stops within 0.3 s."""
    flat = gs.quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2)
    scene = gs.cloth_grid(5, 3, 0.1, 0.1, pos=(-0.25, 0.02, -0.15), rot=flat, vel=(1.0, 0.0, 0.0), mass=0.01,
                          tri_ke=300.0, tri_ka=300.0, tri_kd=1.0, bend_ke=0.0)
    return scene.build(ground=True, contact_ke=1.0e3, contact_kd=10.0, contact_kf=100.0, contact_mu=0.35)


def _cloth_loss(top, st, implicit=True):
    def loss(mu, par):
        traj = _run(top, replace_paths(par, {"contact.mu": mu}), st, frames=12, implicit=implicit)
        return jnp.mean(traj.particles.x[-1, :, 0]) + jnp.mean(traj.particles.x[8, :, 0])

    return loss


def test_friction_gradient_of_a_skidding_cloth_matches_finite_differences():
    """float64: reverse mode = central differences (h = 1e-5 mu: truncation ~1e-10 of the derivative on a
    smooth loss); float32 within 1e-2 of float64 (a contracting rollout keeps float32 rounding near its own
    1e-7 scale; a chaotic one, as the explicit friction here, is off by its whole size)."""
    mu = 0.35
    with jax.enable_x64(True):
        top, par, st = _skidding_cloth()
        loss = _cloth_loss(top, st)
        grad64 = float(jax.jit(jax.grad(loss))(jnp.float64(mu), par))
        f, h = jax.jit(loss), 1e-5 * mu
        fd = float((f(mu + h, par) - f(mu - h, par)) / (2.0 * h))
        assert grad64 == pytest.approx(fd, rel=1e-4)
        assert grad64 < 0  # more friction, a shorter skid
    top, par, st = _skidding_cloth()
    grad32 = float(jax.jit(jax.grad(_cloth_loss(top, st)))(jnp.float32(mu), par))
    assert grad32 == pytest.approx(grad64, rel=1e-2)


def test_implicit_friction_is_continuous_at_the_stick_slip_switch_and_never_reverses(x64):
    ke, kd, kf, mu, m, dt = 1.0e3, 10.0, 100.0, 0.4, 0.01, DT
    c = jnp.asarray(-m * G / ke)
    inv_mass = jnp.asarray(1.0 / m)
    slope = kf / (1.0 + dt * kf / m)
    switch = mu * m * G / slope  # |vt| where the viscous friction reaches the Coulomb limit (at rest normally)

    def force(speed):
        v_free = jnp.array([speed, -G * dt, 0.0])  # resting: gravity's step is what the elastic push cancels
        return implicit_penalty_force(UP, c, v_free, inv_mass, dt, ke, kd, kf, mu)

    below, above = force(switch * (1.0 - 1e-9)), force(switch * (1.0 + 1e-9))
    np.testing.assert_allclose(below, above, rtol=1e-7)
    np.testing.assert_allclose(below[1], m * G, rtol=1e-9)  # no damping at rest: the weight alone
    rng = np.random.default_rng(0)
    for _ in range(50):
        v_free = jnp.asarray(rng.normal(size=3) * 10.0 ** rng.uniform(-4, 1))
        depth = -abs(rng.normal()) * 1e-3
        f = implicit_penalty_force(UP, jnp.asarray(depth), v_free, inv_mass, dt, ke, kd, kf, mu)
        v1 = v_free + dt * inv_mass * f
        t0, t1 = np.asarray(v_free)[[0, 2]], np.asarray(v1)[[0, 2]]
        assert np.linalg.norm(t1) <= np.linalg.norm(t0) * (1 + 1e-12)
        assert float(np.dot(t1, t0)) >= 0.0  # friction slows a slide, never turns it round
        pushed = float(v_free[1]) - dt * inv_mass * depth * ke  # the normal velocity after the elastic push
        assert float(v1[1]) >= min(pushed, 0.0) - 1e-12 and (pushed >= 0 or float(v1[1]) <= 0.0)


def test_explicit_contact_is_warps_penalty_force(x64):
    """`implicit_contact=False` reproduces Warp's explicit kernel: the step adds penalty_force at the start
    velocity."""
    top, par, st = _slider(0.4, v0=0.3, kf=20.0)
    explicit = _run(top, par, st, frames=1, implicit=False)
    v, x = st.particles.v, st.particles.x
    for _ in range(32):
        c = x[:, 1] - 0.01
        f = penalty_force(UP, c, v, 1.0e3, 10.0, 20.0, 0.4)
        v = v + DT * (f / 0.01 + par.world.gravity)
        x = x + DT * v
    np.testing.assert_allclose(explicit.particles.x[-1], x, rtol=1e-12, atol=1e-15)


def test_a_soft_block_thrown_onto_the_ground_with_warps_contact_has_a_usable_gradient():
    """Issue 34, item 6: a tilted soft block thrown onto the ground with Warp's default soft contact (ke 1000,
    kd 10, kf 1000; dt kf / m of its particles about 5 here, 5 to 25 in the benchmark's block). Taken
    explicitly its stick phase chatters (this one's gradient by k_mu came out 2.9x its central differences;
    the benchmark's 1e27, and a fit from 0.5x the truth did not move); taken backward it equals central
    differences in float64 (h = 1e-5 k_mu: truncation ~1e-10)."""
    from gradsim_jax.geometry.tet_shapes import box_tets

    x, t = box_tets((2, 1, 1), (0.2, 0.1, 0.1), pattern=5)
    tilt = gs.quat_from_axis_angle((0.0, 0.0, 1.0), np.deg2rad(20.0))
    with jax.enable_x64(True):
        top, par, st = gs.soft_body(x, t, rot=tilt, pos=(0.0, 0.06, 0.0), vel=(1.0, 0.5, 0.0), k_mu=5e3,
                                    k_lambda=2e4, k_damp=0.0).build(
            ground=True, contact_ke=1e3, contact_kd=10.0, contact_kf=1e3, contact_mu=0.5, particle_radius=0.0)

        def landing(k_mu, implicit=True):
            p = replace_paths(par, {"fem.k_mu": jnp.full_like(par.fem.k_mu, k_mu)})
            traj = _run(top, p, st, frames=10, implicit=implicit)
            return jnp.sum(traj.particles.x[-1] * jnp.array([1.0, 2.0, 0.5]))

        k = 2.5e3  # half the truth: where the fit starts
        grad = float(jax.jit(jax.grad(landing))(jnp.float64(k)))
        f, h = jax.jit(landing), 1e-5 * k
        assert grad == pytest.approx(float((f(k + h) - f(k - h)) / (2.0 * h)), rel=1e-4)
