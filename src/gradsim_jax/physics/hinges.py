"""The bending models' parts for the implicit step: Blender's angular bending (`ClothTopology.bending` =
"angular"), and the dihedral bending's definite step Jacobian (`bending_system_jvp`).

Blender's angular bending, per interior edge (x3, x4) between faces a = (x1, x3, x4) and b = (x2, x3, x4): normals
n_a, n_b from the edge and each face's centroid, the hinge angle theta = atan2((n_a x n_b) . e, n_a . n_b) (e along
x3 - x4), a scalar F = k L (theta - theta_rest) - c (u_a . n_a + u_b . n_b), applied F n_a / 3 to face a's vertices,
F n_b / 3 to face b's and -F (n_a + n_b) / 2 more to the edge's two (no net force); taken explicitly in Blender's
implicit step (its system part is 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gradsim_jax.mathutil import safe_norm, safe_normalize
from gradsim_jax.physics.cloth import bending_directions


def bending_system_jvp(topology, params, x, v, dx, dv, prepared=None):
    """The dihedral bending's part in an implicit step's system (`ForceTerm.system_jvp`): its Jacobian without the
    turning of the angle's gradient, -|e| (ke (d . dx) + kd (d . dv)) d per edge with `bending_directions`' d,
    negative semi-definite (the exact Jacobian's other part, (ke (theta - rest) + kd theta') times the angle's
    curvature, makes the step's system indefinite where a folding cloth's hinges turn fast: the step diverged
    on a cloth crumpling on a ball). Where the angle is at rest and still, the two agree.

    Args:
        topology: the scene's Topology; uses `topology.cloth.bend_edges` [e, 4].
        params: the scene's Params; uses `params.cloth.bend_ke`, `bend_kd` [e].
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities (unused: the part kept does not depend on them).
        dx: [n, 3] m, a position change.
        dv: [n, 3] m/s, a velocity change.
        prepared: unused (the gather path serves the grid's stencil layout too).

    Returns:
        [n, 3] N, the force change the step takes.
    """
    edges = topology.cloth.bend_edges
    if edges.shape[0] == 0:
        return jnp.zeros_like(dx)
    d, e_len, valid, _ = jax.vmap(bending_directions)(x[edges])  # [e, 4, 3]
    rate = params.cloth.bend_ke * jnp.sum(d * dx[edges], axis=(1, 2)) + params.cloth.bend_kd * jnp.sum(
        d * dv[edges], axis=(1, 2))
    f = jnp.where(valid, -e_len * rate, 0.0)[:, None, None] * d
    return jax.ops.segment_sum(f.reshape(-1, 3), edges.reshape(-1), num_segments=x.shape[0])


def _hinge_angles(x, edges):
    """Blender's hinge geometry of bending edges [e, 4] (x1, x2 opposite, x3-x4 the edge) at x [n, 3]: (angle [e]
    rad, face normals n_a, n_b [e, 3]), the normals built from the faces' centroids."""
    x1, x2, x3, x4 = (x[edges[:, k]] for k in range(4))
    ca, cb = (x1 + x3 + x4) / 3.0, (x2 + x3 + x4) / 3.0
    na = safe_normalize(jnp.cross(x4 - x3, x3 - ca))
    nb = safe_normalize(jnp.cross(x3 - x4, x4 - cb))
    e = safe_normalize(x3 - x4)
    return jnp.arctan2(jnp.sum(jnp.cross(na, nb) * e, -1), jnp.sum(na * nb, -1)), na, nb


def prepare_angular_bending(topology, params):
    """The hinges' rest angles [e] rad and edge lengths [e] m, from `params.cloth.rest_x` (once per rollout).

    Args:
        topology: the scene's Topology; uses `topology.cloth.bend_edges` [e, 4].
        params: the scene's Params; uses `params.cloth.rest_x` [n, 3] m.

    Returns:
        (rest angle [e] rad, edge length [e] m).
    """
    edges = topology.cloth.bend_edges
    rest = params.cloth.rest_x
    angle, _, _ = _hinge_angles(rest, edges)
    return angle, safe_norm(rest[edges[:, 2]] - rest[edges[:, 3]])


def angular_bending_forces(topology, params, x, v, prepared=None):
    """Blender's angular bending per particle: [n, 3] N (`ClothTopology.bending` = "angular").

    Per interior edge (x3, x4) between faces a = (x1, x3, x4) and b = (x2, x3, x4): normals n_a, n_b from the
    edge and each face's centroid, the hinge angle theta = atan2((n_a x n_b) . e, n_a . n_b), e along x3 - x4,
    and the scalar F = k L (theta - theta_rest) - c (u_a . n_a + u_b . n_b), L the rest length, u_a the velocity
    of face a's centroid relative to the edge's middle; each vertex of face a gets F n_a / 3, of b F n_b / 3, the
    edge's two vertices -F (n_a + n_b) / 2 more (the net force is 0). k = `bend_ke` N/rad per m of edge and
    c = `bend_kd` N s/m: Blender's bending stiffness and damping times 0.1 fps^2 and fps. Taken explicitly in an
    implicit step, as Blender does (`angular_bending_system_jvp` is 0).

    Args:
        topology: the scene's Topology; uses `topology.cloth.bend_edges` [e, 4].
        params: the scene's Params; uses `params.cloth.bend_ke` [e] N/(rad m), `bend_kd` [e] N s/m.
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        prepared: `prepare_angular_bending(topology, params)` (None: computed here).

    Returns:
        [n, 3] N, the summed bending force on each particle.
    """
    edges = topology.cloth.bend_edges
    if edges.shape[0] == 0:
        return jnp.zeros_like(x)
    rest, length = prepare_angular_bending(topology, params) if prepared is None else prepared
    angle, na, nb = _hinge_angles(x, edges)
    v1, v2, v3, v4 = (v[edges[:, k]] for k in range(4))
    middle = 0.5 * (v3 + v4)
    ua, ub = (v1 + v3 + v4) / 3.0 - middle, (v2 + v3 + v4) / 3.0 - middle
    force = (params.cloth.bend_ke * length * (angle - rest)
             - params.cloth.bend_kd * (jnp.sum(ua * na, -1) + jnp.sum(ub * nb, -1)))[:, None]
    fa, fb = force * na / 3.0, force * nb / 3.0
    hinge = fa + fb - 0.5 * force * (na + nb)
    corners = jnp.stack([fa, fb, hinge, hinge], axis=1)  # [e, 4, 3] on x1, x2, x3, x4
    return jax.ops.segment_sum(corners.reshape(-1, 3), edges.reshape(-1), num_segments=x.shape[0])


def angular_bending_system_jvp(topology, params, x, v, dx, dv, prepared=None):
    """The angular bending's part in an implicit step's system: none (Blender takes it explicitly).

    Args:
        topology: the scene's Topology.
        params: the scene's Params.
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        dx: [n, 3] m, a position change.
        dv: [n, 3] m/s, a velocity change.
        prepared: unused.

    Returns:
        [n, 3] zeros.
    """
    return jnp.zeros_like(dx)
