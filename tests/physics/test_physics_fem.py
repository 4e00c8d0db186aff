"""FEM soft bodies (stable Neo-Hookean tetrahedra): rest, energy, relaxation, patch test, inversion, damping
frame invariance, gradients against finite differences, a mixed cloth + FEM scene, validation."""

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.geometry import MeshError, lumped_masses
from gradsim_jax.physics import PARTICLE_FORCES, Control, FemControl, particle_forces, replace_paths
from gradsim_jax.physics import fem
from gradsim_jax.physics.fem import rest_alpha, tet_stress
from gradsim_jax.render.mesh import scene_faces

# Jitted once each: the tests call them many times on a few shapes.
fem_forces = jax.jit(fem.fem_forces)
fem_stress = jax.jit(fem.fem_stress)
fem_energy = jax.jit(fem.fem_energy)
fem_volumes = jax.jit(fem.fem_volumes)
ONE_TET = (np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]]), np.array([[0, 1, 2, 3]]))


def _box(dims=(2, 1, 1), size=(0.2, 0.1, 0.1), seed=0, **kwargs):
    """A soft box with per-tet materials varied at random (every tet different)."""
    vertices, tets = gs.box_tets(dims, size)
    k = len(tets)
    rng = np.random.default_rng(seed)
    material = dict(k_mu=1e4 * rng.uniform(0.5, 2.0, k), k_lambda=1e4 * rng.uniform(0.5, 2.0, k),
                    k_damp=rng.uniform(0.5, 2.0, k))
    material.update(kwargs)
    return gs.soft_body(vertices, tets, **material)


def _random_rotation(rng):
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def test_zero_force_at_rest_and_under_rigid_motions(x64):
    top, par, st = _box().build(gravity=(0.0, 0.0, 0.0))
    x0 = st.particles.x
    zero_v = jnp.zeros_like(x0)
    # alpha = 1 + 3 mu / (4 lambda) is what cancels the deviatoric term's mu (1 - 1/4) at F = I.
    np.testing.assert_allclose(rest_alpha(1.0, 1.0), 1.75)
    scale = float(jnp.abs(fem_forces(top, par, x0 * 1.01, zero_v)).max())  # a 1 % stretch
    assert scale > 0
    rot = _random_rotation(np.random.default_rng(1))
    for x in (x0, x0 @ jnp.asarray(rot).T + jnp.array([0.3, -1.0, 2.0])):
        f = fem_forces(top, par, x, zero_v)
        assert float(jnp.abs(f).max()) <= 1e-12 * scale
        assert float(jnp.abs(fem_stress(top, par, x, zero_v)).max()) <= 1e-12 * float(par.fem.k_mu.max())


def test_forces_are_minus_the_energy_gradient(x64):
    top, par, st = _box().build(gravity=(0.0, 0.0, 0.0))
    rng = np.random.default_rng(2)
    x0 = np.asarray(st.particles.x)
    par = replace_paths(par, {"fem.activation": jnp.asarray(rng.uniform(-0.3, 0.3, par.fem.activation.shape))})
    for trial in range(3):
        x = jnp.asarray(x0 + 0.03 * rng.standard_normal(x0.shape))
        f = fem_forces(top, par, x, jnp.zeros_like(x))
        g = jax.grad(lambda y: fem_energy(top, par, y))(x)
        np.testing.assert_allclose(f, -g, rtol=1e-10, atol=1e-10 * float(jnp.abs(f).max()))
        # The control's activation adds to the params' one, in the forces and the energy alike.
        extra = jnp.asarray(rng.uniform(-0.2, 0.2, par.fem.activation.shape))
        f = fem_forces(top, par, x, jnp.zeros_like(x), activation=extra)
        g = jax.grad(lambda y: fem_energy(top, par, y, activation=extra))(x)
        np.testing.assert_allclose(f, -g, rtol=1e-10, atol=1e-10 * float(jnp.abs(f).max()))


