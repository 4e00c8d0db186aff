"""Kinematic colliders: a pose given by keyframes (a gripper's path, a rotating drum), and the state branch that
carries it so that a video shows the collider where it was.

Keyframes live in `ColliderParams` (data, so a fit may differentiate them): key_times [K] s (increasing, shared by
all colliders), key_position [k, K, 3] m and key_rotation [k, K, 4] (w, x, y, z). Between two keys the position
is interpolated linearly and the rotation by normalized linear interpolation of the quaternions (the second
taken on the first's side), so the collider's velocity is constant over a segment: (p1 - p0) / (t1 - t0), and
its angular velocity the axis-angle of q1 q0^-1 over (t1 - t0). Before the first key and after the last the
collider rests at that key's pose (zero velocity). A static collider in a scene with moving ones repeats its
pose at every key.

At the start of each step the integrator poses the colliders at the step's time t (`posed`): position, rotation,
velocity and angular velocity in `ColliderParams`, which the contact terms read. The contact's damping and
friction act on the velocity relative to the collider's surface, v - (velocity + omega x (x - position)), so a
lifting rod carries a cloth and a rotating drum drags it. After the step the state's `ColliderState` holds the
pose at t + dt (the renderer draws the colliders from it, `render.mesh.scene_vertices`).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import key_segment, safe_div, safe_norm
from gradsim_jax.physics.quaternion import quat_conjugate, quat_multiply
from gradsim_jax.typing import Array, pytree_dataclass


class Keyframes(NamedTuple):
    """A kinematic collider's path on the host side (`geometry.colliders.collider(keyframes=...)`); a named tuple,
    so it also unpacks as (times, positions, rotations).

    times: [K] s, increasing.
    positions: [K, 3] m, the collider's position at each key.
    rotations: [K, 4] quaternions w, x, y, z at each key (need not be normalized).
    """

    times: np.ndarray
    positions: np.ndarray
    rotations: np.ndarray


@pytree_dataclass
class ColliderState:
    """The colliders' pose at the state's time: position [k, 3] m, rotation [k, 4] (w, x, y, z)."""

    position: Array
    rotation: Array


def is_moving(params) -> bool:
    """Whether the scene's colliders have keyframes (static: the structure of the tree).

    Args:
        params: the `ColliderParams`, or None (no colliders).

    Returns:
        True when they hold keyframes.
    """
    return params is not None and params.key_times is not None


def _unit(q):
    return q / jnp.maximum(safe_norm(q, keepdims=True), 1e-30)


def collider_pose(params, t):
    """The pose of keyframed colliders at a time (module docstring).

    Args:
        params: the `ColliderParams` with keyframes (key_times [K] s, key_position [k, K, 3] m, key_rotation
            [k, K, 4]).
        t: the time, s (a scalar, may be traced).

    Returns:
        (position [k, 3] m, rotation [k, 4] unit quaternions, velocity [k, 3] m/s, omega [k, 3] rad/s).
    """
    times = params.key_times
    count = times.shape[0]
    if count == 1:
        zero = jnp.zeros_like(params.key_position[:, 0])
        return params.key_position[:, 0], _unit(params.key_rotation[:, 0]), zero, zero
    i, s = key_segment(times, t)
    span = times[i + 1] - times[i]
    moving = (t >= times[0]) & (t < times[-1])
    p0, p1 = params.key_position[:, i], params.key_position[:, i + 1]
    q0, q1 = _unit(params.key_rotation[:, i]), _unit(params.key_rotation[:, i + 1])
    q1 = jnp.where((jnp.sum(q0 * q1, axis=-1) < 0.0)[:, None], -q1, q1)  # the shorter way round
    position = p0 + s * (p1 - p0)
    rotation = _unit(q0 + s * (q1 - q0))
    velocity = jnp.where(moving, safe_div(p1 - p0, span), 0.0)
    rel = quat_multiply(q1, quat_conjugate(q0))  # q1 q0^-1, w >= 0 after the sign choice above
    half = jnp.arctan2(safe_norm(rel[:, 1:]), rel[:, 0])
    axis = rel[:, 1:] * safe_div(1.0, safe_norm(rel[:, 1:], keepdims=True))
    omega = jnp.where(moving, axis * safe_div(2.0 * half, span)[..., None], 0.0)
    return position, rotation, velocity, omega


def posed(params, t):
    """The colliders posed at a time.

    Args:
        params: the `ColliderParams` (or None: no colliders).
        t: the time, s.

    Returns:
        `ColliderParams` with its position, rotation, velocity and omega at time t; unchanged when static.
    """
    if not is_moving(params):
        return params
    position, rotation, velocity, omega = collider_pose(params, t)
    return dataclasses.replace(params, position=position, rotation=rotation, velocity=velocity, omega=omega)


def collider_state(params, t):
    """The state branch of keyframed colliders at a time.

    Args:
        params: the `ColliderParams` (or None: no colliders).
        t: the time, s.

    Returns:
        the `ColliderState` at time t (None when static).
    """
    if not is_moving(params):
        return None
    position, rotation, _, _ = collider_pose(params, t)
    return ColliderState(position=position, rotation=rotation)


def surface_velocity(params, x):
    """The velocity of each collider's material at some points.

    Args:
        params: the posed `ColliderParams` (`posed`: velocity [k, 3] m/s and omega [k, 3] rad/s; None when
            static).
        x: [n, 3] m, the points.

    Returns:
        [n, k, 3] m/s, or None when the colliders are static (their velocity is 0).
    """
    if params.velocity is None:
        return None
    arm = x[:, None, :] - params.position[None]
    return params.velocity[None] + jnp.cross(jnp.broadcast_to(params.omega[None], arm.shape), arm)


def key_arrays(position, rotation, motion) -> dict:
    """Host side: ColliderParams' keyframe fields (numpy): every collider's pose at the union of all key times
    (a static one repeats its pose, a moving one is interpolated there: positions exactly, rotations by the same
    normalized interpolation).

    Args:
        position: [k, 3] m, each collider's static position (`geometry.colliders.Collider.position`).
        rotation: [k, 4] each collider's static rotation, w, x, y, z.
        motion: one entry per collider: None (static) or its `Keyframes`; empty: all static.

    Returns:
        {"key_times": [K] s, "key_position": [k, K, 3] m, "key_rotation": [k, K, 4] unit}; {} when none moves.
    """
    motion = tuple(motion) or (None,) * len(position)
    if all(m is None for m in motion):
        return {}
    times = np.unique(np.concatenate([np.asarray(m[0], np.float64) for m in motion if m is not None]))
    positions, rotations = [], []
    for p0, q0, m in zip(position, rotation, motion):
        if m is None:
            positions.append(np.tile(np.asarray(p0, np.float64), (len(times), 1)))
            rotations.append(np.tile(np.asarray(q0, np.float64), (len(times), 1)))
            continue
        t, p, q = (np.asarray(a, np.float64) for a in m)
        positions.append(np.stack([np.interp(times, t, p[:, i]) for i in range(3)], axis=1))
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        for i in range(1, len(q)):  # each key on the previous one's side: the interpolation turns the short way
            q[i] = -q[i] if q[i] @ q[i - 1] < 0 else q[i]
        qi = np.stack([np.interp(times, t, q[:, i]) for i in range(4)], axis=1)
        rotations.append(qi / np.linalg.norm(qi, axis=1, keepdims=True))
    return {"key_times": times, "key_position": np.stack(positions), "key_rotation": np.stack(rotations)}
