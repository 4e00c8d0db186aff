"""Damped linear springs between particle pairs.

For a spring (i, j): d = x_i - x_j, l = |d|, u = d / l, rel = v_i - v_j,
f = u (ke (l - rest) + kd u . rel); particle i receives -f and j receives +f (PHYSICS.md, "Springs").
The elastic part derives from the energy 0.5 ke (l - rest)^2, see `spring_energy`.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from gradsim_jax.mathutil import safe_norm, safe_normalize
from gradsim_jax.physics.gather import gather_corners, scatter_corners
from gradsim_jax.typing import Array, pytree_dataclass


@pytree_dataclass
class SpringTopology:
    """pairs: [s, 2] int32 particle indices (i, j); incidence: their `corner_incidence` table [K, n] int32
    (None: sums by scatter-add; `Scene.build` makes it)."""

    pairs: Array
    incidence: Optional[Array] = None


@pytree_dataclass
class SpringParams:
    """Per spring: ke [s] N/m, kd [s] N s/m, rest [s] m."""

    ke: Array
    kd: Array
    rest: Array


def spring_force(xs, vs, ke, kd, rest):
    """Force [3] of one spring on its second particle (the first receives the negative); xs, vs: [2, 3].

    Args:
        xs: [2, 3] m, positions of the spring's particles (i, j).
        vs: [2, 3] m/s, velocities of the spring's particles (i, j).
        ke: () N/m, stiffness.
        kd: () N s/m, damping along the spring.
        rest: () m, rest length.

    Returns:
        [3] N, the force on particle j (particle i receives its negative).
    """
    d = xs[0] - xs[1]
    u = safe_normalize(d)
    magnitude = ke * (safe_norm(d) - rest) + kd * jnp.dot(u, vs[0] - vs[1])
    return u * magnitude


def spring_forces(topology, params, x, v):
    """Sum of all spring forces per particle: [n, 3] N.

    Args:
        topology: the scene's Topology; uses `topology.springs` (pairs [s, 2] int32, incidence).
        params: the scene's Params; uses `params.springs` (ke [s] N/m, kd [s] N s/m, rest [s] m).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.

    Returns:
        [n, 3] N, the summed spring force on each particle (zeros when there is no spring).
    """
    pairs, incidence = topology.springs.pairs, topology.springs.incidence
    if pairs.shape[0] == 0:
        return jnp.zeros_like(x)
    f = jax.vmap(spring_force)(gather_corners(x, pairs, incidence), gather_corners(v, pairs, incidence),
                               params.springs.ke, params.springs.kd, params.springs.rest)
    return scatter_corners(jnp.stack([-f, f], axis=1), pairs, x.shape[0], incidence)


def spring_system_jvp(topology, params, x, dx, dv):
    """The springs' force change [n, 3] N for position and velocity changes dx, dv [n, 3] at positions x [n, 3],
    as an implicit step takes it (Blender's cloth solver does the same): along each spring ke u u^T on the
    stretch and kd u u^T on the velocity; across it ke (1 - rest / l) while the spring is stretched, 0 while it is
    compressed; the damping's turning with the spring left out. The exact Jacobian's sideways term of a
    compressed spring is negative (a column under load buckles), and once the step's dt^2 ke |1 - rest / l|
    outweighs the mass (a 3 % compression of a Blender cloth's springs at its 5 substeps a frame) the implicit
    step's system is indefinite and conjugate gradients diverge: a crumpling cloth would explode. This one is
    positive semi-definite and symmetric.

    Args:
        topology: the scene's Topology; uses `topology.springs.pairs` [s, 2] int32.
        params: the scene's Params; uses `params.springs` (ke [s] N/m, kd [s] N s/m, rest [s] m).
        x: [n, 3] m, particle positions.
        dx: [n, 3] m, a position change.
        dv: [n, 3] m/s, a velocity change.

    Returns:
        [n, 3] N, the force change on each particle (zeros when there is no spring).
    """
    pairs, incidence = topology.springs.pairs, topology.springs.incidence
    if pairs.shape[0] == 0:
        return jnp.zeros_like(x)
    ends = [gather_corners(a, pairs, incidence) for a in (x, dx, dv)]  # [s, 2, 3] each
    d, ddx, ddv = (e[:, 0] - e[:, 1] for e in ends)
    length = safe_norm(d)
    u = safe_normalize(d)
    p = params.springs
    along = jnp.sum(u * ddx, axis=-1)
    sideways = p.ke * jnp.maximum(length - p.rest, 0.0) / jnp.maximum(length, 1e-12)
    change = (u * (p.ke * along + p.kd * jnp.sum(u * ddv, axis=-1))[:, None]
              + sideways[:, None] * (ddx - along[:, None] * u))  # on j; i gets its negative
    return scatter_corners(jnp.stack([-change, change], axis=1), pairs, x.shape[0], incidence)


def spring_energy(topology, params, x):
    """Elastic energy sum 0.5 ke (l - rest)^2 over springs: scalar J.

    Args:
        topology: the scene's Topology; uses `topology.springs.pairs` [s, 2] int32.
        params: the scene's Params; uses `params.springs` (ke [s] N/m, rest [s] m).
        x: [n, 3] m, particle positions.

    Returns:
        () J, the elastic energy (0 when there is no spring).
    """
    pairs = topology.springs.pairs
    if pairs.shape[0] == 0:
        return jnp.zeros((), x.dtype)
    length = safe_norm(x[pairs[:, 0]] - x[pairs[:, 1]])
    return 0.5 * jnp.sum(params.springs.ke * (length - params.springs.rest) ** 2)
