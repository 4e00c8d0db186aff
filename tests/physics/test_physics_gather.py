"""Corner gathers and sums with an incidence table (`physics.gather`): the same values and derivatives as
XLA's gather and scatter-add, in every mode of differentiation, under vmap, and checked against their
elements."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import gradsim_jax as gs
from gradsim_jax.physics.gather import (corner_incidence, eager_if_concrete, gather_corners, incidence_mismatch,
                                       scatter_corners)

ELEMENTS = np.array([[0, 1, 2], [2, 1, 3], [3, 4, 2], [4, 0, 2]], np.int32)
N = 6  # particle 5 belongs to no element


def test_incidence_lists_every_corner_once_under_its_particle():
    table = corner_incidence(ELEMENTS, N)
    assert table.shape == (4, N)  # particle 2 is a corner of all four elements
    flat = ELEMENTS.reshape(-1)
    for i in range(N):
        listed = table[:, i][table[:, i] < flat.size]
        assert sorted(listed.tolist()) == np.flatnonzero(flat == i).tolist()
    assert (table[:, 5] == flat.size).all()
    assert incidence_mismatch(ELEMENTS, table, N) is None
    assert corner_incidence(np.zeros((0, 3), np.int32), N) is None


def test_gather_and_sum_equal_xla_gather_and_scatter_with_all_derivatives(x64):
    del x64
    table = jnp.asarray(corner_incidence(ELEMENTS, N))
    elements = jnp.asarray(ELEMENTS)
    x = jax.random.normal(jax.random.key(0), (N, 3), jnp.float64)
    f = jax.random.normal(jax.random.key(1), ELEMENTS.shape + (3,), jnp.float64)

    def chain(x, f, incidence):  # a nonlinear use of both, as a force term makes
        corners = gather_corners(x, elements, incidence)
        return scatter_corners(jnp.sin(corners) * f, elements, N, incidence)

    np.testing.assert_allclose(chain(x, f, table), chain(x, f, None), rtol=1e-13)
    for order in ("fwd", "rev"):
        check_grads(lambda x, f: chain(x, f, table), (x, f), order=2, modes=(order,))
    w = jax.random.normal(jax.random.key(2), (N, 3), jnp.float64)
    grads = [jax.grad(lambda x, f: jnp.sum(w * chain(x, f, t)), argnums=(0, 1))(x, f) for t in (table, None)]
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    batch = jnp.stack([x, 2 * x, -x])
    np.testing.assert_allclose(jax.vmap(lambda xx: chain(xx, f, table))(batch),
                               jax.vmap(lambda xx: chain(xx, f, None))(batch), rtol=1e-13)
    # A batch of meshes (the index arrays batched too) takes the plain path of the same primitives.
    other = np.array([[0, 1, 5], [1, 2, 5], [2, 3, 5], [3, 4, 5]], np.int32)
    meshes = jnp.asarray(np.stack([ELEMENTS, other]))
    tables = jnp.asarray(np.stack([corner_incidence(ELEMENTS, N), _padded(corner_incidence(other, N), 4)]))
    got = jax.vmap(lambda e, t: scatter_corners(gather_corners(x, e, t), e, N, t))(meshes, tables)
    want = jax.vmap(lambda e: scatter_corners(gather_corners(x, e), e, N))(meshes)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def _padded(table, rows):
    return np.concatenate([table, np.full((rows - table.shape[0], table.shape[1]), table.max())])


def test_scene_build_makes_tables_and_the_rollout_equals_the_scatter_one(x64):
    del x64  # float32 rounding of the two summation orders grows to 1e-5 m here within 32 steps
    topology, params, state0 = (gs.cloth_grid(3, 3, 0.1, 0.1, fix_top=True, bend_ke=0.01).add_springs([[0, 15]], ke=10.0)
                                ).build(dtype=jnp.float64, incidence=True)
    assert topology.cloth.tri_incidence is not None and topology.cloth.bend_incidence is not None
    assert topology.springs.incidence is not None and topology.fem.incidence is None  # no tets
    plain = dataclasses.replace(topology, springs=dataclasses.replace(topology.springs, incidence=None),
                                cloth=dataclasses.replace(topology.cloth, tri_incidence=None, bend_incidence=None))
    v0 = state0.particles.v + 0.3
    runs = [gs.simulate(t, params, gs.particle_state(state0.particles.x, v0), frames=4, substeps=8).particles.x
            for t in (topology, plain)]
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12, atol=1e-13)


def test_a_table_of_other_elements_is_refused_before_running():
    topology, params, state0 = gs.cloth_grid(3, 3, 0.1, 0.1, fix_top=True).build(incidence=True)
    flipped = topology.cloth.triangles[:, [0, 2, 1]]
    stale = dataclasses.replace(topology, cloth=dataclasses.replace(topology.cloth, triangles=flipped))
    with pytest.raises(ValueError, match=r"Topology.cloth.tri_incidence does not match Topology.cloth.triangles"):
        gs.simulate(stale, params, state0, frames=1, substeps=1)
    wrong_shape = dataclasses.replace(topology, cloth=dataclasses.replace(
        topology.cloth, tri_incidence=topology.cloth.tri_incidence[:, :-1]))
    with pytest.raises(ValueError, match=r"Topology.cloth.tri_incidence has shape"):
        gs.simulate(wrong_shape, params, state0, frames=1, substeps=1)


def test_by_default_only_large_element_arrays_get_a_table():
    small, _, _ = gs.cloth_grid(10, 10, 0.1, 0.1, fix_top=True, bend_ke=0.01).build()
    assert small.cloth.tri_incidence is None and small.cloth.bend_incidence is None
    large, _, _ = gs.cloth_grid(64, 64, 0.01, 0.01, fix_top=True, bend_ke=0.01).build()  # 24,576 corners each
    assert large.cloth.tri_incidence is not None and large.cloth.bend_incidence is not None
    none, _, _ = gs.cloth_grid(64, 64, 0.01, 0.01, fix_top=True).build(incidence=False)
    assert none.cloth.tri_incidence is None


def test_concrete_rest_shapes_run_as_one_program_of_their_shapes_also_under_compile_time_eval():
    # Called while a jit traces its caller, under `ensure_compile_time_eval` (as the step check is), the helper
    # program must hold no fills as constants, give the op-by-op values, and serve other values of one shape.
    import warnings

    from gradsim_jax.physics.cloth import rest_shapes

    rng = np.random.default_rng(0)
    x, tris = rng.normal(size=(600, 3)), np.stack([np.arange(1000) % 600, (np.arange(1000) + 7) % 600,
                                                   (np.arange(1000) + 301) % 600], -1)
    seen = {}

    def caller(y):
        with jax.enable_x64(True), jax.ensure_compile_time_eval():
            for scale in (1.0, 2.0):
                seen[scale] = [np.asarray(a) for a in eager_if_concrete(rest_shapes, scale * x, tris)]
        return y

    previous = jax.config.jax_captured_constants_warn_bytes
    jax.config.update("jax_captured_constants_warn_bytes", 4_000)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*constants were captured")
            jax.jit(caller).lower(1.0)
    finally:
        jax.config.update("jax_captured_constants_warn_bytes", previous)
    with jax.enable_x64(True):
        expected = [np.asarray(a) for a in rest_shapes(jnp.asarray(x), jnp.asarray(tris))]
    assert seen[1.0][0].dtype == np.float64
    np.testing.assert_allclose(seen[1.0][0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(seen[1.0][1], expected[1], rtol=1e-12)
    np.testing.assert_allclose(seen[2.0][1], 4.0 * expected[1], rtol=1e-12)
    assert eager_if_concrete(rest_shapes, x.astype(np.float32), tris)[1].dtype == np.float32
