"""Particles against rigid bodies (`physics.particle_body`): momentum exchanged exactly, a cloth resting on a free
box that rests on the ground at the penalty sags, a float64 gradient through the contact against central
differences, and the build option."""

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.geometry.primitives import box_mesh
from gradsim_jax.physics import SemiImplicitEuler
from gradsim_jax.physics.quaternion import quat_from_axis_angle, quat_to_matrix

G = 9.81


def _box(mass=2.0, half=(0.3, 0.2, 0.3), pos=(0.0, 0.0, 0.0), **kw):
    kw = {"contact_ke": 1e4, "contact_kd": 10.0, "contact_kf": 10.0, "contact_mu": 0.5, **kw}
    return gs.rigid_body(*box_mesh(*half), mass=mass, pos=pos, **kw)


@pytest.mark.parametrize("implicit", [pytest.param(False, marks=pytest.mark.slow), True])  # suite time
def test_particles_and_a_body_exchange_momentum_exactly(x64, implicit):
    """No gravity: particles thrown at a turned free box bounce off it. The particles' and the box's linear
    momenta sum to the start's to rounding, and the angular momenta about the origin (the box's spin included) to
    the explicit gyroscopic term's O(dt) drift."""
    q = np.asarray(quat_from_axis_angle(jnp.array([0.3, 1.0, 0.2]), 0.5))
    box = _box(rot=q)
    x = np.array([[-0.6, 0.05, 0.02], [-0.6, -0.1, 0.1], [0.1, 0.6, -0.05]])
    v = np.array([[2.0, 0.0, 0.0], [1.5, 0.3, 0.0], [0.0, -2.0, 0.4]])
    topology, params, state = gs.combine(gs.particles(x, v, mass=0.1), box).build(
        gravity=(0.0, 0.0, 0.0), contact_kd=10.0, contact_kf=10.0, dtype=jnp.float64)
    assert topology.rigid.particles

    def momenta(s):
        m, M = params.particles.mass, params.rigid.mass
        linear = (m[:, None] * s.particles.v).sum(0) + (M[:, None] * s.rigid.v).sum(0)
        inertia = jnp.einsum("bij,bjk,blk->bil", quat_to_matrix(s.rigid.q), params.rigid.gyration,
                             quat_to_matrix(s.rigid.q)) * M[:, None, None]
        spin = jnp.einsum("bij,bj->bi", inertia, s.rigid.w).sum(0)
        angular = (jnp.cross(s.particles.x, m[:, None] * s.particles.v).sum(0)
                   + jnp.cross(s.rigid.x, M[:, None] * s.rigid.v).sum(0) + spin)
        return linear, angular

    traj = gs.simulate(topology, params, state, frames=20, substeps=40, frame_dt=0.02,
                       integrator=SemiImplicitEuler(implicit_contact=implicit))
    last = jax.tree.map(lambda a: a[-1], traj)
    p0, l0 = momenta(state)
    p1, l1 = momenta(last)
    assert float(jnp.linalg.norm(last.rigid.v)) > 0.05  # the box was struck
    assert float(jnp.abs(last.particles.v[0, 0] - 2.0)) > 0.5  # and the first particle bounced
    np.testing.assert_allclose(np.asarray(p1), np.asarray(p0), atol=1e-12)
    dt = 0.02 / 40
    assert float(jnp.linalg.norm(l1 - l0)) < 50 * dt * float(jnp.linalg.norm(l0))


