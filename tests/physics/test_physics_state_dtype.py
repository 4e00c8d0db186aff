"""`simulate` takes a State of any real dtype: integer (or bool) x and v become the float dtype of Params
instead of failing deep inside `lax.scan` with a carry-type TypeError; complex ones are refused by name."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import replace_paths


@pytest.fixture(scope="module")
def scene():
    # Integer coordinates: a 2 x 2 cloth with 1 m cells, so that int32 positions are exact.
    return gs.cloth_grid(2, 2, 1.0, 1.0, fix_left=True).build()


@pytest.mark.parametrize("field", ["x", "v"])
def test_int32_state_is_converted_to_the_params_dtype(scene, field):
    top, par, st = scene
    value = jnp.asarray(np.rint(np.asarray(getattr(st.particles, field))), jnp.int32)
    ints = replace_paths(st, {f"particles.{field}": value})
    traj = gs.simulate(top, par, ints, frames=2, substeps=2)
    assert traj.particles.x.dtype == traj.particles.v.dtype == par.particles.mass.dtype
    floats = replace_paths(st, {f"particles.{field}": value.astype(par.particles.mass.dtype)})
    np.testing.assert_array_equal(traj.particles.x, gs.simulate(top, par, floats, frames=2, substeps=2).particles.x)


def test_int32_state_under_jit(scene):
    top, par, st = scene
    ints = gs.particle_state(jnp.asarray(np.rint(np.asarray(st.particles.x)), jnp.int32), jnp.zeros((9, 3), jnp.int32))
    traj = jax.jit(lambda t, p, s: gs.simulate(t, p, s, frames=1, substeps=1))(top, par, ints)
    assert traj.particles.x.dtype == par.particles.mass.dtype and bool(jnp.isfinite(traj.particles.x).all())


def test_float32_state_with_float64_params(scene, x64):
    top, par, st = scene
    par64 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), par)
    traj = gs.simulate(top, par64, st, frames=1, substeps=1)  # st is float32
    assert traj.particles.x.dtype == jnp.float64


def test_complex_state_is_refused_by_name(scene):
    top, par, st = scene
    bad = gs.particle_state(st.particles.x, st.particles.v.astype(jnp.complex64))
    with pytest.raises(TypeError, match=r"State\.particles\.v has dtype complex64"):
        gs.simulate(top, par, bad, frames=1, substeps=1)