def test_stretched_tet_returns_to_rest_volume(x64):
    top, par, st = gs.soft_body(*ONE_TET, k_mu=1e4, k_lambda=2e4, k_damp=20.0).build(gravity=(0.0, 0.0, 0.0))
    rest = float(fem_volumes(top, st.particles.x)[0])
    x = st.particles.x * jnp.array([1.4, 0.8, 1.2])
    stretched = gs.particle_state(x, jnp.zeros_like(x))
    assert abs(float(fem_volumes(top, x)[0]) / rest - 1) > 0.3
    traj = gs.simulate(top, par, stretched, frames=60, substeps=10, frame_dt=1e-2)
    volume = float(fem_volumes(top, traj.particles.x[-1])[0])
    assert abs(volume / rest - 1) < 1e-3
    # Settled in its rest shape (up to a rigid motion), not passing through it.
    assert float(fem_energy(top, par, traj.particles.x[-1])) < 1e-6 * float(fem_energy(top, par, x))


def test_patch_test_uniform_stretch(x64):
    """An affine deformation x = A X + b (and velocity v = B X) gives every tet the same F, F_dot and so
    the same P; the forces on an interior vertex cancel."""
    scene = _box(dims=(2, 2, 2), size=(0.2, 0.2, 0.2), k_mu=3e4, k_lambda=5e4, k_damp=2.0)
    top, par, st = scene.build(gravity=(0.0, 0.0, 0.0))
    x_rest = st.particles.x
    a = jnp.array([[1.2, 0.1, 0.0], [0.05, 0.9, -0.1], [0.0, 0.2, 1.1]])
    b = jnp.array([[0.3, -0.2, 0.1], [0.0, 0.1, 0.4], [-0.1, 0.0, -0.2]])
    x = x_rest @ a.T + jnp.array([1.0, 2.0, 3.0])
    v = x_rest @ b.T
    p = fem_stress(top, par, x, v)
    expected = tet_stress(jnp.asarray(ONE_TET[0]) @ a.T, jnp.asarray(ONE_TET[0]) @ b.T, jnp.eye(3) / 0.1,
                          3e4, 5e4, 2.0, 0.0)
    np.testing.assert_allclose(p, jnp.broadcast_to(expected, p.shape), rtol=1e-10, atol=1e-10)
    interior = np.flatnonzero(np.all(np.isclose(np.asarray(x_rest), 0.1), axis=1))
    assert interior.tolist() == [13]
    f = fem_forces(top, par, x, v)
    assert float(jnp.abs(f[interior]).max()) <= 1e-10 * float(jnp.abs(f).max())


def test_inverted_and_flat_tets_stay_finite(x64):
    top, par, st = gs.soft_body(*ONE_TET, k_mu=1e4, k_lambda=1e4, k_damp=1.0).build(gravity=(0.0, 0.0, 0.0))
    x_rest = st.particles.x
    v = jnp.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, -0.2, 0.0], [0.0, 0.0, -0.5]])
    grad = jax.jit(jax.grad(lambda x, p: jnp.sum(fem.fem_forces(top, p, x, v) ** 2) + fem.fem_energy(top, p, x),
                            argnums=(0, 1)))
    for z in (-0.05, 0.0):  # vertex 3 pushed through the opposite face; exactly onto it (J = 0)
        x = x_rest.at[3, 2].set(z)
        f = fem_forces(top, par, x, v)
        assert bool(jnp.all(jnp.isfinite(f)))
        if z < 0:
            assert float(fem_volumes(top, x)[0]) < 0 and float(f[3, 2]) > 0  # pushed back out

        gx, gp = grad(x, par)
        assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves((gx, gp)))
    # A rollout started inverted recovers a positive volume (gradients of rollouts: the test below).
    start = gs.particle_state(x_rest.at[3, 2].set(-0.03), jnp.zeros_like(x_rest))
    traj = gs.simulate(top, par, start, frames=5, substeps=10, frame_dt=1e-2)
    assert float(fem_volumes(top, traj.particles.x[-1])[0]) > 0


def test_damping_sees_relative_velocities_only(x64):
    top, par, st = _box().build(gravity=(0.0, 0.0, 0.0))
    rng = np.random.default_rng(3)
    x_rest = st.particles.x
    x = x_rest + 0.02 * jnp.asarray(rng.standard_normal(x_rest.shape))  # deformed: elastic forces nonzero
    still = fem_forces(top, par, x, jnp.zeros_like(x))
    moving = fem_forces(top, par, x, jnp.broadcast_to(jnp.array([3.0, -1.0, 2.0]), x.shape))
    np.testing.assert_allclose(moving, still, rtol=0, atol=1e-12 * float(jnp.abs(still).max()))
    # Rigid rotation v = w x x at the rest shape: F_dot = [w]x is skew, so the volume rate dJ/dt = tr F_dot
    # vanishes and the damping stress is k_damp [w]x, the F_dot term alone (PHYSICS.md's P += k_damp F_dot,
    # as in dflex/Warp, is not rotation invariant: it damps a spin as well).
    w = jnp.array([0.5, -1.0, 2.0])
    spin = jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
    damping = fem_stress(top, par, x_rest, jnp.cross(w, x_rest)) - fem_stress(top, par, x_rest, 0 * x_rest)
    np.testing.assert_allclose(damping, par.fem.k_damp[:, None, None] * spin, rtol=1e-12, atol=1e-12)