def test_a_cloth_rests_on_a_free_box_resting_on_the_ground():
    """A 5 x 5 cloth (0.05 kg) dropped onto a 2 kg box on the ground: after 1.5 s every particle rests on the box's
    top at the particle radius less the pair's penalty sag, and the box carries the cloth's weight on its four
    ground corners."""
    box = _box(pos=(0.0, 0.2, 0.0), contact_kd=200.0)
    flat = np.asarray(gs.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), -np.pi / 2))
    cloth = gs.cloth_grid(4, 4, 0.1, 0.1, pos=(-0.2, 0.45, 0.2), rot=flat, mass=0.002, tri_ke=50.0, tri_ka=50.0,
                          tri_kd=0.5, bend_ke=0.0)
    ke_particles, radius = 1e3, 0.01
    topology, params, state = gs.combine(cloth, box).build(ground=True, contact_ke=ke_particles, contact_kd=5.0,
                                                           particle_radius=radius)
    traj = gs.simulate(topology, params, state, frames=45, substeps=64, frame_dt=1.0 / 30.0)
    x = np.asarray(traj.particles.x[-1])
    m = np.asarray(params.particles.mass)
    box_y = float(traj.rigid.x[-1, 0, 1])
    total = 2.0 + m.sum()
    np.testing.assert_allclose(box_y, 0.2 - total * G / (4 * 1e4), atol=2e-6)  # float32 near 0.2: 1.5e-8
    ke_pair = 0.5 * (ke_particles + 1e4)
    expected = box_y + 0.2 + radius - m * G / ke_pair
    np.testing.assert_allclose(x[:, 1], expected, atol=2e-6)


def test_the_gradient_through_particle_body_contact_matches_central_differences(x64):
    """d(final x of particles sliding over a box with friction, and of the box) / d(the box's contact_mu and the
    particles' initial speed), float64 against central differences (the contact set fixed over the runs)."""
    box = _box(mass=1.0, pos=(0.0, 0.2, 0.0))
    x = np.array([[-0.2, 0.41, 0.0], [-0.1, 0.41, 0.1]])
    topology, params, state = gs.combine(gs.particles(x, (1.0, 0.0, 0.0), mass=0.05), box).build(
        ground=True, contact_ke=1e4, contact_kf=20.0, particle_radius=0.01, dtype=jnp.float64)

    def loss(z):
        p = dataclasses.replace(params, rigid=dataclasses.replace(params.rigid,
                                                                   contact_mu=params.rigid.contact_mu * 0 + z[0]))
        s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, v=state.particles.v * z[1]))
        traj = gs.simulate(topology, p, s, frames=6, substeps=40, frame_dt=1.0 / 30.0)
        return jnp.sum(traj.particles.x[-1, :, 0]) + 10.0 * traj.rigid.x[-1, 0, 0]

    z = jnp.array([0.4, 1.0])
    f = jax.jit(loss)
    grad = np.asarray(jax.jit(jax.grad(loss))(z))
    h = 1e-6
    fd = np.array([(f(z.at[i].add(h)) - f(z.at[i].add(-h))) / (2 * h) for i in range(2)])
    assert np.all(np.abs(fd) > 1e-3)  # both reach the loss: friction drags the box, the speed the particles
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


def test_the_build_option():
    box = _box(pos=(0.0, 0.2, 0.0))
    p = gs.particles(np.array([[0.0, 0.5, 0.0]]), mass=0.1)
    assert not gs.combine(p, box).build(particle_body_contact=False)[0].rigid.particles
    assert not box.build()[0].rigid.particles  # no particles
    v, f = box_mesh(0.3, 0.2, 0.3)
    dented = v.copy()
    dented[np.argmax(v.sum(1))] *= 0.5  # a corner pushed in: not convex
    bad = gs.rigid_body(dented, f, mass=1.0)
    with pytest.raises(ValueError, match="rigid body 0 cannot be a solid for the particles: its hull is not convex"):
        gs.combine(p, bad).build(particle_body_contact=True)
    with pytest.warns(UserWarning, match="particles will pass through the bodies"):
        assert not gs.combine(p, bad).build()[0].rigid.particles
    topology, params, state = gs.combine(gs.particles(np.array([[0.0, 0.3, 0.0]]), mass=0.1), box).build()
    with pytest.warns(gs.physics.ContactWarning, match="particle 0 starts inside rigid body 0 .0.11 m deep"):
        gs.simulate(topology, params, state, frames=1, substeps=2)
    with pytest.raises(TypeError, match="particle_body_contact"):
        gs.combine(p, box).build(particle_body_contact="yes")


