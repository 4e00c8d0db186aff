"""Blender's collision response (`physics.impulse_contact`) and Blender's angular bending: the closest pair of two
triangles, one contact's impulses against the formulas, a cloth coming to rest on the floor and on a UV-tessellated
ball at the collision distance, finite derivatives, the UV sphere, and the refusals."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.geometry import mesh_edges
from gradsim_jax.physics import ImplicitEuler, ImpulseContact
from gradsim_jax.physics.hinges import angular_bending_forces
from gradsim_jax.physics.collider_templates import uv_sphere
from gradsim_jax.physics.impulse_contact import impulse_collide, triangle_pair_contact


def test_uv_sphere_is_blenders_closed_outward_tessellation():
    v, f = uv_sphere(8, 4)
    assert v.shape == (2 + 8 * 3, 3) and f.shape == (2 * 8 * 3, 3)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(v[0], [0.0, 0.0, 1.0], atol=1e-12)  # the north pole first, on z
    np.testing.assert_allclose(v[1], [np.sin(np.pi / 4), 0.0, np.cos(np.pi / 4)], atol=1e-12)  # meridian 0 on +x
    corner = v[f]
    normal = np.cross(corner[:, 1] - corner[:, 0], corner[:, 2] - corner[:, 0])
    assert np.all(np.sum(normal * corner.mean(1), -1) > 0)  # every face outward
    edges = {tuple(sorted(e)) for t in f for e in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0]))}
    assert len(v) - len(edges) + len(f) == 2  # closed, genus 0


def _flat(x=0.0, y=0.0, z=0.0, size=1.0):
    return jnp.array([[x, y, z], [x + size, y, z], [x, y + size, z]])


def test_triangle_pair_contact_finds_the_gap_the_depth_and_culls_behind():
    B = _flat(-1.0, -1.0, 0.0, 3.0)[None]  # a large floor triangle, normal +z
    n, p = jnp.array([[0.0, 0.0, 1.0]]), jnp.array([[0.0, 0.0, 0.0]])
    tilted = jnp.array([[[0.0, 0.0, 0.02], [0.3, 0.0, 0.05], [0.0, 0.3, 0.08]]])
    d, pa, direction = triangle_pair_contact(tilted, B, n, p)
    np.testing.assert_allclose(d, [0.02], atol=1e-7)  # the lowest vertex, straight above
    np.testing.assert_allclose(pa, tilted[:, 0], atol=1e-7)
    np.testing.assert_allclose(direction / jnp.linalg.norm(direction), n, atol=1e-6)
    sunk = tilted - jnp.array([0.0, 0.0, 0.05])  # its first vertex 3 cm below: behind, distance 0
    d, pa, direction = triangle_pair_contact(sunk, B, n, p)
    np.testing.assert_allclose(d, [0.0], atol=0)
    np.testing.assert_allclose(pa, sunk[:, 0], atol=1e-7)  # the deepest point, pushed out along the normal
    np.testing.assert_allclose(direction, [[0.0, 0.0, 0.03]], atol=1e-6)
    beside = jnp.array([[[3.0, 3.0, -0.5], [3.2, 3.0, -0.5], [3.0, 3.2, -0.5]]])  # below the floor's plane, off it
    d, _, _ = triangle_pair_contact(beside, B, n, p)
    assert float(d[0]) > 1.0  # no contact


def _one_triangle(height, velocity, *, ground_size=0.0, mu=0.3, radius=0.035):
    # (away from the floor square's diagonal, which a straddling triangle meets twice)
    scene = gs.cloth_mesh([[1.0, 0.0, height], [1.1, 0.0, height + 0.01], [1.0, 0.1, height + 0.02]], [[0, 1, 2]],
                          tri_ke=0.0, tri_ka=0.0, tri_kd=0.0, bend_ke=0.0, bend_kd=0.0)
    topology, params, state = scene.build(gravity=(0.0, 0.0, -9.81), ground=True, ground_normal=(0.0, 0.0, 1.0),
                                          particle_radius=radius, contact_mu=mu)
    contact = ImpulseContact(frame_time=1.0 / 30.0, rounds=1, passes=1, ground_size=ground_size)
    return contact, topology, params, jnp.asarray(state.particles.x), jnp.tile(jnp.asarray(velocity), (3, 1))


@pytest.mark.parametrize("ground_size", [0.0, 8.0])
def test_one_contact_takes_blenders_stop_friction_and_repulsion(ground_size, x64):
    dt, h, mu, radius = 1.0 / 150.0, 0.02, 0.3, 0.035
    velocity = np.array([0.4, 0.0, -0.9])  # approaching the floor, sliding along x
    contact, topology, params, x, v = _one_triangle(h, velocity, ground_size=ground_size, mu=mu, radius=radius)
    out = np.asarray(impulse_collide(contact, topology, params, x, v, jnp.ones((3, 1)), dt))
    # The contact: vertex 0 (the lowest, weight 1) at distance h + tv_z, n = +z (the step moves it first).
    tv = velocity * dt
    dist = h + tv[2]
    T = (1.0 / 30.0) / dt
    d = radius * 8.0 / 9.0 - dist
    un = -tv[2]  # the floor's displacement (0) less the vertex's, along n
    stop = un / 1.5
    slide = min(mu * un, abs(tv[0])) / 1.5  # against the sliding
    r = max(stop, min(d / T, 0.1 * d * T - un, 5.0 * stop)) / 1.5
    assert un < 0.1 * d * T  # the repulsion is on
    expect = np.tile(tv, (3, 1))
    expect[0] += [-slide, 0.0, stop]  # weighted by the barycentric weights (1, 0, 0)
    expect[:, 2] += r  # the repulsion to all three, unweighted
    np.testing.assert_allclose(out * dt, expect, rtol=1e-12, atol=1e-15)


def _cloth(n=4, height=0.3, *, ball=None, ground_size=0.0, bending=False, x0=-0.15, iterations=30):
    scene = gs.cloth_grid(n, n, 0.3 / n, 0.3 / n, pos=(x0, x0, height), mass=0.02, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0,
                          bend_ke=10.0 if bending else 0.0, bend_kd=0.5 if bending else 0.0)
    scene = scene.add_springs(mesh_edges(scene.triangles), 2.0e3, 2.0)
    if ball is not None:
        scene = gs.combine(scene, gs.collider("sphere", ball[0], radius=ball[1], mu=0.05, segments=(16, 8)))
    topology, params, state = scene.build(gravity=(0.0, 0.0, -9.81), ground=True, ground_normal=(0.0, 0.0, 1.0),
                                          particle_radius=0.035, contact_mu=0.5, damping=1.0,
                                          bending="angular" if bending else "dihedral")
    integrator = ImplicitEuler(iterations=iterations, contact=ImpulseContact(frame_time=1.0 / 30.0, ground_size=ground_size))
    return topology, params, state, integrator


@pytest.mark.parametrize("ground_size", [0.0, 8.0])
def test_a_dropped_cloth_comes_to_rest_at_blenders_distance_above_the_floor(ground_size):
    topology, params, state, integrator = _cloth(ground_size=ground_size)
    traj = gs.simulate(topology, params, state, frame_dt=1.0 / 30.0, frames=40, substeps=5, integrator=integrator)
    z = np.asarray(traj.particles.x[..., 2])
    assert np.all(np.isfinite(z))
    assert z.min() > 0.0  # never through the floor
    # At rest it hovers in the repulsion zone: between the separation push's 8/9 and the full distance.
    assert 0.5 * 0.035 < z[-1].min() and z[-1].max() < 0.035 + 1e-3
    assert np.abs(np.asarray(traj.particles.v[-1])).max() < 0.05


def test_a_cloth_drapes_over_a_tessellated_ball_and_stays_outside_it():
    centre, radius = np.array([0.0, 0.0, 0.1]), 0.1
    topology, params, state, integrator = _cloth(height=0.3, ball=(centre, radius), ground_size=8.0, bending=True)
    traj = gs.simulate(topology, params, state, frame_dt=1.0 / 30.0, frames=20, substeps=5, integrator=integrator)
    x = np.asarray(traj.particles.x)
    assert np.all(np.isfinite(x))
    gap = np.linalg.norm(x - centre, axis=-1) - radius
    assert gap.min() > 0.0  # the facets lie inside the sphere: outside it, outside them
    # and it rests on it, within the collision distance of the facets, which lie up to r (1 - cos^2(pi / 16))
    # (a quad's middle, 3.8 mm at 16 x 8) inside the sphere
    assert gap[-1].min() < 0.035 + radius * (1.0 - np.cos(np.pi / 16) ** 2)


def test_the_response_is_differentiable_in_friction_and_the_balls_place(x64):
    topology, params, state, integrator = _cloth(n=3, height=0.23, ball=(np.array([0.02, 0.0, 0.1]), 0.1),
                                                 ground_size=8.0, iterations=60)  # 48 unknowns: CG exact

    @jax.jit
    def spread(mu, cx):
        colliders = dataclasses.replace(params.colliders, mu=jnp.full_like(params.colliders.mu, mu),
                                        position=params.colliders.position.at[0, 0].set(cx))
        p = dataclasses.replace(params, colliders=colliders)
        traj = gs.simulate(topology, p, state, frame_dt=1.0 / 30.0, frames=3, substeps=5, integrator=integrator)
        return jnp.mean(traj.particles.x[-1, :, 0])

    g = jax.jit(jax.grad(spread, argnums=(0, 1)))(0.05, 0.02)
    assert all(np.isfinite(float(a)) for a in g)
    # float64 central differences of the same rollout (the contact set does not change over such small steps)
    for i, h in ((0, 1e-6), (1, 1e-7)):
        a = [0.05, 0.02]
        b = list(a)
        a[i] += h
        b[i] -= h
        fd = (float(spread(*a)) - float(spread(*b))) / (2 * h)
        np.testing.assert_allclose(float(g[i]), fd, rtol=1e-4, atol=1e-9)


def test_angular_bending_restores_a_fold_with_no_net_force():
    scene = gs.cloth_grid(1, 1, 0.1, 0.1, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0, bend_ke=45.0, bend_kd=15.0)
    topology, params, state = scene.build(bending="angular")
    x = np.asarray(state.particles.x).copy()
    x0 = x.copy()
    edge = np.asarray(topology.cloth.bend_edges)[0]
    x[edge[0], 2] += 0.03  # fold one side up
    f = np.asarray(angular_bending_forces(topology, params, jnp.asarray(x), jnp.zeros_like(jnp.asarray(x))))
    np.testing.assert_allclose(f.sum(0), 0.0, atol=1e-6)
    assert f[edge[0], 2] < 0.0  # pushed back down
    flat = np.asarray(angular_bending_forces(topology, params, jnp.asarray(x0), jnp.zeros_like(jnp.asarray(x0))))
    np.testing.assert_allclose(flat, 0.0, atol=1e-7)
    # rigidly moved or rotated: no force (the rest angle is the shape's)
    c, s = np.cos(0.7), np.sin(0.7)
    turned = x0 @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T + 0.3
    moved = np.asarray(angular_bending_forces(topology, params, jnp.asarray(turned), jnp.zeros_like(jnp.asarray(x0))))
    np.testing.assert_allclose(moved, 0.0, atol=1e-6)


def test_impulse_contact_refusals():
    with pytest.raises(ValueError, match="frame_time"):
        ImpulseContact(frame_time=0.0)
    with pytest.raises(ValueError, match="ground_size"):
        ImpulseContact(ground_size=-1.0)
    with pytest.raises(ValueError, match="sphere"):
        gs.collider("box", (0.0, 0.0, 0.0), half_extents=(1.0, 1.0, 1.0), segments=(8, 4))
    with pytest.raises(ValueError, match="bending"):
        gs.cloth_grid(1, 1, 0.1, 0.1).build(bending="hinge")


def test_a_cloth_with_dihedral_bending_crumples_on_a_ball_under_the_implicit_step_without_blowing_up():
    # The dihedral bending's exact Jacobian made this step's system indefinite as the cloth folded over the ball:
    # 1.8e3 m/s two frames after touching it. Its definite part (`bending_system_jvp`) keeps it a cloth.
    cloth = gs.cloth_grid(6, 6, 0.05, 0.05, pos=(-0.15, -0.15, 0.5), mass=0.02, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0)
    assert cloth.bend_edges.shape[0] > 0  # the default bending
    cloth = cloth.add_springs(mesh_edges(cloth.triangles), 2.0e3, 2.0)
    ball = gs.collider("sphere", (0.0, 0.0, 0.1), radius=0.1, mu=0.05, segments=(32, 16))
    topology, params, state = gs.combine(cloth, ball).build(gravity=(0.0, 0.0, -9.81), particle_radius=0.035)
    step = ImplicitEuler(iterations=30, contact=ImpulseContact(frame_time=1.0 / 30.0))
    traj = gs.simulate(topology, params, state, frame_dt=1.0 / 30.0, frames=12, substeps=5, integrator=step)
    # it touches at frame 7 (the ball's top + 3.5 cm) and blew up by frame 9; free fall reaches 2.3 m/s by then
    assert np.abs(np.asarray(traj.particles.v)).max() < 4.0


def test_the_runtime_estimate_counts_the_contacts_pairs():
    topology, params, state, integrator = _cloth(ball=(np.array([0.0, 0.0, 0.1]), 0.1), ground_size=8.0)
    pairs = gs.physics.impulse_contact.contact_pair_rounds(integrator, topology)
    facets = 2 + 2 * 16 * 7  # the floor's square and the 16 x 8 UV ball
    assert pairs == 3 * (64 * 32 + 2 * facets)
    assert gs.physics.impulse_contact.contact_pair_rounds(ImplicitEuler(), topology) == 0
    plain = gs.physics.estimate_cost(topology, 10, 5, step_cost=integrator.step_cost())
    with_contact = gs.physics.estimate_cost(topology, 10, 5, step_cost=integrator.step_cost(), contact_pair_rounds=pairs)
    np.testing.assert_allclose(with_contact.seconds - plain.seconds, 50 * pairs * 2.3e-6, rtol=1e-9)