def test_gradients_match_finite_differences(x64):
    vertices, tets = gs.box_tets((2, 1, 1), (0.2, 0.1, 0.1))
    top, par, st = _box(pinned=vertices[:, 0] == 0.0).build()
    lumped_volume = jnp.asarray(lumped_masses(vertices, tets, 1.0))
    rng = np.random.default_rng(4)
    par = replace_paths(par, {"fem.activation": jnp.asarray(rng.uniform(-0.1, 0.1, len(tets)))})
    x = st.particles.x + 0.003 * jnp.asarray(rng.standard_normal(st.particles.x.shape))
    st = gs.particle_state(x, 0.05 * jnp.asarray(rng.standard_normal(x.shape)))
    theta = {"k_mu": par.fem.k_mu, "k_lambda": par.fem.k_lambda, "k_damp": par.fem.k_damp,
             "activation": par.fem.activation, "density": 800.0, "rest_x": par.fem.rest_x}
    theta = {k: np.asarray(v, np.float64) for k, v in theta.items()}  # one signature for every call
    weights = jnp.asarray(rng.standard_normal(x.shape))

    def loss(theta):
        p = replace_paths(par, {f"fem.{k}": v for k, v in theta.items() if k != "density"})
        p = replace_paths(p, {"particles.mass": theta["density"] * lumped_volume})
        traj = gs.simulate(top, p, st, frames=3, substeps=10, frame_dt=5e-3, checkpoint=False)
        return jnp.sum(weights * traj.particles.x[-1]) + 0.01 * jnp.sum(weights * traj.particles.v[-1])

    value_and_grad = jax.jit(jax.value_and_grad(loss))  # one compile for both
    loss = lambda theta: value_and_grad(theta)[0]  # noqa: E731
    grad = value_and_grad(theta)[1]
    failures = []
    for name, value in theta.items():  # host arithmetic: no small eager programs to compile
        direction = rng.standard_normal(value.shape)
        analytic = float(np.sum(np.asarray(grad[name]) * direction))
        h = 1e-6 * max(1.0, float(np.abs(value).max())) if name != "rest_x" else 1e-7
        shifted = lambda s: float(loss({**theta, name: value + s * h * direction}))  # noqa: B023, E731
        numeric = (shifted(1.0) - shifted(-1.0)) / (2 * h)
        if not (analytic != 0.0 and abs(analytic - numeric) <= 1e-5 * abs(numeric)):
            failures.append((name, analytic, numeric))
    assert not failures, failures


def test_cloth_and_soft_body_in_one_scene():
    cloth = gs.cloth_grid(2, 2, 0.1, 0.1, pos=(-0.3, 0.5, 0.0), fix_left=True, mass=0.05, tri_kd=1.0, bend_ke=0.0)
    body = gs.soft_body(*gs.box_tets((2, 1, 1), (0.2, 0.1, 0.1)), pos=(0.1, 0.3, 0.0), k_mu=2e4, k_lambda=2e4,
                        pinned=[0, 1])
    top, par, st = (cloth + body).build()
    n_cloth = cloth.num_particles
    # One faces array: cloth triangles, then the body's surface with its particle indices shifted.
    faces = scene_faces(top)
    assert faces.shape == (len(cloth.triangles) + len(body.tet_surface), 3)
    np.testing.assert_array_equal(faces[len(cloth.triangles):], body.tet_surface + n_cloth)
    np.testing.assert_array_equal(np.asarray(top.fem.tets), body.tets + n_cloth)
    mixed = gs.simulate(top, par, st, frames=3, substeps=16)
    assert gs.first_nonfinite(mixed) is None
    moved = jnp.abs(mixed.particles.x[-1] - mixed.particles.x[0]).max(axis=1)
    assert float(moved[:n_cloth].max()) > 1e-3 and float(moved[n_cloth:].max()) > 1e-3
    # A control's activation reaches the tets and nothing else.
    ctrl = Control(fem=FemControl(tet_activation=jnp.full(top.fem.tets.shape[0], 0.2)))
    change = jax.jit(lambda c: particle_forces(top, par, st.particles.x, st.particles.v, c)
                     - particle_forces(top, par, st.particles.x, st.particles.v))(ctrl)
    assert float(jnp.abs(change[n_cloth:]).max()) > 1.0 and float(jnp.abs(change[:n_cloth]).max()) == 0.0