def test_gradients_stay_finite_at_and_near_contact():
    """A particle exactly at the contact distance (and 1e-7 m either side, and inside) of a turned box's face, edge
    and corner, moving along the normal, across it or not at all: every gradient of one step (by the particle's
    state, the body's state and the coefficients) is finite, with the exact onset and a smooth one."""
    q = np.asarray(quat_from_axis_angle(jnp.array([0.2, 1.0, 0.1]), 0.3))
    rotation = np.asarray(quat_to_matrix(jnp.asarray(q)))
    for smoothing in (0.0, 1e-3):
        topology, params, state = gs.combine(gs.particles(np.zeros((1, 3)), mass=0.05), _box(rot=q)).build(
            contact_smoothing=smoothing)

        def outcome(x, v, rigid, p):
            s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, x=x, v=v), rigid=rigid)
            s = SemiImplicitEuler().step(topology, p, s, None, 0.0, 1e-3)
            return (jnp.sum(s.particles.x ** 2) + jnp.sum(s.particles.v ** 2) + jnp.sum(s.rigid.x ** 2)
                    + jnp.sum(s.rigid.w ** 2))

        grad = jax.jit(jax.grad(outcome, argnums=(0, 1, 2, 3)))
        for point, outward in (([0.3, 0.05, -0.1], [1.0, 0.0, 0.0]), ([0.3, 0.2, 0.05], [1.0, 1.0, 0.0]),
                               ([0.3, 0.2, 0.3], [1.0, 1.0, 1.0])):  # on a face, an edge, a corner (body frame)
            surface = np.asarray(point)
            normal = rotation @ (np.asarray(outward) / np.linalg.norm(outward))
            for gap in (0.0, 1e-7, -1e-7, -1e-3):
                x = jnp.asarray((rotation @ surface + (0.01 + gap) * normal)[None], jnp.float32)
                for v in (0.0 * normal, -normal, np.cross(normal, [0.0, 1.0, 0.0])):
                    leaves = jax.tree_util.tree_leaves(grad(x, jnp.asarray(v[None], jnp.float32), state.rigid, params))
                    assert all(np.all(np.isfinite(np.asarray(a))) for a in leaves), (smoothing, point, gap, v)


def test_a_cloth_dropped_on_a_free_box_follows_warp():
    """tools/warp_particle_body.py: a 6 x 6 cloth dropped 5 cm onto a free 1 kg box resting on the ground, off its
    centre, 1.5 s at 64 substeps a frame (2880 steps), viscous friction everywhere (the one law both engines
    share): every particle and the box within the issue's 1e-3 m of Warp's at every frame (measured 5.6e-4 and
    1.0e-4 m)."""
    data_dir = Path(__file__).resolve().parents[1] / "data"
    c = json.loads((data_dir / "warp_particle_body.json").read_text())["scene"]
    data = np.load(data_dir / "warp_particle_body.npz")
    flat = np.asarray(gs.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), -np.pi / 2))
    cloth = gs.cloth_grid(c["dim"], c["dim"], c["cell"], c["cell"], pos=c["cloth_pos"], rot=flat, mass=c["mass"],
                          tri_ke=c["tri_ke"], tri_ka=c["tri_ka"], tri_kd=c["tri_kd"], bend_ke=0.0, bend_kd=0.0)
    coefficients = dict(contact_ke=c["ke"], contact_kd=c["kd"], contact_kf=c["kf"], contact_mu=c["mu"])
    box = gs.rigid_body(*box_mesh(*c["box_half"]), mass=c["box_mass"], pos=c["box_pos"], **coefficients)
    topology, params, state = gs.combine(cloth, box).build(ground=True, gravity=(0.0, c["gravity"], 0.0),
                                                           particle_radius=c["particle_radius"], **coefficients)
    traj = gs.simulate(topology, params, state, frames=c["frames"], substeps=c["substeps"], frame_dt=1.0 / c["fps"],
                       integrator=SemiImplicitEuler(implicit_contact=False))
    x, box_x = np.asarray(traj.particles.x), np.asarray(traj.rigid.x)[:, 0]
    reference = data["particles"]
    assert reference[-1, :, 1].min() > 0.2 and reference[-1, :, 1].max() < 0.215  # it lies on the box's top
    assert np.abs(x - reference).max() < 1e-3
    assert np.abs(box_x - data["box"][:, :3]).max() < 1e-3
