"""Particle-particle contact through the hashed grid (`physics.selfcontact`): a head-on bounce conserving momentum
(and, undamped, energy to the step's error), a cloth landing on another instead of passing through it, pairs
close at rest left out, the overflow flag, and float64 gradients against finite differences."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry import cloth_grid, combine, particles, quat_from_axis_angle
from gradsim_jax.physics import self_contact_overflow, simulate
from gradsim_jax.physics.contact import ContactWarning
from gradsim_jax.physics.selfcontact import self_contact_forces


def _pair(v=0.5, kd=0.0, dtype=None):
    """Two 10 g particles 10 cm apart flying at each other (contact distance 2 cm, ke 1e3), no gravity."""
    p = particles(np.array([[0.0, 0.0, 0.0], [0.1, 0.004, 0.0]]), v=np.array([[v, 0.0, 0.0], [-v, 0.0, 0.0]]),
                  mass=0.01)
    return p.build(gravity=(0.0, 0.0, 0.0), particle_radius=0.01, self_contact=True, self_contact_ke=1e3,
                   self_contact_kd=kd, dtype=dtype)


def test_a_head_on_bounce_conserves_momentum_and_undamped_energy(x64):
    top, par, s0 = _pair(dtype=jnp.float64)
    dt, substeps = 1.0 / 60.0 / 32, 32
    traj = simulate(top, par, s0, frames=20, frame_dt=1.0 / 60.0, substeps=substeps)
    v = np.asarray(traj.particles.v)
    np.testing.assert_allclose(v.sum(axis=1), 0.0, atol=1e-12)  # equal and opposite
    assert v[-1, 0, 0] < -0.4 and v[-1, 1, 0] > 0.4  # bounced
    e0, e1 = (0.5 * 0.01 * np.sum(v[k] ** 2) for k in (0, -1))
    omega = np.sqrt(2 * 1e3 / 0.01)  # the pair's contact spring on the reduced mass
    assert abs(e1 - e0) <= dt * omega * e0
    gap = np.linalg.norm(np.asarray(traj.particles.x[:, 0] - traj.particles.x[:, 1]), axis=1)
    # The deepest compression: the relative kinetic energy mu v_rel^2 / 2 (mu = m / 2, v_rel = 1 m/s) stored in the
    # spring ke delta^2 / 2, so delta <= sqrt(mu v_rel^2 / ke) (equal only head-on; 1 % for the step)
    assert gap.min() > 0.02 - 1.01 * np.sqrt(0.005 * 1.0 ** 2 / 1e3)


def test_a_cloth_lands_on_another_instead_of_passing_through():
    """Two 6 x 6 sheets of 5 cm cells, particle radius 3 cm (contact distance 6 cm > the cells: no gaps), the upper
    dropped on the lower lying on the ground: with self-contact it rests above, without it sinks to the ground;
    the grid never overflows."""
    flat = quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2)
    heights = {}
    for on in (False, True):
        a = cloth_grid(6, 6, 0.05, 0.05, pos=(-0.15, 0.03, -0.15), rot=flat, mass=0.01, tri_ke=200, tri_ka=200,
                       tri_kd=0.5, bend_ke=0.01)
        b = cloth_grid(6, 6, 0.05, 0.05, pos=(-0.13, 0.15, -0.13), rot=flat, mass=0.01, tri_ke=200, tri_ka=200,
                       tri_kd=0.5, bend_ke=0.01)
        top, par, s0 = combine(a, b).build(ground=True, contact_ke=1e3, contact_kd=10.0, contact_kf=10.0,
                                           particle_radius=0.03, self_contact=on)
        traj = simulate(top, par, s0, frames=20, frame_dt=1 / 30, substeps=32)
        heights[on] = float(np.asarray(traj.particles.x[-1, 49:, 1]).mean())
        if on:
            assert not bool(jax.jit(jax.vmap(lambda x: self_contact_overflow(top, par, x)))(traj.particles.x).any())
    assert abs(heights[False] - 0.03) < 1e-3
    assert heights[True] > 0.03 + 0.03  # at least a particle radius above the lower sheet's centres


def test_pairs_close_at_rest_are_left_out_and_the_overflow_flag_tells_a_full_cell():
    p = particles(np.array([[0.0, 0.0, 0.0], [0.015, 0.0, 0.0], [0.005, 0.005, 0.0]]), mass=0.01)
    top, par, s0 = p.build(particle_radius=0.01, self_contact=True)
    forces = jax.jit(lambda par: self_contact_forces(top, par, s0.particles.x, s0.particles.v))  # compiled once
    f = forces(par)
    assert float(jnp.abs(f).max()) == 0.0  # all three are closer than 2 cm at rest: neighbours, not contacts
    moved = par.cloth.rest_x.at[1].set(jnp.array([1.0, 0.0, 0.0]))  # now 1 is a stranger to 0 and 2
    f = forces(dataclasses.replace(par, cloth=dataclasses.replace(par.cloth, rest_x=moved)))
    assert float(f[1, 0]) > 0.0 and float(f[0, 0] + f[2, 0]) < 0.0
    np.testing.assert_allclose(np.asarray(f.sum(0)), 0.0, atol=1e-6)
    assert not bool(self_contact_overflow(top, par, s0.particles.x))  # three in one cell, capacity 8
    small = dataclasses.replace(top, self_contact=dataclasses.replace(top.self_contact, capacity=2))
    assert bool(self_contact_overflow(small, par, s0.particles.x))
    with pytest.warns(ContactWarning, match="a grid cell holds more than 2 particles"):
        simulate(small, par, s0, frames=1, substeps=1)


def test_gradients_match_finite_differences(x64):
    top, par, s0 = _pair(kd=0.5, dtype=jnp.float64)

    def final(ke, v):
        p = dataclasses.replace(par, self_contact=dataclasses.replace(par.self_contact, ke=ke))
        s = dataclasses.replace(s0, particles=dataclasses.replace(s0.particles, v=s0.particles.v * v))
        x = simulate(top, p, s, frames=8, frame_dt=1 / 60, substeps=32).particles.x[-1]
        return jnp.sum(x * jnp.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]]))

    args = (par.self_contact.ke, jnp.float64(1.0))
    grads = jax.jit(jax.grad(final, argnums=(0, 1)))(*args)
    f = jax.jit(final)
    for i, g in enumerate(grads):
        h = 1e-6 * max(1.0, abs(float(args[i])))
        up, down = list(args), list(args)
        up[i], down[i] = args[i] + h, args[i] - h
        numeric = (f(*up) - f(*down)) / (2 * h)
        np.testing.assert_allclose(float(g), float(numeric), rtol=1e-5, atol=1e-10)


def test_gradients_are_finite_when_particles_coincide_touch_or_overlap(x64):
    """At the same point (no normal), exactly at the contact distance, just inside it, and deep in it."""
    p = particles(np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), mass=0.01)
    top, par, s0 = p.build(particle_radius=0.01, self_contact=True, dtype=jnp.float64)

    def energy(x, ke):
        q = dataclasses.replace(par, self_contact=dataclasses.replace(par.self_contact, ke=ke))
        return jnp.sum(self_contact_forces(top, q, x, jnp.array([[0.1, 0.0, 0.0], [-0.1, 0.0, 0.0]])) ** 2)

    grad = jax.jit(jax.grad(energy, argnums=(0, 1)))
    for distance in (0.0, 0.02, 0.02 - 1e-9, 0.01):
        gx, gke = grad(jnp.array([[0.0, 0.0, 0.0], [distance, 0.0, 0.0]]), par.self_contact.ke)
        assert np.all(np.isfinite(np.asarray(gx))) and np.isfinite(float(gke)), distance
