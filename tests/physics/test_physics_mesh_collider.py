"""Triangle-mesh colliders (`physics.mesh_collider`): a box mesh's signed distance is the exact box's, a sphere
mesh's lies within its chord error of the sphere's, the winding-number inside test holds for a non-convex mesh,
a particle rests on a mesh box as on a box, gradients stay finite on vertices, edges and faces, the mesh is drawn,
and open meshes and misplaced arguments are refused by name."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry import collider, combine, particles
from gradsim_jax.geometry.primitives import box_mesh, sphere_mesh
from gradsim_jax.physics import collider_distance, simulate
from gradsim_jax.physics.colliders import collider_contact, collider_vertices, local_distance
from gradsim_jax.physics.quaternion import quat_from_axis_angle, quat_rotate


def _built(piece, dtype=jnp.float64):
    return combine(particles(np.zeros((1, 3)), mass=1.0), piece).build(dtype=dtype)


def test_a_box_mesh_measures_exactly_as_a_box_posed_and_scaled():
    with jax.enable_x64(True):
        v, f = box_mesh(0.25, 0.15, 0.4)  # scaled by 2: half extents 0.5, 0.3, 0.8
        q = np.asarray(quat_from_axis_angle(jnp.array([0.3, 1.0, -0.2]), jnp.float64(0.9)))
        top, par, _ = _built(collider("mesh", (0.1, 0.2, 0.3), rotation=q, size=(2.0, 2.0, 2.0), vertices=v, faces=f))
        x = np.random.default_rng(0).uniform(-1.5, 1.5, (400, 3))
        d, n = jax.jit(lambda x: collider_distance(top.colliders, par.colliders, x))(jnp.asarray(x))
        local = quat_rotate(jnp.asarray(q * [1, -1, -1, -1]), jnp.asarray(x - [0.1, 0.2, 0.3]))
        dr, nr = local_distance("box", local, jnp.asarray([0.5, 0.3, 0.8]))
        np.testing.assert_allclose(np.asarray(d[:, 0]), np.asarray(dr), atol=1e-12)
        np.testing.assert_allclose(np.asarray(n[:, 0]), np.asarray(quat_rotate(jnp.asarray(q), nr)), atol=1e-9)
        grad = jax.jit(jax.grad(lambda x: collider_distance(top.colliders, par.colliders, x)[0].sum()))(jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(grad), np.asarray(n[:, 0]), atol=1e-9)  # the normal is the gradient


def test_a_sphere_mesh_is_within_its_chord_error_of_the_sphere():
    """An icosphere inscribed in the unit sphere lies between the sphere and the sphere shrunk by its largest
    face-plane gap g = 1 - min over faces of the plane's distance from the centre: |d_mesh - d_sphere| <= g."""
    with jax.enable_x64(True):
        v, f = sphere_mesh(1.0, 2)
        v = v / np.linalg.norm(v, axis=1, keepdims=True)  # on the unit sphere
        tri = v[f]
        normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        gap = 1.0 - np.min(np.abs(np.sum(normal / np.linalg.norm(normal, axis=1, keepdims=True) * tri[:, 0], axis=1)))
        top, par, _ = _built(collider("mesh", vertices=v, faces=f))
        x = np.random.default_rng(1).normal(size=(300, 3)) * 0.8
        d, _ = jax.jit(lambda x: collider_distance(top.colliders, par.colliders, x))(jnp.asarray(x))
        exact = np.linalg.norm(x, axis=1) - 1.0
        assert 0.0 < gap < 0.05
        assert np.all(np.abs(np.asarray(d[:, 0]) - exact) <= gap + 1e-12)
        inside = np.linalg.norm(x, axis=1) < 1.0 - gap
        outside = np.linalg.norm(x, axis=1) > 1.0
        assert np.all(np.asarray(d[inside, 0]) < 0) and np.all(np.asarray(d[outside, 0]) > 0)


