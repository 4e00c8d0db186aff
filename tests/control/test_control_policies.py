"""Control: policy features and initialization, actuators, gradients of a policy rollout against finite
differences (FEM box, cloth), a policy trained on a tiny task, bitwise resume, the random baseline."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.control import (
    Actuators, ComFeatures, PhasePolicy, PolicyParams, apply_policy, bend_rest, init_policy, particle_force,
    phase_features, policy_outputs, random_policy_baseline, simulate_policy, tet_activation, train_policy,
    tri_activation,
)
from gradsim_jax.physics import ClothControl, Control, particle_forces, replace_paths

TARGET = (0.3, 0.0, 0.0)


def test_phase_features_values():
    f = phase_features(0.25, (1.0, 2.0))
    np.testing.assert_allclose(f, [1.0, 0.0, 0.0, -1.0, 1.0], atol=1e-6)  # sin, sin, cos, cos, 1
    assert phase_features(0.3, (1.0,), constant=False).shape == (2,)
    policy = PhasePolicy(frequencies=(1.0, 3.0), com=ComFeatures(particles=(0, 1), target=(1.0, 0.0, 0.0),
                                                                 length_scale=2.0, velocity_scale=0.5))
    assert policy.num_inputs == 11
    st = gs.particle_state(jnp.array([[0.0, 0.0, 0.0], [2.0, 2.0, 0.0]]), jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    h = policy.features(0.0, st)
    np.testing.assert_allclose(h[5:], [0.0, 0.5, 0.0, 1.0, 0.0, 0.0], atol=1e-6)


def test_init_is_deterministic_and_apply_is_bounded():
    a = init_policy(jax.random.key(3), 5, 4, scale=0.5)
    b = init_policy(jax.random.key(3), 5, 4, scale=0.5)
    c = init_policy(jax.random.key(4), 5, 4, scale=0.5)
    assert a.w.shape == (4, 5) and a.b.shape == (4,) and a.w_hidden is None
    assert np.array_equal(a.w, b.w) and not np.array_equal(a.w, c.w)
    deep = init_policy(jax.random.key(3), 5, 4, hidden=8)
    assert deep.w_hidden.shape == (8, 5) and deep.w.shape == (4, 8) and deep.num_inputs == 5
    big = PolicyParams(w=jnp.full((2, 3), 100.0), b=jnp.array([0.0, -1e3]))
    np.testing.assert_allclose(apply_policy(big, jnp.ones(3), 0.7), [0.7, -0.7])


def test_actuators_map_outputs_to_controls():
    out = jnp.array([0.5, -1.0])
    ctrl = tet_activation(4, [0, 1, 1, -1], scale=2.0).control(out)
    np.testing.assert_allclose(ctrl.fem.tet_activation, [1.0, -2.0, -2.0, 0.0])
    force = particle_force(3, [1, 0, -1], scale=0.1).control(jnp.arange(6.0))
    np.testing.assert_allclose(force.particles.force, [[0.3, 0.4, 0.5], [0.0, 0.1, 0.2], [0.0, 0.0, 0.0]], atol=1e-7)
    both = Actuators((tri_activation(2, [0, 0]), bend_rest(3, [0, 0, 0], scale=0.5)))
    ctrl = both.control(out)
    assert both.outputs == 2
    np.testing.assert_allclose(ctrl.cloth.tri_activation, [0.5, 0.5])
    np.testing.assert_allclose(ctrl.cloth.bend_rest_offset, [-0.5, -0.5, -0.5])
    with pytest.raises(ValueError, match="takes 2 outputs"):
        both.control(jnp.ones(3))


def test_bend_rest_offset_control_shifts_the_rest_angle(x64):
    top, par, st = gs.cloth_grid(2, 1, 0.1, 0.1, bend_ke=0.5).build()
    e = top.cloth.bend_edges.shape[0]
    offset = jnp.linspace(-0.3, 0.4, e)
    x = st.particles.x + 0.01 * jnp.asarray(np.random.default_rng(0).standard_normal(st.particles.x.shape))
    forces = jax.jit(particle_forces)
    with_control = forces(top, par, x, st.particles.v, Control(cloth=ClothControl(bend_rest_offset=offset)))
    shifted = forces(top, replace_paths(par, {"cloth.bend_rest": par.cloth.bend_rest + offset}), x, st.particles.v)
    np.testing.assert_allclose(with_control, shifted, rtol=1e-12, atol=1e-12)
    assert float(jnp.abs(with_control - forces(top, par, x, st.particles.v)).max()) > 1e-3


def _check_fd(loss, pp, rng, rtol=1e-5):
    """Directional derivatives of `loss` w.r.t. each field of pp: analytic (jax.grad) vs central difference."""
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    grad = value_and_grad(pp)[1]
    failures = []
    for name in ("w", "b", "w_hidden", "b_hidden"):
        value = getattr(pp, name)
        if value is None:
            continue
        direction = rng.standard_normal(value.shape)
        analytic = float(np.sum(np.asarray(getattr(grad, name)) * direction))
        h = 1e-6

        def shifted(s, name=name, value=value, direction=direction):
            return float(value_and_grad(replace_paths(pp, {name: value + s * h * direction}))[0])

        numeric = (shifted(1.0) - shifted(-1.0)) / (2 * h)
        if not (analytic != 0.0 and abs(analytic - numeric) <= rtol * abs(numeric)):
            failures.append((name, analytic, numeric))
    assert not failures, failures


def test_fem_policy_gradient_matches_finite_differences(x64):
    vertices, tets = gs.box_tets((1, 1, 1), (0.1, 0.1, 0.1), pattern=5)
    top, par, st = gs.soft_body(vertices, tets, k_mu=1e4, k_lambda=1e4, k_damp=1.0).build(gravity=(0.0, 0.0, 0.0))
    n = st.particles.x.shape[0]
    policy = PhasePolicy(frequencies=(5.0,), amplitude=0.3,
                         com=ComFeatures(particles=tuple(range(n)), target=(0.05, 0.05, 0.05), length_scale=0.1))
    act = tet_activation(len(tets), [0, 1, 1, 0, 1])
    pp = init_policy(jax.random.key(0), policy.num_inputs, act.outputs, scale=1.0)
    pp = PolicyParams(w=pp.w, b=jnp.array([0.1, -0.2]))
    rng = np.random.default_rng(1)
    weights = jnp.asarray(rng.standard_normal((n, 3)))

    def loss(p):
        traj = simulate_policy(top, par, st, p, policy, act, frames=4, substeps=5, frame_dt=0.01)
        return jnp.sum(weights * traj.particles.x[-1]) + 0.01 * jnp.sum(weights * traj.particles.v[-1])

    _check_fd(loss, pp, rng)


def test_cloth_policy_gradient_matches_finite_differences(x64):
    top, par, st = gs.cloth_grid(2, 1, 0.1, 0.1, fix_left=True, mass=0.05, tri_kd=1.0, bend_ke=0.05).build()
    t, e = top.cloth.triangles.shape[0], top.cloth.bend_edges.shape[0]
    act = Actuators((tri_activation(t, np.arange(t) % 2, scale=0.5), bend_rest(e, scale=0.4)))
    policy = PhasePolicy(frequencies=(2.0, 4.0), amplitude=1.0)
    pp = init_policy(jax.random.key(1), policy.num_inputs, act.outputs, scale=1.0, hidden=3)
    rng = np.random.default_rng(2)
    weights = jnp.asarray(rng.standard_normal(st.particles.x.shape))

    def loss(p):
        traj = simulate_policy(top, par, st, p, policy, act, frames=4, substeps=8, frame_dt=0.02)
        return jnp.sum(weights * traj.particles.x[-1]) + jnp.mean(policy_outputs(p, policy, traj, frame_dt=0.02) ** 2)

    _check_fd(loss, pp, rng)


def _reach_task():
    """A 0.1 kg particle pushed by a force policy (phase + its own position and velocity) to reach TARGET."""
    top, par, st = gs.particles(np.zeros((1, 3)), mass=0.1).build(gravity=(0.0, 0.0, 0.0))
    policy = PhasePolicy(frequencies=(1.0,), com=ComFeatures(particles=(0,), target=TARGET, length_scale=0.3))
    act = particle_force(1, scale=0.5)

    def rollout(p):
        return simulate_policy(top, par, st, p, policy, act, frames=20, substeps=4, frame_dt=1 / 30)

    def loss(traj):
        miss = traj.particles.x[-1, 0] - jnp.asarray(TARGET)
        return jnp.sum(miss ** 2) + 0.1 * jnp.sum(traj.particles.v[-1, 0] ** 2)

    pp0 = init_policy(jax.random.key(0), policy.num_inputs, act.outputs, scale=0.3)
    return rollout, loss, pp0


def test_trained_policy_reaches_the_target():
    rollout, loss, pp0 = _reach_task()
    result = train_policy(loss, pp0, rollout, iterations=40, learning_rate=0.1, progress=False)
    first = result.history["loss"][0]
    assert result.loss < first / 5.0, (first, result.loss)
    baseline = random_policy_baseline(jax.random.key(1), 4, lambda p: loss(rollout(p)), inputs=pp0.num_inputs,
                                      outputs=pp0.num_outputs, scale=0.3)
    assert baseline["values"].shape == (4,) and baseline["best"] <= baseline["mean"]
    assert result.loss < baseline["best"]


def test_resume_equals_an_uninterrupted_run(tmp_path):
    rollout, loss, pp0 = _reach_task()
    kwargs = dict(learning_rate=0.1, progress=False, key=jax.random.key(5))
    straight = train_policy(loss, pp0, rollout, iterations=6, **kwargs)
    train_policy(loss, pp0, rollout, iterations=3, checkpoint_dir=str(tmp_path), **kwargs)
    resumed = train_policy(loss, pp0, rollout, iterations=6, checkpoint_dir=str(tmp_path), resume=True, **kwargs)
    assert resumed.resume["from_iteration"] == 3
    assert np.array_equal(resumed.params.w, straight.params.w) and np.array_equal(resumed.params.b, straight.params.b)
    assert resumed.history["loss"] == straight.history["loss"] and resumed.loss == straight.loss
