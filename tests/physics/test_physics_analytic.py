"""Physics against analytic solutions and conservation laws."""


import numpy as np
import jax
import jax.numpy as jnp
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import membrane_energy, spring_energy
from gradsim_jax.physics import replace_paths


def kinetic_energy(params, state):
    return 0.5 * jnp.sum(params.particles.mass[:, None] * state.particles.v**2)


def test_free_fall_matches_semi_implicit_closed_form(x64):
    g, dt, steps = -9.81, 1e-3, 200
    top, par, st = gs.particles([[0.0, 10.0, 0.0]], v=[[1.0, 2.0, 0.0]], mass=2.0).build(gravity=(0, g, 0))
    traj = gs.simulate(top, par, st, frames=steps, substeps=1, frame_dt=dt)
    n = np.arange(steps + 1)
    # v_n = v0 + n g dt; x_n = x0 + n dt v0 + g dt^2 n (n + 1) / 2 (semi-implicit Euler).
    np.testing.assert_allclose(traj.particles.x[:, 0, 1], 10.0 + 2.0 * n * dt + g * dt**2 * n * (n + 1) / 2, rtol=1e-12)
    np.testing.assert_allclose(traj.particles.x[:, 0, 0], 1.0 * n * dt, rtol=1e-12)
    np.testing.assert_allclose(traj.particles.v[:, 0, 1], 2.0 + n * g * dt, rtol=1e-12)


def test_two_particle_spring_period(x64):
    m1, m2, ke = 1.0, 3.0, 400.0
    scene = gs.particles([[0.0, 0.0, 0.0], [1.2, 0.0, 0.0]], mass=[m1, m2]).add_springs([[0, 1]], ke, 0.0, rest=1.0)
    top, par, st = scene.build(gravity=(0, 0, 0))
    frame_dt, frames = 1e-3, 3000
    traj = gs.simulate(top, par, st, frames=frames, substeps=4, frame_dt=frame_dt)
    length = np.linalg.norm(traj.particles.x[:, 1] - traj.particles.x[:, 0], axis=-1) - 1.0
    # Times of upward zero crossings of the extension, linearly interpolated.
    s = np.where((length[:-1] < 0) & (length[1:] >= 0))[0]
    t = (s + length[s] / (length[s] - length[s + 1])) * frame_dt
    period = np.mean(np.diff(t))
    expected = 2 * np.pi * np.sqrt((m1 * m2 / (m1 + m2)) / ke)
    assert len(t) >= 5
    assert abs(period - expected) / expected < 0.01


def _free_cloth(bend_ke=0.5, **kw):
    scene = gs.cloth_grid(4, 3, 0.1, 0.1, mass=0.05, tri_ke=200.0, tri_ka=200.0, tri_kd=0.0, bend_ke=bend_ke, **kw)
    rng = np.random.default_rng(0)
    return scene, rng


def test_momentum_conserved_without_gravity_or_contact(x64):
    scene, rng = _free_cloth(tri_drag=0.0)
    scene = scene.add_springs([[0, 19], [4, 15]], 50.0, 0.5)
    top, par, st = scene.build(gravity=(0, 0, 0))
    st = gs.particle_state(st.particles.x + 0.02 * rng.standard_normal(st.particles.x.shape), rng.standard_normal(st.particles.v.shape))
    par = replace_paths(par, {"cloth.tri_kd": par.cloth.tri_kd + 1.0, "cloth.bend_kd": par.cloth.bend_kd + 0.01})
    traj = gs.simulate(top, par, st, frames=100, substeps=8, frame_dt=1e-3)
    p = jnp.sum(par.particles.mass[:, None] * traj.particles.v, axis=1)
    np.testing.assert_allclose(p, np.broadcast_to(p[0], p.shape), atol=1e-9)
    assert float(jnp.abs(traj.particles.x[-1] - traj.particles.x[0]).max()) > 1e-3  # it did move


def test_undamped_membrane_energy_stays_bounded(x64):
    scene, rng = _free_cloth(bend_ke=0.0)
    top, par, st = scene.build(gravity=(0, 0, 0))
    assert top.cloth.bend_edges.shape[0] == 0
    st = gs.particle_state(st.particles.x * 1.15 + 0.01 * rng.standard_normal(st.particles.x.shape), jnp.zeros_like(st.particles.v))
    traj = gs.simulate(top, par, st, frames=400, substeps=4, frame_dt=1e-3)
    total = lambda x, v: membrane_energy(top, par, x) + kinetic_energy(par, gs.particle_state(x, v))  # noqa: E731
    energy = jax.jit(jax.vmap(total))(traj.particles.x, traj.particles.v)
    drift = jnp.abs(energy - energy[0]) / energy[0]
    assert float(energy[0]) > 0.1
    assert float(drift.max()) < 0.02
    assert float(jnp.abs(traj.particles.v).max()) > 0.1  # it oscillated