def test_scene_without_tets_compiles_no_fem_code():
    top, par, st = gs.cloth_grid(2, 2, 0.1, 0.1, fix_left=True).build()
    assert top.fem.tets.shape == (0, 4) and par.fem.k_mu.shape == (0,)
    assert not PARTICLE_FORCES["fem"].present(top)
    trace = lambda: str(jax.make_jaxpr(particle_forces)(top, par, st.particles.x, st.particles.v))  # noqa: E731
    with_term = trace()
    term = PARTICLE_FORCES.pop("fem")
    try:
        without = trace()
    finally:
        PARTICLE_FORCES["fem"] = term
    assert with_term == without


def test_validation_names_the_fem_field():
    top, par, st = _box().build()
    bad = replace_paths(par, {"fem.k_mu": par.fem.k_mu.at[3].set(-1.0)})
    with pytest.raises(ValueError, match=r"Params\.fem\.k_mu\[3\] is negative"):
        gs.simulate(top, bad, st, frames=1, substeps=1)
    inverted = dataclasses.replace(top, fem=dataclasses.replace(top.fem, tets=top.fem.tets[:, [0, 1, 3, 2]]))
    with pytest.raises(ValueError, match=r"Topology\.fem\.tets\[0\] = .* is inverted"):
        gs.simulate(inverted, par, st, frames=1, substeps=1)
    with pytest.raises(ValueError, match=r"Params\.fem\.k_lambda has shape"):
        gs.simulate(top, replace_paths(par, {"fem.k_lambda": par.fem.k_lambda[:-1]}), st, frames=1, substeps=1)
    with pytest.raises(MeshError, match="tet 0 .* is inverted"):
        gs.soft_body(ONE_TET[0], [[0, 2, 1, 3]])
    with pytest.raises(ValueError, match="finite k_damp >= 0"):
        gs.soft_body(*ONE_TET, k_damp=-1.0)


def test_forces_match_warp(x64):
    """Warp 1.8.1's `eval_tetrahedra` (benchmarks/reference/warp_fem_reference.py, float32): the same forces
    without damping; with damping they differ by exactly Warp's volume damping of absolute velocities, whose
    rate sum_{i=1..3} dJ/dx_i . v_i exceeds ours, sum_i dJ/dx_i . (v_i - v0), by -dJ/dx_0 . v0."""
    ref = np.load(Path(__file__).resolve().parents[1] / "data" / "warp_fem.npz")
    assert str(ref["warp_version"]) == "1.8.1"
    top, par, _ = gs.soft_body(ref["rest"], ref["tets"], k_mu=ref["k_mu"], k_lambda=ref["k_lambda"],
                               k_damp=0.0).build(dtype=jnp.float64)
    par = replace_paths(par, {"fem.activation": jnp.asarray(ref["activation"])})
    x, v = jnp.asarray(ref["x"]), jnp.asarray(ref["v"])
    assert (np.asarray(fem_volumes(top, x)) < 0).sum() == 2  # the reference covers inverted tets
    scale = np.abs(ref["forces"]).max()
    np.testing.assert_allclose(fem_forces(top, par, x, v), ref["forces"], rtol=0, atol=1e-6 * scale)

    ours = fem_forces(top, replace_paths(par, {"fem.k_damp": jnp.asarray(ref["k_damp"])}), x, v)
    tets, rest, xs = ref["tets"], ref["rest"], ref["x"]
    e_rest, e = rest[tets[:, 1:]] - rest[tets[:, :1]], xs[tets[:, 1:]] - xs[tets[:, :1]]  # rows: edges
    volume0 = np.einsum("ij,ij->i", e_rest[:, 0], np.cross(e_rest[:, 1], e_rest[:, 2])) / 6.0
    dj = np.stack([np.cross(e[:, 1], e[:, 2]), np.cross(e[:, 2], e[:, 0]), np.cross(e[:, 0], e[:, 1])], 1)
    dj = dj / (6.0 * volume0[:, None, None])  # dJ/dx_1..3 (det Dm = 1 / (6 V0))
    dj = np.concatenate([-dj.sum(1, keepdims=True), dj], axis=1)  # [k, 4, 3] with dJ/dx_0
    extra_rate = -np.einsum("kj,kj->k", dj[:, 0], ref["v"][tets[:, 0]])
    shift = -dj * (ref["k_damp"] * volume0 * extra_rate)[:, None, None]
    expected = np.asarray(ours).copy()
    np.add.at(expected, tets.reshape(-1), shift.reshape(-1, 3))
    np.testing.assert_allclose(expected, ref["forces_damped"], rtol=0, atol=1e-6 * np.abs(ref["forces_damped"]).max())
    assert np.abs(np.asarray(ours) - ref["forces_damped"]).max() > 1e-3 * np.abs(ref["forces_damped"]).max()


