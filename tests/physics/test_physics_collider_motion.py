"""Kinematic colliders (`physics.collider_motion`): the keyframed pose and its rates, particles carried by a moving
collider's friction and lifted by a rising one, rigid bodies lifted too, the video drawing the collider where it
is, float64 gradients by a keyframe against finite differences, and bad keyframes named."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.geometry import collider, combine, particles
from gradsim_jax.geometry.primitives import box_mesh
from gradsim_jax.physics import simulate
from gradsim_jax.physics.collider_motion import collider_pose
from gradsim_jax.physics.quaternion import quat_from_axis_angle, quat_rotate
from gradsim_jax.render.mesh import trajectory_vertices


def test_the_pose_interpolates_the_keys_and_its_rates_are_the_segments():
    with jax.enable_x64(True):
        spin = np.asarray(quat_from_axis_angle(jnp.array([0.0, 1.0, 0.0]), jnp.float64(1.2)))
        drum = collider("box", half_extents=(0.5, 0.1, 0.5),
                        keyframes=[(0.5, (0.0, 0.0, 0.0)), (1.5, (1.0, 2.0, -1.0), spin)])
        _, params, _ = combine(particles(np.zeros((1, 3)), mass=1.0), drum).build(dtype=jnp.float64)
        col = params.colliders
        x, q, v, w = collider_pose(col, jnp.float64(1.0))  # halfway
        np.testing.assert_allclose(np.asarray(x[0]), [0.5, 1.0, -0.5], atol=1e-12)
        np.testing.assert_allclose(np.asarray(v[0]), [1.0, 2.0, -1.0], atol=1e-12)
        np.testing.assert_allclose(np.asarray(w[0]), [0.0, 1.2, 0.0], atol=1e-12)  # 1.2 rad over 1 s about y
        half = np.asarray(quat_from_axis_angle(jnp.array([0.0, 1.0, 0.0]), jnp.float64(0.6)))
        np.testing.assert_allclose(np.asarray(q[0]), half, atol=1e-12)  # nlerp of a symmetric segment: the middle
        for t, where in ((0.0, [0.0, 0.0, 0.0]), (3.0, [1.0, 2.0, -1.0])):  # at rest outside the keys
            x, _, v, w = collider_pose(col, jnp.float64(t))
            np.testing.assert_allclose(np.asarray(x[0]), where, atol=1e-12)
            assert float(jnp.abs(v).max()) == 0.0 and float(jnp.abs(w).max()) == 0.0


def test_a_moving_platform_carries_a_particle_and_a_rising_one_lifts_it():
    """A particle resting on a box collider that slides at 0.5 m/s sticks to it by friction (its speed within
    1 % of the box's after the first 0.2 s); a box rising at 0.3 m/s lifts it at that speed."""
    dt, frames = 1.0 / 60.0, 40
    p = particles(np.array([[0.0, 0.1 + 0.01, 0.0]]), mass=0.05)
    slide = collider("box", half_extents=(2.0, 0.1, 2.0), ke=1e3, kd=10.0, kf=10.0, mu=0.8,
                     keyframes=[(0.0, (0.0, 0.0, 0.0)), (1.0, (0.5, 0.0, 0.0))])
    top, par, s0 = combine(p, slide).build()
    traj = simulate(top, par, s0, frames=frames, frame_dt=dt, substeps=16)
    v = np.asarray(traj.particles.v[12:55, 0])
    np.testing.assert_allclose(v[:, 0], 0.5, rtol=1e-2)
    rise = collider("box", half_extents=(2.0, 0.1, 2.0), ke=1e3, kd=10.0, kf=10.0, mu=0.8,
                    keyframes=[(0.0, (0.0, 0.0, 0.0)), (1.0, (0.0, 0.3, 0.0))])
    top, par, s0 = combine(p, rise).build()
    traj = simulate(top, par, s0, frames=frames, frame_dt=dt, substeps=16)
    y = np.asarray(traj.particles.x[:, 0, 1])
    sag = 0.05 * 9.81 / 1e3
    np.testing.assert_allclose(y[20:] - np.asarray(traj.colliders.position[20:, 0, 1]), 0.11 - sag, atol=2e-3)


def test_a_rising_box_lifts_a_rigid_body_and_the_video_draws_it_where_it_is():
    v, f = box_mesh(0.1, 0.1, 0.1)
    body = gs.rigid_body(v, f, mass=1.0, pos=(0.0, 0.2, 0.0), contact_ke=2e4, contact_kd=100.0)
    lift = collider("box", half_extents=(0.5, 0.1, 0.5), ke=2e4, kd=100.0, kf=50.0, mu=0.5,
                    keyframes=[(0.0, (0.0, 0.0, 0.0)), (0.5, (0.0, 0.2, 0.0))])
    top, par, s0 = combine(body, lift).build(gravity=(0.0, -9.81, 0.0))
    traj = simulate(top, par, s0, frames=30, frame_dt=1.0 / 30.0, substeps=32)
    y = np.asarray(traj.rigid.x[:, 0, 1])
    assert y[-1] > 0.39 and abs(y[-1] - (0.4 - 9.81 / (10 * 2e4))) < 1e-3  # on the raised box, its sag
    video = trajectory_vertices(top, par, traj)
    box = np.asarray(video[:, -8:])  # the collider's mesh: the last 8 render vertices
    times = np.arange(31) / 30.0
    np.testing.assert_allclose(box.mean(axis=1)[:, 1], np.clip(times / 0.5, 0.0, 1.0) * 0.2, atol=1e-5)


def test_gradient_by_a_keyframe_matches_finite_differences(x64):
    """d (a particle's final height) / d (the rising box's last key height), and / d its friction, through a
    carried particle (float64; central differences)."""
    p = particles(np.array([[0.0, 0.11, 0.0]]), v=np.array([[0.3, 0.0, 0.0]]), mass=0.05)
    rise = collider("box", half_extents=(2.0, 0.1, 2.0), ke=1e3, kd=10.0, kf=10.0, mu=0.3,
                    keyframes=[(0.0, (0.0, 0.0, 0.0)), (0.5, (0.0, 0.2, 0.0))])
    top, par, s0 = combine(p, rise).build(dtype=jnp.float64)

    def final(key_y, mu):
        col = dataclasses.replace(par.colliders, key_position=par.colliders.key_position.at[0, 1, 1].set(key_y),
                                  mu=mu)
        x = simulate(top, dataclasses.replace(par, colliders=col), s0, frames=12, frame_dt=1 / 30, substeps=16)
        return x.particles.x[-1, 0, 1] + x.particles.x[-1, 0, 0]

    args = (jnp.float64(0.2), par.colliders.mu)
    grads = jax.jit(jax.grad(final, argnums=(0, 1)))(*args)
    f = jax.jit(final)
    for i, g in enumerate(grads):
        h = 1e-6
        up = list(args); up[i] = args[i] + h
        down = list(args); down[i] = args[i] - h
        numeric = (f(*up) - f(*down)) / (2 * h)
        np.testing.assert_allclose(np.asarray(g), np.asarray(numeric), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("keys,match", [
    ([(1.0, (0.0, 0.0, 0.0)), (0.5, (0.0, 1.0, 0.0))], "keyframe times must increase"),
    ([(0.0, (0.0, np.nan, 0.0))], "must be finite"),
    ([(0.0, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))], "nonzero quaternion"),
    ([], "at least one"),
    ([(0.0,)], r"\(time, position\)"),
])
def test_bad_keyframes_are_named(keys, match):
    with pytest.raises(ValueError, match=match):
        collider("sphere", radius=0.1, keyframes=keys)


def test_a_posed_rotation_turns_the_collider():
    """A box turned a quarter about y by its keys: at the end, a point on its local +x face lies on the world
    -z side (the rotation is the body-to-world quaternion)."""
    quarter = np.asarray(quat_from_axis_angle(jnp.array([0.0, 1.0, 0.0]), jnp.float32(np.pi / 2)))
    drum = collider("box", half_extents=(0.5, 0.1, 0.1),
                    keyframes=[(0.0, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)), (1.0, (0.0, 0.0, 0.0), quarter)])
    top, par, s0 = combine(particles(np.zeros((1, 3)), mass=0.0), drum).build()
    traj = simulate(top, par, s0, frames=3, frame_dt=0.5, substeps=2)
    q = traj.colliders.rotation[-1, 0]
    np.testing.assert_allclose(np.asarray(quat_rotate(q, jnp.array([0.5, 0.0, 0.0]))), [0.0, 0.0, -0.5], atol=1e-6)
