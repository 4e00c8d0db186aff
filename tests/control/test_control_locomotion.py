"""Locomotion demos (`scenes.locomotion`) and control-fem at reduced size: the bell mesh and the actuator
groups, the mechanisms the policies exploit (a hand-made gait walks either way, drag turns strokes into net
motion and without it the centre of mass stays put), and a few Adam steps on each demo's physics beating the
mean of random policies (short horizons, near targets), and the state term's target read from the target
image (`pose_from_image`).

Cost: one gradient compile per task, so the training tests minimize the demos' state term (the final
centre-of-mass error) and leave out their image term, whose gradient the control_loss tests and the (slow)
reduced CLI runs cover; the full demos and their measured numbers are in the README."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gradsim_jax.control import PolicyParams, init_policy, simulate_policy
from gradsim_jax.geometry import interior_edges
from gradsim_jax.geometry.tet_shapes import walker_tets
from gradsim_jax.geometry.tets import tet_volumes
from gradsim_jax.physics import replace_paths
from gradsim_jax.scenes.control import gear_task
from gradsim_jax.scenes.locomotion import (
    bell_hinge_groups, jellyfish_bell, jellyfish_task, walker_groups, walker_task,
)
from gradsim_jax.sysid.control import place_rigidly, pose_from_image
from gradsim_jax.sysid.experiment import render_frames


def test_jellyfish_bell_is_a_valid_outward_mesh():
    rings, segments = 3, 8
    x, tris = jellyfish_bell(0.1, rings, segments, 100.0)
    assert x.shape == (1 + rings * segments, 3) and tris.shape == (segments * (2 * rings - 1), 3)
    assert tris.dtype == np.int32 and tris.min() == 0 and tris.max() == len(x) - 1
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 0.1)
    np.testing.assert_allclose(x[1 + (rings - 1) * segments:, 1], 0.1 * np.cos(np.deg2rad(100.0)), atol=1e-12)
    normal = np.cross(x[tris[:, 1]] - x[tris[:, 0]], x[tris[:, 2]] - x[tris[:, 0]])
    assert np.all(np.linalg.norm(normal, axis=1) > 1e-4)  # no degenerate triangle
    assert np.all(np.einsum("ij,ij->i", normal, x[tris].mean(1)) > 0)  # wound outward
    # A disk-like surface: every edge used once (the rim) or twice, each interior edge in opposite directions.
    directed = {(int(a), int(b)) for t in tris for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0]))}
    assert len(directed) == 3 * len(tris)
    rim = [e for e in directed if (e[1], e[0]) not in directed]
    assert len(rim) == segments and all(min(e) > (rings - 1) * segments for e in rim)
    groups = bell_hinge_groups(interior_edges(tris), segments)
    assert np.bincount(groups[groups >= 0]).tolist() == [segments] * (rings - 1)
    for bad in (dict(radius=0.0), dict(rings=0), dict(segments=2), dict(opening=180.0)):
        with pytest.raises(ValueError, match="jellyfish_bell"):
            jellyfish_bell(**bad)


def test_walker_groups_split_legs_and_body():
    x, t = walker_tets(body=(4, 1, 2), leg=(1, 1, 1), legs=4, cell_size=0.05, pattern=5)
    assert np.all(tet_volumes(x, t) > 0)
    groups = walker_groups(x, t, 0.05)
    counts = np.bincount(groups)
    assert counts.tolist() == [5, 5, 5, 5, 20, 20]  # one 5-tet cell per leg, the body in halves
    c = x[t].mean(1)
    assert np.all(c[groups == 3, 0] > 0) and np.all(c[groups == 3, 2] > 0) and np.all(c[groups < 4, 1] < 0.05)


@pytest.fixture(scope="module")
def walker():
    return walker_task(size=16, frames=30, offset=0.05)


@pytest.fixture(scope="module")
def jellyfish():
    return jellyfish_task(size=16, frames=20, offset=0.015)


def _gait(phase: float, gain: float = 5.0) -> PolicyParams:
    """A hand-made gait on the 1 Hz features (sin, cos) of `walker_task`'s policy: the legs alternate
    (front sin, back -sin) and both body halves follow at `phase` rad behind."""
    w = np.zeros((6, 7), np.float32)
    w[[2, 3], 0], w[[0, 1], 0] = gain, -gain
    w[[4, 5], 0], w[[4, 5], 3] = gain * np.cos(phase), gain * np.sin(phase)
    return PolicyParams(w=jnp.asarray(w), b=jnp.zeros(6, jnp.float32))


def test_a_hand_made_gait_walks_both_ways(walker):
    com_x = jax.jit(lambda p: jnp.mean(walker.rollout(p).particles.x[-1, :, 0]))
    start = float(np.mean(walker.exp.state0.particles.x[:, 0]))
    forward, backward = (float(com_x(_gait(phase))) - start for phase in (np.pi / 2, -np.pi / 2))
    # In 1 s (one stride): several mm, one way or the other depending on the phase (the direction is the
    # gait's; the trained demo walks 0.25 m in 2 s).
    assert abs(forward) > 5e-3 and abs(backward) > 5e-3 and forward * backward < 0, (forward, backward)


def test_drag_turns_strokes_into_net_motion(jellyfish):
    e = jellyfish.exp
    stroke = init_policy(jax.random.key(0), jellyfish.policy.num_inputs, jellyfish.actuator.outputs, scale=1.0)
    mass = e.params.particles.mass / jnp.sum(e.params.particles.mass)

    @jax.jit
    def com(params):  # the mass-weighted centre of mass [frames + 1, 3] m
        x = simulate_policy(e.topology, params, e.state0, stroke, jellyfish.policy, jellyfish.actuator,
                            frames=e.frames, substeps=e.substeps, frame_dt=e.frame_dt).particles.x
        return jnp.einsum("n,tni->ti", mass, x)

    still = np.asarray(com(replace_paths(e.params, {"cloth.tri_drag": 0.0 * e.params.cloth.tri_drag})))
    swims = np.asarray(com(e.params))
    # Without drag nothing external acts: the bell deforms but its centre of mass stays put.
    np.testing.assert_allclose(still, np.broadcast_to(still[0], still.shape), atol=2e-5)
    assert np.linalg.norm(swims[-1] - swims[0]) > 2e-3


def _trained_vs_random(task, iterations: int = 8, learning_rate: float = 0.1):
    """(trained final centre-of-mass error, mean of 4 random policies' errors) in m: Adam on the squared
    error from `init_policy(key 0, task.init_scale)`; the random policies as `run_demo` draws them (scale 1).
    One compiled function serves the training and the baseline."""
    target = jnp.asarray(task.target_com, jnp.float32)

    def objective(pp):
        return jnp.sum(jnp.square(jnp.mean(task.rollout(pp).particles.x[-1], axis=0) - target)) / 0.01

    value_and_grad = jax.jit(jax.value_and_grad(objective))
    inputs, outputs = task.policy.num_inputs, task.actuator.outputs
    pp = init_policy(jax.random.key(0), inputs, outputs, scale=task.init_scale)
    opt = optax.adam(learning_rate)
    state = opt.init(pp)
    best = np.inf
    for _ in range(iterations):
        value, grad = value_and_grad(pp)
        best = min(best, float(value))
        updates, state = opt.update(grad, state, pp)
        pp = optax.apply_updates(pp, updates)
    best = min(best, float(value_and_grad(pp)[0]))
    randoms = [float(value_and_grad(init_policy(k, inputs, outputs, scale=1.0))[0])
               for k in jax.random.split(jax.random.key(1), 4)]
    return 0.1 * np.sqrt(best), float(np.mean(0.1 * np.sqrt(randoms)))


@pytest.mark.parametrize("name", ["control-walker", pytest.param("control-jellyfish", marks=pytest.mark.slow),
                                  pytest.param("control-fem", marks=pytest.mark.slow)])  # suite time
def test_training_beats_random_policies(name, request):
    if name == "control-fem":
        task = gear_task(size=16, frames=12, offset=0.2)
    else:
        task = request.getfixturevalue("walker" if name == "control-walker" else "jellyfish")
    trained, random_mean = _trained_vs_random(task)
    assert trained < 0.5 * random_mean, (trained, random_mean)


@pytest.mark.slow  # suite time (CI's 10 minutes): an end-to-end fit; `make test-all` runs it
def test_the_state_target_is_read_from_the_target_image(jellyfish, walker):
    # The demos' state term pulls to where the target image shows the body, not to the scene's truth.
    pose = jellyfish.target_pose
    assert np.linalg.norm(jellyfish.state_target - np.asarray(jellyfish.target_com)) < 1e-3  # 15 mm up, 16 px
    assert pose["loss"] < 1e-2 * pose["initial_loss"]
    # A target the demos do not make: the walker turned by 0.3 rad and moved 4 cm, rendered at 16 px.
    e = walker.exp
    x0 = jnp.asarray(e.state0.particles.x)
    shift = jnp.asarray([0.04, 0.0, -0.02], x0.dtype)
    image = jax.jit(lambda x: render_frames(e, x[None])[0])(place_rigidly(x0, shift, jnp.asarray(0.3, x0.dtype)))
    found = pose_from_image(e, x0, np.asarray(image), iterations=300)
    assert abs(found["yaw"] - 0.3) < 0.02
    np.testing.assert_allclose(found["translation"], np.asarray(shift), atol=2e-3)