def test_pinned_particles_do_not_move(x64):
    scene = gs.cloth_grid(3, 3, 0.1, 0.1, vel=(0.5, 0.0, 0.0), fix_top=True)
    top, par, st = scene.build()
    traj = gs.simulate(top, par, st, frames=30, substeps=32)
    pinned = np.asarray(top.particles.pinned)
    assert pinned.sum() == 4
    np.testing.assert_array_equal(np.asarray(traj.particles.x[:, pinned]), np.broadcast_to(st.particles.x[pinned], (31, 4, 3)))
    assert float(jnp.abs(traj.particles.x[-1, ~pinned] - st.particles.x[~pinned]).max()) > 0.02


def test_pinned_particles_follow_a_kinematic_path(x64):
    top, par, st = gs.cloth_grid(2, 2, 0.1, 0.1, fix_top=True).build()
    push = jnp.where(top.particles.pinned[:, None], jnp.array([0.3, 0.0, 0.0]), 0.0)
    traj = gs.simulate(top, par, st, frames=10, substeps=4, frame_dt=0.01,
                       control=gs.Control(particles=gs.physics.ParticleControl(pinned_velocity=push)))
    np.testing.assert_allclose(traj.particles.x[-1, top.particles.pinned, 0] - st.particles.x[top.particles.pinned, 0], 0.3 * 0.1, rtol=1e-9)


def test_cloth_dropped_on_ground_comes_to_rest_above_it():
    scene = gs.cloth_grid(4, 4, 0.1, 0.1, pos=(-0.2, 0.3, 0.2), rot=gs.quat_from_axis_angle((1, 0, 0), -np.pi / 2),
                          mass=0.02, tri_ke=500.0, tri_ka=500.0, tri_kd=5.0, bend_ke=0.1)
    top, par, st = scene.build(ground=True, contact_ke=2e3, contact_kd=10.0, contact_kf=10.0, contact_mu=0.5,
                               particle_radius=0.01)
    traj = jax.jit(lambda p, s: gs.simulate(top, p, s, frames=120, substeps=32))(par, st)
    final = gs.check_finite(traj)
    y = np.asarray(final.particles.x[-1, :, 1])
    sag = 0.02 * 9.81 / 2e3  # penalty contact rests at a penetration of m g / ke
    assert y.min() > 0.01 - 2 * sag and y.max() < 0.01 + 2 * sag
    assert float(jnp.abs(final.particles.v[-1]).max()) < 0.02


@pytest.mark.parametrize("v0", [1.0, 2.0])
def test_friction_stops_a_sliding_particle_at_the_coulomb_distance(x64, v0):
    mu, g, m = 0.4, 9.81, 0.5
    ke = 1e4
    y0 = 0.01 - m * g / ke  # start at the resting penetration
    top, par, st = gs.particles([[0.0, y0, 0.0]], v=[[v0, 0.0, 0.0]], mass=m).build(
        ground=True, contact_ke=ke, contact_kd=50.0, contact_kf=1e3, contact_mu=mu, particle_radius=0.01,
        gravity=(0, -g, 0))
    traj = gs.simulate(top, par, st, frames=200, substeps=20, frame_dt=1 / 100)
    distance = float(traj.particles.x[-1, 0, 0])
    expected = v0**2 / (2 * mu * g)
    assert abs(float(traj.particles.v[-1, 0, 0])) < 1e-3
    assert abs(distance - expected) / expected < 0.05


def test_friction_is_isotropic(x64):
    """The same speed in any tangential direction gives the same stopping distance."""
    top, par, st = gs.particles([[0.0, 0.0095, 0.0]] * 2, v=[[1.0, 0.0, 0.0], [0.6, 0.0, 0.8]], mass=0.5).build(
        ground=True, contact_ke=1e4, contact_mu=0.4)
    traj = gs.simulate(top, par, st, frames=60, substeps=20, frame_dt=1 / 100)
    d = jnp.linalg.norm((traj.particles.x[-1] - traj.particles.x[0])[:, [0, 2]], axis=-1)
    np.testing.assert_allclose(d[0], d[1], rtol=1e-9)
    assert float(d[0]) > 0.05
