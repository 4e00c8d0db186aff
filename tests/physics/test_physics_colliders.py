"""Static colliders (`physics.colliders`): exact signed distances and normals of each shape, contact forces that
stop particles at the surface, bounces that keep their energy without damping, float64 gradients against
finite differences, finite gradients where the normal is undefined, and bad input named."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.geometry import cloth_grid, collider, combine, particles
from gradsim_jax.geometry.primitives import box_mesh
from gradsim_jax.physics import ColliderTopology, collider_distance, collider_params, simulate
from gradsim_jax.physics.colliders import local_distance, validate_colliders
from gradsim_jax.physics.quaternion import quat_from_axis_angle, quat_rotate


def _exact(kind, p, size):
    """Reference signed distances (numpy, float64) of points p [m, 3] in the collider's frame."""
    if kind == "plane":
        return p[:, 1]
    if kind == "sphere":
        return np.linalg.norm(p, axis=1) - size[0]
    if kind == "capsule":
        s = np.clip(p[:, 1], -size[1], size[1])
        return np.linalg.norm(p - s[:, None] * [0.0, 1.0, 0.0], axis=1) - size[0]
    # box: the distance to the nearest point of the solid outside; minus the distance to the nearest face inside
    q = np.abs(p) - size
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
    inside = np.min(size - np.abs(p), axis=1)
    return np.where(np.any(q > 0, axis=1), outside, -inside)


@pytest.mark.parametrize("kind,size", [("plane", [1.0, 1.0, 1.0]), ("sphere", [0.7, 0.0, 0.0]),
                                       ("box", [0.5, 0.3, 0.8]), ("capsule", [0.25, 0.6, 0.0])])
def test_signed_distances_are_exact_and_normals_are_their_gradients(kind, size):
    with jax.enable_x64(True):
        rng = np.random.default_rng(3)
        p = rng.uniform(-1.5, 1.5, (200, 3))
        d, n = jax.jit(lambda x: local_distance(kind, x, jnp.asarray(size, jnp.float64)))(jnp.asarray(p))
        np.testing.assert_allclose(np.asarray(d), _exact(kind, p, np.asarray(size)), rtol=0, atol=1e-12)
        grad = jax.jit(jax.vmap(jax.grad(lambda x: local_distance(kind, x, jnp.asarray(size, jnp.float64))[0])))(
            jnp.asarray(p))
        np.testing.assert_allclose(np.asarray(n), np.asarray(grad), atol=1e-12)
        np.testing.assert_allclose(np.linalg.norm(np.asarray(n), axis=1), 1.0, atol=1e-12)


def test_a_posed_collider_measures_in_its_own_frame():
    with jax.enable_x64(True):
        q = np.asarray(quat_from_axis_angle(jnp.array([0.3, 1.0, -0.2]), 0.9))
        q_unnormalized = 2.5 * q  # the rotation is normalized inside
        centre = np.array([0.4, -0.2, 1.1])
        size = np.array([0.5, 0.3, 0.8])
        params = collider_params(1, position=centre, rotation=q_unnormalized, size=size, dtype=jnp.float64)
        x = np.random.default_rng(0).uniform(-1.0, 2.0, (50, 3))
        d, n = jax.jit(lambda p: collider_distance(ColliderTopology(("box",)), params, p))(jnp.asarray(x))
        local = np.asarray(quat_rotate(jnp.asarray(q * [1, -1, -1, -1]), jnp.asarray(x - centre)))
        np.testing.assert_allclose(np.asarray(d)[:, 0], _exact("box", local, size), atol=1e-12)
        _, nl = local_distance("box", jnp.asarray(local), jnp.asarray(size))
        np.testing.assert_allclose(np.asarray(n)[:, 0], np.asarray(quat_rotate(jnp.asarray(q), nl)), atol=1e-12)


def _drop(kind, params_kw, x0, v0, *, frames=60, substeps=40, dtype=jnp.float64, **build):
    scene = combine(particles([x0], v=[v0], mass=0.1), collider(kind, **params_kw))
    topology, params, state = scene.build(gravity=build.pop("gravity", (0.0, -9.81, 0.0)), particle_radius=0.02,
                                          dtype=dtype, **build)
    return topology, params, state, lambda p, s: simulate(topology, p, s, frames=frames, substeps=substeps,
                                                          frame_dt=1.0 / 30.0)


