"""Compiling `simulate` does not grow with the mesh: no mesh-sized constants for XLA to fold or carry."""

import jax
import jax.numpy as jnp
import numpy as np

import gradsim_jax as gs
from gradsim_jax.physics.cloth import prepare_membrane
from gradsim_jax.physics.gather import corner_major_incidence


def _cloth(n, incidence=None):
    return gs.cloth_grid(n, n, 1.0 / n, 1.0 / n, mass=0.01, fix_top=True, tri_ke=1e3, tri_ka=1e3, tri_kd=1.0,
                         bend_ke=1.0).build(incidence=incidence)


def _hlo_text(n, incidence=None):
    top, par, st = _cloth(n, incidence)

    def loss(top, par, st):
        traj = gs.simulate(top, par, st, frames=2, substeps=2)
        return jnp.mean(traj.particles.x[-1] ** 2)

    return jax.jit(jax.value_and_grad(loss, argnums=1)).lower(top, par, st).as_text()


def test_program_size_does_not_grow_with_the_mesh():
    """Topology, params and state as arguments: the program of a 100 x 100 cloth (20,000 triangles, 29,800
    bending edges) is as small as that of a 4 x 4 one: index arrays, incidence tables and rest shapes are data,
    not text (both with and both without incidence tables: a table's height is the largest corner count, the
    same for any grid from 4 x 4 on)."""
    for incidence in (False, True):
        small, large = _hlo_text(4, incidence), _hlo_text(100, incidence)
        assert large.count("\n") == small.count("\n")
        # Longer shape strings (tensor<20000x3xf32>) only; the triangles alone would take over 1 MB as text.
        assert len(large) < 1.15 * len(small), (len(small), len(large))


def test_rest_shapes_of_a_closed_over_scene_are_computed_while_tracing():
    """A scene closed over by a jitted loss: its rest shapes are finished arrays when the program is built
    (evaluated eagerly, not staged for XLA to constant-fold), while traced rest positions stay traced."""
    top, par, st = _cloth(3)
    seen = {}

    def loss(v0, rest_x):
        seen["closed"] = prepare_membrane(top, par)
        seen["traced"] = prepare_membrane(top, gs.physics.replace_paths(par, {"cloth.rest_x": rest_x}))
        return jnp.sum(v0)

    jax.jit(loss).lower(st.particles.v, par.cloth.rest_x)
    assert not any(isinstance(a, jax.core.Tracer) for a in seen["closed"])
    assert all(isinstance(a, jax.core.Tracer) for a in seen["traced"][:2])  # G^-1 and A0 (not the indices)
    assert seen["closed"][3] is None  # no incidence table on so small a cloth


def test_the_corner_major_table_of_a_closed_over_scene_is_computed_while_tracing():
    top, par, st = gs.cloth_grid(3, 3, 0.1, 0.1).build(incidence=True)
    seen = {}

    def loss(v0):
        seen["prepared"] = prepare_membrane(top, par)
        return jnp.sum(v0)

    jax.jit(loss).lower(st.particles.v)
    table = seen["prepared"][3]
    assert not isinstance(table, jax.core.Tracer)
    np.testing.assert_array_equal(table, corner_major_incidence(top.cloth.tri_incidence, 18, 3))
