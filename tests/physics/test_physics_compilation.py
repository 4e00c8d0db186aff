"""gs.jit: jax.jit with gradsim-jax's XLA options (`gradsim_jax.compilation`)."""

import os

import jax
import jax.numpy as jnp
import numpy as np

import gradsim_jax as gs
import pytest

from gradsim_jax.compilation import COMPILER_OPTIONS, DEFAULT_OPTIONS, OPTIONS_VARIABLE, jit, options_from_environment


def _hanging_cloth_loss():
    topology, params, state0 = gs.cloth_grid(2, 2, 0.1, 0.1, fix_top=True, tri_ke=1e3, tri_ka=1e3,
                                             tri_kd=1.0).build()

    def loss(v0):
        traj = gs.simulate(topology, params, gs.particle_state(state0.particles.x, v0), frames=2, substeps=4)
        return jnp.mean(jnp.sum(traj.particles.x[-1] ** 2, axis=-1))

    return loss, state0.particles.v + 0.1


def test_jit_agrees_with_plain_jit_on_a_rollout_and_its_gradient():
    loss, v0 = _hanging_cloth_loss()
    ours = jit(jax.value_and_grad(loss))(v0)
    plain = jax.jit(jax.value_and_grad(loss))(v0)
    np.testing.assert_allclose(ours[0], plain[0], rtol=1e-5)
    np.testing.assert_allclose(ours[1], plain[1], rtol=1e-4, atol=1e-7)
    assert gs.jit is jit


def test_jit_compiles_with_the_options_and_merges_the_callers():
    # XLA refuses an unknown or malformed option when compiling, so compiling proves the options are valid.
    compiled = jit(lambda x: jnp.sum(x * x, axis=0)).lower(jnp.ones((3, 5))).compile()
    np.testing.assert_allclose(compiled(jnp.ones((3, 5))), np.full(5, 3.0))
    assert DEFAULT_OPTIONS == {"xla_cpu_experimental_ynn_fusion_type": ""}
    assert COMPILER_OPTIONS == {**DEFAULT_OPTIONS, **options_from_environment(os.environ.get(OPTIONS_VARIABLE))}
    merged = jit(lambda x: x + 1, compiler_options={"xla_cpu_enable_fast_math": False}, static_argnums=())
    assert float(merged(jnp.float32(1.0))) == 2.0


def test_options_from_the_environment_are_checked():
    assert options_from_environment(None) == {} and options_from_environment("") == {}
    assert options_from_environment('{"xla_cpu_use_fusion_emitters": false}') == {
        "xla_cpu_use_fusion_emitters": False}
    for bad in ("xla_cpu_use_fusion_emitters=false", "[1, 2]", '{"a": [1]}'):
        with pytest.raises(ValueError, match="GRADSIM_JAX_COMPILER_OPTIONS"):
            options_from_environment(bad)