@pytest.mark.parametrize("kind,kw,top", [
    ("sphere", {"position": (0.0, 0.0, 0.0), "radius": 0.5}, 0.5),
    ("box", {"position": (0.0, 0.0, 0.0), "half_extents": (0.5, 0.3, 0.5)}, 0.3),
    ("capsule", {"position": (0.0, 0.0, 0.0), "radius": 0.2, "half_height": 0.4,
                 "rotation": np.asarray(quat_from_axis_angle(jnp.array([0.0, 0.0, 1.0]), np.pi / 2))}, 0.2),
    ("plane", {"position": (0.0, 0.1, 0.0)}, 0.1),
    ("mesh", dict(zip(("vertices", "faces"), box_mesh(0.5, 0.3, 0.5))), 0.3),
])
def test_a_dropped_particle_comes_to_rest_on_each_shape_at_its_sag(kind, kw, top):
    with jax.enable_x64(True):
        ke = 2.0e3
        topology, params, state, run = _drop(kind, dict(kw, ke=ke, kd=5.0, kf=5.0, mu=0.5), [0.0, 0.6, 0.0],
                                             [0.0, 0.0, 0.0], frames=90)
        traj = run(params, state)
        y = float(traj.particles.x[-1, 0, 1])
        # at rest on the top: the surface + particle radius - the penalty spring's sag m g / ke (4.9e-4 m); the
        # damping acts on approach only, so a bounce rings down slowly: within 4 % of the sag after 3 s
        assert y == pytest.approx(top + 0.02 - 0.1 * 9.81 / ke, abs=2e-5)
        assert abs(float(traj.particles.v[-1, 0, 1])) < 1e-3


@pytest.mark.parametrize("kind,kw", [("sphere", {"radius": 0.5}), ("box", {"half_extents": (0.5, 0.5, 0.5)}),
                                     ("capsule", {"radius": 0.5, "half_height": 0.3}), ("plane", {}),
                                     ("mesh", dict(zip(("vertices", "faces"), box_mesh(0.5, 0.5, 0.5))))])
def test_a_frictionless_undamped_bounce_keeps_its_energy(kind, kw):
    """No damping, no friction, no gravity: the particle comes back off the surface at its approach speed (the
    penalty spring is conservative; semi-implicit Euler's energy error on it is O(dt^2 ke / m) = 1e-4 here)."""
    with jax.enable_x64(True):
        start = [0.0, -1.1, 0.0] if kind != "plane" else [0.0, 0.3, 0.0]
        speed = 1.0
        v0 = [0.0, speed, 0.0] if kind != "plane" else [0.0, -speed, 0.0]
        topology, params, state, run = _drop(kind, dict(kw, ke=1.0e3, kd=0.0, kf=0.0, mu=0.0), start, v0,
                                             frames=30, substeps=100, gravity=(0.0, 0.0, 0.0))
        traj = run(params, state)
        v_end = np.asarray(traj.particles.v[-1, 0])
        assert np.sign(v_end[1]) == -np.sign(v0[1])  # it bounced
        assert np.linalg.norm(v_end) == pytest.approx(speed, rel=1e-3)


def test_gradients_through_a_sliding_contact_match_float64_finite_differences():
    """A particle landing on the top of a tilted box and sliding on with friction: d(final position) / d(the box's
    position, ke, kd, kf, mu) against central differences (h = 1e-6 relative; it slips throughout, so no
    stick-slip switch lies within h: kf then has no effect, and its derivative is 0 on both sides)."""
    with jax.enable_x64(True):
        tilt = np.asarray(quat_from_axis_angle(jnp.array([0.0, 0.0, 1.0]), 0.1))
        topology, params, state, run = _drop(
            "box", dict(position=(0.0, 0.0, 0.0), half_extents=(2.0, 0.3, 2.0), rotation=tilt, ke=1.0e3, kd=20.0,
                        kf=20.0, mu=0.1), [-0.5, 0.3, 0.0], [2.0, 0.0, 0.2], frames=20, substeps=20)
        weights = jnp.array([1.0, 0.7, -0.4])

        def loss(col):
            traj = run(dataclasses.replace(params, colliders=col), state)
            return jnp.sum(weights * traj.particles.x[-1, 0])

        col = params.colliders
        grad = jax.jit(jax.grad(loss))(col)
        f = jax.jit(loss)
        for name in ("position", "ke", "kd", "kf", "mu"):
            value = getattr(col, name)
            direction = np.ones(np.shape(value))
            h = 1e-6 * max(1.0, float(np.max(np.abs(np.asarray(value)))))
            plus = dataclasses.replace(col, **{name: value + h * direction})
            minus = dataclasses.replace(col, **{name: value - h * direction})
            fd = (float(f(plus)) - float(f(minus))) / (2 * h)
            analytic = float(jnp.sum(getattr(grad, name) * direction))
            assert analytic == pytest.approx(fd, rel=1e-5, abs=1e-10), name
        assert abs(float(jnp.sum(grad.mu))) > 1e-3  # friction acted


