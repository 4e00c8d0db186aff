"""Unit quaternions for rigid-body orientation, batched over leading axes.

Convention: q = (w, x, y, z), scalar first, unit norm; q rotates body-frame vectors into the world frame,
p_world = q p_body q*, and `quat_to_matrix(q)` is the matching rotation matrix R (p_world = R p_body).
Products compose left to right as rotations applied right to left: quat_multiply(a, b) rotates by b,
then by a. Every function is polynomial in q except `quat_normalize` and `quat_from_axis_angle`, which
go through the guarded norms of `gradsim_jax.mathutil`, so gradients are finite at q = identity and at
zero rotation (zero axis or zero angle).
"""

from __future__ import annotations

import jax.numpy as jnp

from gradsim_jax.mathutil import safe_normalize
from gradsim_jax.typing import Array


def quat_multiply(a: Array, b: Array) -> Array:
    """Hamilton product a b: [..., 4] (wxyz), broadcasting over leading axes.

    Args:
        a: [..., 4] quaternions (w, x, y, z), the rotation applied second.
        b: [..., 4] quaternions (w, x, y, z), the rotation applied first; leading axes broadcast with `a`'s.

    Returns:
        [..., 4] the products a b (w, x, y, z).
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    aw, ax, ay, az = (a[..., i] for i in range(4))
    bw, bx, by, bz = (b[..., i] for i in range(4))
    return jnp.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def quat_conjugate(q: Array) -> Array:
    """(w, -x, -y, -z): the inverse rotation of a unit quaternion. [..., 4].

    Args:
        q: [..., 4] quaternions (w, x, y, z).

    Returns:
        [..., 4] the conjugates.
    """
    q = jnp.asarray(q)
    return jnp.concatenate([q[..., :1], -q[..., 1:]], axis=-1)


def quat_rotate(q: Array, p: Array) -> Array:
    """Rotate points p [..., 3] by unit quaternions q [..., 4]: q p q*, without building the matrix.

    Args:
        q: [..., 4] unit quaternions (w, x, y, z).
        p: [..., 3] points or vectors (any unit, e.g. m in the body frame); leading axes broadcast with `q`'s.

    Returns:
        [..., 3] the rotated points, in `p`'s unit.
    """
    q, p = jnp.asarray(q), jnp.asarray(p)
    u = q[..., 1:]
    t = 2.0 * jnp.cross(u, p)
    return p + q[..., :1] * t + jnp.cross(u, t)


def quat_to_matrix(q: Array) -> Array:
    """Rotation matrix [..., 3, 3] of unit quaternions q [..., 4].

    Args:
        q: [..., 4] unit quaternions (w, x, y, z).

    Returns:
        [..., 3, 3] rotation matrices R with p_world = R p_body.
    """
    q = jnp.asarray(q)
    w, x, y, z = (q[..., i] for i in range(4))
    rows = [
        [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y)],
        [2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x)],
        [2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def quat_normalize(q: Array) -> Array:
    """q / |q| [..., 4]; the zero quaternion stays zero (finite gradient).

    Args:
        q: [..., 4] quaternions (w, x, y, z), any norm.

    Returns:
        [..., 4] unit quaternions (zero where q is zero).
    """
    return safe_normalize(jnp.asarray(q))


def quat_from_axis_angle(axis: Array, angle: Array) -> Array:
    """Rotation by `angle` (rad) [...] about `axis` [..., 3] (normalized here; a zero axis gives the
    identity).

    Args:
        axis: [..., 3] rotation axes, any length (normalized here; a zero axis gives the identity).
        angle: [...] rad, rotation angles (right-handed about `axis`).

    Returns:
        [..., 4] unit quaternions (w, x, y, z).
    """
    axis, angle = jnp.asarray(axis), jnp.asarray(angle)
    half = 0.5 * angle
    has_axis = jnp.sum(axis * axis, axis=-1) > 0.0
    w = jnp.where(has_axis, jnp.cos(half), jnp.ones_like(half))
    return jnp.concatenate([w[..., None], jnp.sin(half)[..., None] * safe_normalize(axis)], axis=-1)
