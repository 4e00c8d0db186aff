"""Checkpoint policies of `simulate`: same trajectory and gradient (float64), memory ordered as documented."""

import numpy as np
import jax
import jax.numpy as jnp
import pytest

import gradsim_jax as gs
from gradsim_jax.physics.checkpointing import NestedSqrt, NoCheckpoint, PerFrame, PerSubstep, checkpoint_policy

FRAMES, SUBSTEPS = 7, 4  # 7 frames: sqrt segments of 3 frames, two whole and a remainder of one


def _scene():
    cloth = gs.cloth_grid(2, 1, 0.1, 0.1, pos=(0.0, 1.0, 0.0), vel=(0.3, 0.1, -0.4), mass=0.1,
                          tri_ke=60.0, tri_ka=80.0, tri_kd=0.5, bend_ke=0.0, fix_top=True)
    return cloth.build()


def _loss(top, par, st, checkpoint, frames=FRAMES, substeps=SUBSTEPS):
    def loss(v0, tri_ke):
        p = gs.physics.replace_paths(par, {"cloth.tri_ke": tri_ke})
        traj = gs.simulate(top, p, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps,
                           frame_dt=0.01, checkpoint=checkpoint)
        return jnp.sum(traj.particles.x[1:] ** 2 * jnp.arange(1.0, frames + 1)[:, None, None])

    return loss


def test_policies_give_equal_trajectories_and_gradients(x64):
    top, par, st = _scene()
    args = (st.particles.v, par.cloth.tri_ke)
    results = {str(c): jax.jit(jax.value_and_grad(_loss(top, par, st, c), argnums=(0, 1)))(*args)
               for c in ("frame", "none", "substep", "sqrt", NestedSqrt(segment=2), PerFrame(remat_substeps=False))}
    value, (g_v, g_ke) = results["frame"]
    assert float(jnp.abs(g_v).max()) > 0 and float(jnp.abs(g_ke).max()) > 0
    for c, (val, (gv, gk)) in results.items():
        np.testing.assert_allclose(val, value, rtol=1e-13, err_msg=c)
        np.testing.assert_allclose(gv, g_v, rtol=1e-10, atol=1e-14, err_msg=c)
        np.testing.assert_allclose(gk, g_ke, rtol=1e-10, atol=1e-14, err_msg=c)


def test_policy_names_and_segment_lengths():
    assert checkpoint_policy(True) == PerFrame() and checkpoint_policy("frame") == PerFrame()
    assert checkpoint_policy(False) == NoCheckpoint() and checkpoint_policy("none") == NoCheckpoint()
    assert checkpoint_policy("sqrt") == NestedSqrt() and checkpoint_policy("substep") == PerSubstep()
    assert [NestedSqrt().segment_length(t) for t in (1, 2, 4, 5, 9, 10, 10000)] == [1, 2, 2, 3, 3, 4, 100]
    with pytest.raises(ValueError, match="checkpoint must be one of"):
        checkpoint_policy("segments")
    with pytest.raises(ValueError, match="positive int"):
        NestedSqrt(segment=0)


def test_gradient_memory_ordered_as_documented():
    """XLA's temporary buffers of the compiled gradient: storing every substep costs more than storing
    frames, and nested segments cost less than frames when the loss reads the last frame only."""
    top, par, st = gs.cloth_grid(10, 10, 0.1, 0.1, mass=0.1, tri_ke=60.0, tri_ka=80.0, tri_kd=0.5, bend_ke=0.0,
                                 fix_top=True).build()
    frames, substeps = 64, 2  # states of 121 particles: 64 of them (frame) against 8 + 8 (sqrt)

    def temp_bytes(checkpoint):
        def loss(v0):
            traj = gs.simulate(top, par, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps,
                               frame_dt=0.01, checkpoint=checkpoint)
            return jnp.sum(traj.particles.x[-1] ** 2)

        compiled = jax.jit(jax.grad(loss)).lower(st.particles.v).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    none, frame, sqrt = temp_bytes("none"), temp_bytes("frame"), temp_bytes("sqrt")
    assert none > 2 * frame, (none, frame)
    assert sqrt < frame, (sqrt, frame)