@pytest.mark.parametrize("kind,point", [("sphere", [0.0, 0.0, 0.0]), ("sphere", [0.0, 0.52, 0.0]),
                                        ("box", [0.5, 0.5, 0.0]), ("box", [0.0, 0.0, 0.0]),
                                        ("box", [0.52, 0.52, 0.52]), ("capsule", [0.0, 0.1, 0.0]),
                                        ("capsule", [0.0, 0.82, 0.0])])
def test_gradients_are_finite_where_the_normal_is_undefined_or_the_contact_just_starts(kind, point):
    """Centres, axes, edges and corners, and points at exactly the contact distance: finite gradients."""
    with jax.enable_x64(True):
        kw = {"sphere": {"radius": 0.5}, "box": {"half_extents": (0.5, 0.5, 0.5)},
              "capsule": {"radius": 0.3, "half_height": 0.5}}[kind]
        topology, params, state, run = _drop(kind, dict(kw, ke=1.0e3, kd=5.0, kf=5.0, mu=0.5), point,
                                             [0.0, 0.0, 0.0], frames=2, substeps=4)

        def loss(x0, col):
            s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, x=x0))
            return jnp.sum(run(dataclasses.replace(params, colliders=col), s).particles.x[-1] ** 2)

        g_x, g_col = jax.jit(jax.grad(loss, argnums=(0, 1)))(state.particles.x, params.colliders)
        for leaf in jax.tree_util.tree_leaves((g_x, g_col)):
            assert np.all(np.isfinite(np.asarray(leaf)))


def test_a_cloth_dropped_on_a_sphere_drapes_over_it_without_passing_through():
    flat = np.asarray(quat_from_axis_angle(jnp.array([1.0, 0.0, 0.0]), -np.pi / 2))  # the x-y grid into x-z
    cloth = cloth_grid(8, 8, 0.15, 0.15, pos=(-0.6, 0.7, 0.6), rot=flat, mass=0.01, tri_ke=200.0, tri_ka=200.0,
                       tri_kd=1.0, bend_ke=0.0)
    scene = combine(cloth, collider("sphere", (0.0, 0.0, 0.0), radius=0.5, ke=1.0e4, kd=1.0, kf=1.0, mu=0.5))
    topology, params, state = scene.build(particle_radius=0.01)
    traj = simulate(topology, params, state, frames=30, substeps=48, frame_dt=1.0 / 30.0)
    x = np.asarray(traj.particles.x)
    assert np.all(np.isfinite(x))
    distance = np.linalg.norm(x[-1], axis=1) - 0.5 - 0.01
    # the centre of the cloth lies on the sphere, its corners hang below the top. No particle is deeper than a
    # penalty spring lets one that lands at the fall's speed sqrt(2 g 0.19 m) = 1.9 m/s: v sqrt(m / ke) = 1.9 mm
    assert distance.min() > -1.9e-3
    centre = np.argmin(np.linalg.norm(x[0][:, [0, 2]], axis=1))
    assert x[-1, centre, 1] == pytest.approx(0.51, abs=5e-3)
    assert x[-1, :, 1].min() < 0.45


def test_bad_colliders_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="collider kind must be one of"):
        collider("cylinder")
    with pytest.raises(ValueError, match="radius must be > 0"):
        combine(particles([[0.0, 1.0, 0.0]]), collider("sphere", radius=0.0)).build()
    with pytest.raises(ValueError, match="colliders.mu of collider 0 must be >= 0"):
        combine(particles([[0.0, 1.0, 0.0]]), collider("box", mu=-0.1)).build()
    with pytest.raises(ValueError, match="colliders.position of collider 1 .* is not finite"):
        combine(particles([[0.0, 1.0, 0.0]]), collider("plane"), collider("sphere", (np.nan, 0.0, 0.0))).build()
    with pytest.raises(ValueError, match="zero quaternion"):
        combine(particles([[0.0, 1.0, 0.0]]), collider("box", rotation=(0.0, 0.0, 0.0, 0.0))).build()
    with pytest.raises(ValueError, match=r"colliders.position must have shape \(2, 3\)"):
        validate_colliders(ColliderTopology(("sphere", "box")), collider_params(1))