def test_the_winding_number_finds_the_inside_of_a_non_convex_mesh():
    """A cube with one corner pushed in to its centre: points in the dent are outside, points under it inside."""
    with jax.enable_x64(True):
        v, f = box_mesh(0.5, 0.5, 0.5)
        corner = int(np.argmax(v.sum(1)))  # (+0.5, +0.5, +0.5)
        dented = v.copy()
        dented[corner] = 0.0
        top, par, _ = _built(collider("mesh", vertices=dented, faces=f))
        in_dent = np.array([[0.4, 0.4, 0.4], [0.3, 0.45, 0.45]])
        under = np.array([[-0.2, -0.2, -0.2], [0.4, -0.4, 0.1]])
        d, _ = jax.jit(lambda x: collider_distance(top.colliders, par.colliders, x))(
            jnp.asarray(np.concatenate([in_dent, under])))
        assert np.all(np.asarray(d[:2, 0]) > 0) and np.all(np.asarray(d[2:, 0]) < 0)


def test_a_particle_rests_on_a_mesh_box_as_on_a_box():
    v, f = box_mesh(0.5, 0.1, 0.5)
    runs = []
    for piece in (collider("box", (0.0, 0.0, 0.0), half_extents=(0.5, 0.1, 0.5), ke=1e3, kd=10.0),
                  collider("mesh", (0.0, 0.0, 0.0), vertices=v, faces=f, ke=1e3, kd=10.0)):
        top, par, s0 = combine(particles(np.array([[0.1, 0.2, -0.1]]), mass=0.05), piece).build()
        runs.append(np.asarray(simulate(top, par, s0, frames=20, frame_dt=1 / 30, substeps=16).particles.x))
    # float32: the two distances agree to a few float32 epsilons per step, over 320 steps of a damped bounce
    np.testing.assert_allclose(runs[1], runs[0], atol=1e-5)
    assert abs(runs[0][-1, 0, 1] - (0.1 + 0.01 - 0.05 * 9.81 / 1e3)) < 1e-3


def test_gradients_are_finite_on_the_surface_and_inside(x64):
    """On a vertex, an edge, a face (exactly at distance 0) and at the centre: one compiled gradient."""
    v, f = box_mesh(0.5, 0.5, 0.5)
    top, par, _ = _built(collider("mesh", vertices=v, faces=f, ke=1e3, kd=10.0, kf=10.0, mu=0.5))

    def force(x, mu):
        p = dataclasses.replace(par, colliders=dataclasses.replace(par.colliders, mu=mu))
        return jnp.sum(collider_contact(top, p, x, jnp.asarray([[0.1, -0.2, 0.3]])) ** 2)

    grad = jax.jit(jax.grad(force, argnums=(0, 1)))
    for where in ([0.5, 0.5, 0.5], [0.5, 0.5, 0.0], [0.5, 0.1, 0.2], [0.0, 0.0, 0.0]):
        gx, gmu = grad(jnp.asarray([where], jnp.float64), par.colliders.mu)
        assert np.all(np.isfinite(np.asarray(gx))) and np.all(np.isfinite(np.asarray(gmu))), where


def test_the_mesh_is_drawn_where_it_is():
    v, f = box_mesh(0.2, 0.2, 0.2)
    top, par, _ = _built(collider("mesh", (1.0, 0.0, 0.0), vertices=v, faces=f), dtype=jnp.float32)
    drawn = np.asarray(collider_vertices(top.colliders, par.colliders))
    np.testing.assert_allclose(drawn, v + [1.0, 0.0, 0.0], atol=1e-6)


def test_open_meshes_and_misplaced_arguments_are_refused():
    v, f = box_mesh(0.2, 0.2, 0.2)
    with pytest.raises(ValueError, match="mesh collider"):
        collider("mesh", vertices=v, faces=f[:-1])
    with pytest.raises(ValueError, match="needs vertices"):
        collider("mesh")
    with pytest.raises(ValueError, match="takes no vertices"):
        collider("sphere", radius=0.1, vertices=v, faces=f)
