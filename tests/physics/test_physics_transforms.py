"""jit, vmap, dtypes and recompilation of the simulator."""


import numpy as np
import jax
import jax.numpy as jnp
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import replace_paths


def _scene(dtype=None):
    scene = gs.cloth_grid(3, 2, 0.1, 0.1, pos=(0, 0.5, 0), mass=0.05, tri_ke=100.0, tri_ka=100.0, tri_kd=0.1,
                          bend_ke=1.0, tri_drag=0.1, fix_top=True)
    # contact soft enough for these coarse steps (the defaults would warn: ContactWarning)
    return scene.build(ground=True, contact_ke=1e3, contact_kd=10.0, dtype=dtype)


def _hanging():
    return gs.cloth_grid(2, 2, 0.1, 0.1, mass=0.05, tri_ke=100.0, tri_ka=100.0, fix_top=True).build()


def _final_and_grad(top, st, traces):
    """A jitted rollout's final positions (4 frames of 8 substeps; appends to `traces` when traced) and the
    jitted gradient of their sum: the same programs for the two tests below (compiled once: the suite's
    persistent cache)."""
    @jax.jit
    def final(p, s):
        traces.append(1)
        return gs.simulate(top, p, s, frames=4, substeps=8).particles.x[-1]

    return final, jax.jit(jax.grad(lambda p: jnp.sum(final(p, st))))


def test_second_jit_call_with_new_params_does_not_recompile():
    top, par, st = _hanging()
    traces = []
    final, grad = _final_and_grad(top, st, traces)
    a = final(par, st)
    grad(par)
    compiled = len(traces)
    b = final(replace_paths(par, {"cloth.tri_ke": par.cloth.tri_ke * 2.0, "particles.mass": par.particles.mass * 1.5, "cloth.bend_ke": par.cloth.bend_ke * 3}), st)
    grad(replace_paths(par, {"world.gravity": par.world.gravity * 0.5}))
    assert len(traces) == compiled  # new values, same shapes: no new trace
    assert not np.allclose(a, b)


def test_vmap_over_params_equals_a_loop():
    top, par, st = _scene()
    scales = jnp.array([0.5, 1.0, 2.0])
    batch = jax.vmap(lambda s: replace_paths(par, {"cloth.tri_ke": par.cloth.tri_ke * s, "particles.mass": par.particles.mass * s}))(scales)
    run = lambda p: gs.simulate(top, p, st, frames=5, substeps=8).particles.x[-1]  # noqa: E731
    batched = jax.jit(jax.vmap(run))(batch)
    looped = [jax.jit(run)(jax.tree.map(lambda leaf: leaf[i], batch)) for i in range(3)]
    np.testing.assert_allclose(batched, np.stack(looped), rtol=1e-5, atol=1e-6)
    assert not np.allclose(looped[0], looped[2])


def test_float32_keeps_dtype():
    top, par, st = _hanging()
    traj = gs.simulate(top, par, st, frames=3, substeps=4)
    assert traj.particles.x.dtype == jnp.float32 and traj.particles.v.dtype == jnp.float32
    g = _final_and_grad(top, st, [])[1](par)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(g))


def test_float64_keeps_dtype_and_agrees_with_float32(x64):
    top, par, st = _scene()
    assert par.cloth.tri_ke.dtype == jnp.float64
    traj64 = gs.simulate(top, par, st, frames=3, substeps=4)
    assert traj64.particles.x.dtype == jnp.float64
    top32, par32, st32 = _scene(dtype=jnp.float32)
    traj32 = gs.simulate(top32, par32, st32, frames=3, substeps=4)
    assert traj32.particles.x.dtype == jnp.float32
    np.testing.assert_allclose(traj32.particles.x, traj64.particles.x, atol=1e-5)


@pytest.mark.slow  # tests/physics/test_physics_checkpoint.py checks every policy in float64 in make test
def test_checkpointing_does_not_change_values_or_gradients():
    top, par, st = _scene()

    @jax.jit
    def grads(p):
        loss = lambda p, c: jnp.sum(gs.simulate(top, p, st, frames=4, substeps=8, checkpoint=c).particles.x[-1] ** 2)  # noqa
        return jax.grad(loss)(p, True), jax.grad(loss)(p, False)

    with_ckpt, without = grads(par)
    for a, b in zip(jax.tree.leaves(with_ckpt), jax.tree.leaves(without)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_policy_control_is_called_per_frame():
    top, par, st = _scene()
    push = jnp.zeros_like(st.particles.x).at[:, 0].set(0.02)

    def policy(frame, state):
        return gs.Control(particles=gs.physics.ParticleControl(force=push * (frame < 2)))

    traj = gs.simulate(top, par, st, frames=4, substeps=8, control=policy)
    still = gs.simulate(top, par, st, frames=4, substeps=8)
    assert float(jnp.mean(traj.particles.x[-1, :, 0] - still.particles.x[-1, :, 0])) > 0.0