def test_collider_meshes_lie_on_their_surfaces_and_join_the_scene_mesh():
    from gradsim_jax.render.mesh import scene_faces, scene_vertices

    with jax.enable_x64(True):
        q = np.asarray(quat_from_axis_angle(jnp.array([1.0, 2.0, 0.5]), 0.7))
        cloth = cloth_grid(2, 2, 0.1, 0.1, pos=(0.0, 2.0, 0.0))
        scene = combine(cloth, collider("sphere", (0.3, 0.2, -0.1), radius=0.4),
                        collider("plane", (0.0, -1.0, 0.0)),
                        collider("box", (1.0, 0.0, 0.0), rotation=q, half_extents=(0.2, 0.3, 0.4)),
                        collider("capsule", (-1.0, 0.5, 0.0), rotation=q, radius=0.25, half_height=0.5))
        topology, params, state = scene.build(dtype=jnp.float64)
        vertices = np.asarray(scene_vertices(topology, params, state))
        faces = scene_faces(topology)
        n = topology.num_particles
        assert faces.min() >= 0 and faces.max() == len(vertices) - 1
        assert len(faces) == len(topology.cloth.triangles) + 320 + 12 + 256  # the plane is not drawn
        # every collider vertex is on its own shape's surface (signed distance 0) and outside the others' ...
        distance = jax.jit(lambda p: collider_distance(topology.colliders, params.colliders, p))
        d, _ = distance(jnp.asarray(vertices[n:]))
        d = np.asarray(d)
        owner = np.repeat([0, 2, 3], [162, 8, 160])
        np.testing.assert_allclose(d[np.arange(len(owner)), owner], 0.0, atol=1e-12)
        # ... and every face is wound counter-clockwise seen from outside its shape
        col_faces = faces[len(topology.cloth.triangles):] - n
        a, b, c = (vertices[n:][col_faces[:, i]] for i in range(3))
        normal = np.cross(b - a, c - a)
        _, outward = distance(jnp.asarray((a + b + c) / 3))
        face_owner = np.repeat([0, 2, 3], [320, 12, 256])
        along = np.sum(normal * np.asarray(outward)[np.arange(len(face_owner)), face_owner], axis=1)
        assert np.all(along > 0)


def test_a_start_inside_a_collider_or_a_contact_too_stiff_for_the_step_is_warned():
    from gradsim_jax.physics import ContactWarning

    inside = combine(particles([[0.0, 0.1, 0.0], [2.0, 2.0, 0.0]], mass=0.1),
                     collider("plane", (0.0, -1.0, 0.0)), collider("sphere", (0.0, 0.0, 0.0), radius=0.5))
    topology, params, state = inside.build(particle_radius=0.01)
    with pytest.warns(ContactWarning, match=r"starts inside collider 1 \(sphere\): 1 free particle.*particle 0 by "
                                             r"0.41 m"):
        simulate(topology, params, state, frames=1, substeps=8, frame_dt=1.0 / 30.0)
    stiff = combine(particles([[0.0, 2.0, 0.0]], mass=1e-4), collider("sphere", radius=0.5, ke=1.0e4))
    topology, params, state = stiff.build(particle_radius=0.01)
    with pytest.warns(ContactWarning, match=r"collider 0 \(sphere\) is too stiff for the time step: ke 1e\+04 on a "
                                             r"0.0001 kg particle needs a step below 0.0002 s"):
        simulate(topology, params, state, frames=1, substeps=8, frame_dt=1.0 / 30.0)
    resting = combine(particles([[0.0, 0.51, 0.0]], mass=0.1), collider("sphere", radius=0.5))
    topology, params, state = resting.build(particle_radius=0.01)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ContactWarning)  # touching, not inside: no warning
        simulate(topology, params, state, frames=1, substeps=8, frame_dt=1.0 / 30.0)
