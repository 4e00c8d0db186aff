"""Checks of traced values: inside `jit` and `grad` a bad value is reported with its field and index.

Without them, a NaN or negative mass quietly freezes its particle (`first_nonfinite` sees nothing wrong)
and a NaN stiffness quietly turns the gradient into NaN.
"""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import gradsim_jax as gs
from gradsim_jax.physics import (
    TracedCheckError, checked_simulate, raise_if_error, scene_checks, trajectory_checks, validate_traced,
)
from gradsim_jax.physics import replace_paths


@pytest.fixture(scope="module")
def scene():
    return gs.cloth_grid(2, 2, 0.1, 0.1, fix_left=True, bend_ke=1.0).build()


def _rollout(top, par, st):
    return checked_simulate(top, par, st, frames=2, substeps=2)


_checked = jax.jit(_rollout)


@pytest.mark.parametrize("value,shown", [(jnp.nan, "nan"), (-0.1, "-0.1")])
def test_bad_mass_inside_jit_is_named(scene, value, shown):
    top, par, st = scene
    bad = replace_paths(par, {"particles.mass": par.particles.mass.at[5].set(value)})
    # The silent failure: the particle is frozen, the trajectory finite.
    plain = jax.jit(lambda t, p, s: gs.simulate(t, p, s, frames=2, substeps=2))(top, bad, st)
    assert gs.first_nonfinite(plain) is None
    err, traj = _checked(top, bad, st)
    assert err.get().startswith(f"Params.particles.mass[5] = {shown} is not a finite value >= 0")
    with pytest.raises(TracedCheckError, match=r"simulate: Params\.particles\.mass\[5\] = "):
        raise_if_error(err, "simulate")
    np.testing.assert_array_equal(traj.particles.x, plain.particles.x)


def test_good_scene_passes_and_matches_simulate(scene):
    top, par, st = scene
    err, traj = _checked(top, par, st)
    assert err.get() is None
    raise_if_error(err)  # nothing to raise
    np.testing.assert_allclose(traj.particles.x, gs.simulate(top, par, st, frames=2, substeps=2).particles.x, rtol=1e-6, atol=1e-7)


def test_nan_stiffness_gradient_is_named():
    top, par, st = gs.cloth_grid(1, 1, 0.1, 0.1, fix_left=True, bend_ke=0.0).build()

    def loss(p):
        return jnp.sum(gs.simulate(top, p, st, frames=1, substeps=1, checkpoint=False).particles.x[-1, :, 1])

    bad = replace_paths(par, {"cloth.tri_ke": par.cloth.tri_ke.at[1].set(jnp.nan)})

    # 1. validate_traced as a value: no checkify around, the error comes back as aux.
    def loss_and_error(p):
        return loss(p), validate_traced(top, p, st)

    value_and_grad = jax.jit(jax.value_and_grad(loss_and_error, has_aux=True))
    (_, err), grad = value_and_grad(bad)
    assert not np.isfinite(np.asarray(grad.particles.mass)).all()  # what goes unnoticed without the check
    assert err.get().startswith("Params.cloth.tri_ke[1] = nan is not a finite value >= 0")
    (_, err), grad = value_and_grad(par)
    assert err.get() is None and np.isfinite(np.asarray(grad.particles.mass)).all()

    # 2. checkify around grad, the checks inside the loss.
    def checked_loss(p):
        scene_checks(top, p, st)
        return loss(p)

    err, _ = jax.jit(checkify.checkify(jax.grad(checked_loss)))(bad)
    assert err.get().startswith("Params.cloth.tri_ke[1] = nan is not a finite value >= 0")


def test_traced_topology_and_state_are_checked(scene):
    top, par, st = scene
    check = jax.jit(validate_traced)
    bad_top = replace_paths(top, {"cloth.triangles": top.cloth.triangles.at[2, 1].set(40)})
    assert check(bad_top, par, st).get().startswith(
        "Topology.cloth.triangles[2] = [1, 40, 4] has an index out of range [0, 9)")
    bad_top = replace_paths(top, {"cloth.bend_edges": top.cloth.bend_edges.at[1, 3].set(top.cloth.bend_edges[1, 0])})
    assert check(bad_top, par, st).get().startswith(
        f"Topology.cloth.bend_edges[1] = {np.asarray(bad_top.cloth.bend_edges[1]).tolist()} repeats a particle")
    bad_state = gs.particle_state(st.particles.x, st.particles.v.at[7, 2].set(jnp.inf))
    assert check(top, par, bad_state).get().startswith("State.particles.v[7, 2] = inf is not finite")
    bad_par = replace_paths(par, {"world.gravity": par.world.gravity.at[1].set(jnp.nan), "world.ground_normal": jnp.zeros(3)})
    assert check(top, bad_par, st).get().startswith("Params.world.gravity[1] = nan is not finite")
    bad_par = replace_paths(par, {"particles.damping": jnp.asarray(-2.0)})
    assert check(top, bad_par, st).get().startswith("Params.particles.damping = -2 is not a finite value >= 0")
    assert check(top, replace_paths(par, {"world.ground_normal": jnp.zeros(3)}), st).get().startswith(
        "Params.world.ground_normal is the zero vector")


def test_divergence_inside_jit_names_frame_and_particle(scene):
    top, par, st = scene
    # A huge stiffness and one substep blow the cloth up within a few frames.
    stiff = replace_paths(par, {"cloth.tri_ke": par.cloth.tri_ke * 1e7, "cloth.tri_ka": par.cloth.tri_ka * 1e7})
    err, traj = jax.jit(lambda t, p, s: checked_simulate(t, p, s, frames=12, substeps=1))(top, stiff, st)
    found = gs.first_nonfinite(traj)
    assert found is not None
    assert err.get().startswith(
        f"simulation diverged: State.{found['quantity']} of particle {found['particle']} is not finite at "
        f"frame {found['frame']}")


def test_checks_under_vmap(scene):
    top, par, st = scene
    masses = jnp.stack([par.particles.mass, par.particles.mass.at[6].set(-1.0)])
    err = jax.jit(jax.vmap(lambda m: validate_traced(top, replace_paths(par, {"particles.mass": m}), st)))(masses)
    assert err.get().startswith("at mapped index 1: Params.particles.mass[6] = -1 is not a finite value >= 0")


def test_trajectory_checks_need_checkify(scene):
    top, par, st = scene
    traj = gs.simulate(top, par, st, frames=1, substeps=1)
    err, _ = checkify.checkify(lambda t: trajectory_checks(t) or t)(traj)
    assert err.get() is None