def test_entrywise_kernel_equals_the_matrix_kernel_with_all_derivatives(x64):
    """`tet_force` (entry-wise, materialized, for large meshes) against `tet_force_matrices` (3 x 3
    products, for small ones) at random deformed tets and velocities: values, and gradients w.r.t.
    positions, velocities and every material quantity, in float64."""
    rng = np.random.default_rng(11)
    k = 16
    xs = jnp.asarray(np.array(ONE_TET[0])[None] + 0.03 * rng.standard_normal((k, 4, 3)))
    vs = jnp.asarray(rng.standard_normal((k, 4, 3)))
    dm, rest_volume = fem.rest_shapes(jnp.asarray(ONE_TET[0]), jnp.asarray(ONE_TET[1]))
    dm, rest_volume = jnp.repeat(dm, k, 0), jnp.repeat(rest_volume, k, 0)
    mats = [jnp.asarray(1e4 * rng.uniform(0.5, 2.0, k)), jnp.asarray(1e4 * rng.uniform(0.5, 2.0, k)),
            jnp.asarray(rng.uniform(0.5, 2.0, k)), jnp.asarray(rng.uniform(-0.2, 0.2, k))]

    def entrywise(xs, vs, *m):
        return jnp.stack(jax.vmap(fem.tet_force)(*jnp.swapaxes(xs, 0, 1), *jnp.swapaxes(vs, 0, 1), dm,
                                                  rest_volume, *m), axis=1)

    def matrices(xs, vs, *m):
        return jax.vmap(fem.tet_force_matrices)(xs, vs, dm, rest_volume, *m)

    np.testing.assert_allclose(jax.jit(entrywise)(xs, vs, *mats), jax.jit(matrices)(xs, vs, *mats), rtol=1e-11,
                               atol=1e-9)
    w = jnp.asarray(rng.standard_normal((k, 4, 3)))
    grads = [jax.jit(jax.grad(lambda *a, fn=fn: jnp.sum(w * fn(*a)), argnums=tuple(range(6))))(xs, vs, *mats)
             for fn in (entrywise, matrices)]  # compiled: op by op they took 11 s
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * float(jnp.abs(b).max()))


def test_a_large_mesh_runs_the_entrywise_kernel_and_its_forces_are_minus_the_energy_gradient(x64):
    dims = (8, 8, 6)  # 2304 tets: at least ENTRYWISE_MIN_TETS
    vertices, tets = gs.box_tets(dims, (0.4, 0.4, 0.3))
    assert len(tets) >= fem.ENTRYWISE_MIN_TETS
    top, par, st = gs.soft_body(vertices, tets, k_mu=1e4, k_lambda=2e4, k_damp=0.0).build(gravity=(0.0, 0.0, 0.0))
    prepared = fem.prepare_fem(top, par)
    assert prepared[2] is not None  # the corner-major indices of the entry-wise path
    rng = np.random.default_rng(5)
    x = jnp.asarray(np.asarray(st.particles.x) + 0.01 * rng.standard_normal(st.particles.x.shape))
    f = fem_forces(top, par, x, jnp.zeros_like(x))
    g = jax.grad(lambda y: fem_energy(top, par, y))(x)
    np.testing.assert_allclose(f, -g, rtol=1e-10, atol=1e-10 * float(jnp.abs(f).max()))
