"""Small pieces of system identification: names, assembling Params from theta, guesses, errors, control."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax import cloth_grid, sysid
from gradsim_jax.scenes.demos import control_cloth, hanging_cloth


def test_canonical_names_and_aliases():
    assert sysid.canonical("tri_ke") == sysid.canonical("cloth.tri_ke") == "stiffness"
    assert sysid.canonical("Friction") == "friction"
    assert sysid.canonical("edge_ke") == sysid.canonical("bend_ke") == "bending"
    with pytest.raises(ValueError, match="unknown quantity 'colour'"):
        sysid.canonical("colour")


def test_assemble_expands_scalars_inside_jit():
    exp = hanging_cloth(size=16, frames=2, cells=2, drag=0.1)
    theta = sysid.as_theta(exp, {"mass": 0.02, "stiffness": 300.0, "damping": 0.7, "drag": 0.3})

    params, state = jax.jit(lambda th: sysid.assemble(exp, th))(theta)
    free = exp.free_particles
    np.testing.assert_allclose(np.asarray(params.particles.mass)[free], 0.02, rtol=1e-6)
    np.testing.assert_allclose(params.cloth.tri_ke, 300.0)
    # The area stiffness keeps the scene's ratio to the stretch stiffness (1 here).
    np.testing.assert_allclose(params.cloth.tri_ka, 300.0)
    np.testing.assert_allclose(params.cloth.tri_kd, 0.7, rtol=1e-6)
    np.testing.assert_allclose(params.cloth.tri_drag, 0.3, rtol=1e-6)
    assert state is exp.state0 or np.array_equal(state.particles.x, exp.state0.particles.x)


def test_assemble_velocity_and_mesh_mass_scaling():
    topology, params, state0 = cloth_grid(1, 1, 0.1, 0.1).build()
    exp = sysid.Experiment(topology=topology, params=params, state0=state0, camera=None, faces=topology.cloth.triangles,
                           colors=None, lights=None, background=jnp.zeros(3), settings=None, frames=1,
                           substeps=1, frame_dt=0.01, theta=sysid.default_theta(topology, params, state0))
    v = jnp.ones((4, 3))
    p, s = sysid.assemble(exp, {"velocity": v, "mass": 0.3})
    np.testing.assert_allclose(s.particles.v, v)
    np.testing.assert_allclose(p.particles.mass, 0.3, rtol=1e-6)


def test_perturbed_guess_is_30_to_50_percent_off_and_seeded():
    theta = {"mass": jnp.float32(2.0), "stiffness": jnp.float32(100.0), "push": jnp.zeros((3, 3))}
    a = sysid.perturbed(theta, ("mass", "stiffness"), seed=3)
    b = sysid.perturbed(theta, ("mass", "stiffness"), seed=3)
    for n in ("mass", "stiffness"):
        assert float(a[n]) == float(b[n])
        assert 0.3 <= sysid.relative_error(n, a[n], theta[n]) <= 0.5


def test_velocity_error_metric():
    truth = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    est = truth + np.array([[0.01, 0.0, 0.0], [0.0, 0.0, 0.06]])
    assert sysid.relative_error("velocity", est, truth) == pytest.approx(0.02)
    assert sysid.relative_error("velocity", est, truth, np.array([True, False])) == pytest.approx(0.01)


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_control_finds_the_landing_velocity():
    """gradSim's control_cloth, tiny: the initial velocity that lands the cloth where the last frame shows."""
    v_true = np.array([1.0, 1.5, -0.4], np.float32)
    v_guess = np.zeros(3, np.float32)
    exp = control_cloth(v_true, v_guess, size=32, frames=15, cells=2)
    _, target = sysid.simulate_video(exp, {})
    v_est, result = sysid.fit_control(exp, target[-1], v_guess, iterations=100, learning_rate=0.15,
                                      progress=False)
    errors = sysid.final_position_error(exp, v_est, v_true)
    assert result.history["loss"][-1] < 1e-2 * result.history["loss"][0]
    assert errors["center_error_m"] < 0.02 * errors["travel_m"], (v_est, errors)


def test_experiment_is_frozen_and_a_second_call_does_not_trace_again():
    """Compiled functions live outside the Experiment (a frozen value), shared by equal structures."""
    import dataclasses

    from gradsim_jax.sysid import experiment

    exp = hanging_cloth(size=16, frames=3, cells=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        exp.frames = 4
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    guess = dict(truth, mass=truth["mass"] * 1.2)
    sysid.levenberg_marquardt(exp, target, guess, ("mass",), steps=1)
    sizes = {key: fn._cache_size() for key, fn in experiment._COMPILED.items()}
    # The video, and Levenberg-Marquardt's Jacobian (with one unknown it also evaluates the trial steps).
    assert any(key[0] == "video" for key in sizes) and sum(sizes.values()) >= 2
    # The same experiment again, and a copy with the same structure: nothing new is traced.
    for again in (exp, dataclasses.replace(exp, name="copy")):
        sysid.simulate_video(again, guess)
        sysid.levenberg_marquardt(again, target, guess, ("mass",), steps=1)
    assert {key: fn._cache_size() for key, fn in experiment._COMPILED.items()} == sizes


def test_a_frame_with_non_finite_vertices_renders_as_nan_and_its_loss_is_nan():
    """A blown-up simulation must not give a finite loss (the rasterizer by itself drops faces with NaN
    corners; the renderer turns a traced non-finite mesh into a NaN image)."""
    exp = hanging_cloth(size=16, frames=2, cells=2)
    x = np.array(sysid.vertices(exp, exp.theta))
    x[2, 0, 1] = np.nan
    video = np.asarray(jax.jit(lambda v: sysid.render_frames(exp, v))(jnp.asarray(x)))
    assert np.isfinite(video[:2]).all() and np.isnan(video[2]).all()
    assert float(sysid.image_loss("rgba", video[1:2], video[1:2])) == 0.0
    assert np.isnan(float(sysid.image_loss("rgba", video[2:3], video[1:2])))
