"""Cloth forces: triangle membrane (stretch/shear, area, damping, activation), aerodynamics, bending.

Membrane (the dflex/Warp triangle FEM, PHYSICS.md "Cloth membrane"): for a triangle (p, q, r) with rest
edge matrix D (2x2, in the triangle's own plane), Dm = D^-1 and rest area A0 = det(D) / 2. We never build
the in-plane frame: the forces only need Dm Dm^T = G^-1, where G = E^T E is the Gram matrix of the rest edges
E = [x_q - x_p, x_r - x_p] (3x2), and A0 = sqrt(det G) / 2. With X = [x_q - x_p, x_r - x_p] (deformed),
F = X Dm, so H = P Dm^T = k_mu A0 X G^-1 + k_damp A0 Xdot G^-1 (columns f_q, f_r).
Area term: c = area / A0 - alpha + activation with alpha = 1 + k_mu / k_lambda, pushed along dc/dx.
Forces: p gets +(f_q + f_r), q gets -f_q, r gets -f_r. The elastic part derives from
A0 (k_mu |F|^2 / 2 + k_lambda c^2 / 2), see `membrane_energy`.

Aerodynamics: v_mid = mean of the three velocities; drag along v_mid scaled by area |n . v_mid|, lift along n
scaled by area (pi/2 - angle(n, v_mid)) |v_mid|^2; each vertex receives -(drag + lift).

Bending (Bridson et al. 2003, as in dflex/Warp "eval_bending"): per interior edge (x1, x2 opposite
vertices, x3-x4 the edge) the dihedral angle theta; d_k = d theta / d x_k; f_k = -|e| (ke (theta - rest)
+ kd sum d_k . v_k) d_k.
"""

from __future__ import annotations

import math
from typing import Optional

import jax
import jax.numpy as jnp

from gradsim_jax.mathutil import safe_acos, safe_div, safe_norm, safe_normalize
from gradsim_jax.physics.gather import (corner_major_layout, eager_if_concrete, gather_corners_major,
                                        scatter_corners_major)
from gradsim_jax.physics.stencil import (ClothGrid, bending_families, family_corners, family_values, from_lattice,
                                         lattice_forces, lattice_map, lattice_view, membrane_families,
                                         stencil_active)
from gradsim_jax.typing import Array, pytree_dataclass
from gradsim_jax.vectors import cross3, dot3, materialize, materialize_cotangent, sub3, unstack


@pytree_dataclass(meta=("aerodynamics", "membrane", "bending"))
class ClothTopology:
    """triangles: [t, 3] int32 particle indices (p, q, r) of membrane triangles.
    bend_edges: [e, 4] int32 (x1, x2, x3, x4): x1, x2 the vertices opposite the shared edge (x3, x4).
    aerodynamics: static flag; when True triangles feel drag and lift (`ClothParams.tri_drag`, `tri_lift`).
    membrane: static flag; when False the triangles have no membrane forces (stretch, area, damping), only the
    aerodynamic ones if those are on (a cloth of springs; `Environment.membrane`).
    bending: static, the bending model of the bend_edges: "dihedral" (Bridson et al., `bending_forces`) or
    "angular" (Blender's hinge, explicit in an implicit step: `physics.hinges.angular_bending_forces`).
    tri_incidence, bend_incidence: `corner_incidence` tables [K, n] int32 of the triangles and bending edges
    (None: their forces are summed by scatter-add; `Scene.build` makes them).
    grid: the lattice and element families when the triangles and bending edges are a structured grid
    (`physics.stencil.ClothGrid`, found by `stencil.find_cloth_grid`; `Scene.build` looks for one): the
    membrane and bending forces are then computed as stencil work, without gathers or scatters, where
    `stencil.stencil_active` says so (off the CPU by default). None: the gather path (and the
    incidence tables).
    """

    triangles: Array
    bend_edges: Array
    aerodynamics: bool = False
    membrane: bool = True
    tri_incidence: Optional[Array] = None
    bending: str = "dihedral"
    bend_incidence: Optional[Array] = None
    grid: Optional[ClothGrid] = None


@pytree_dataclass
class ClothParams:
    """Membrane, per triangle [t]: tri_ke (k_mu, N/m, scaled by rest area), tri_ka (k_lambda), tri_kd
    (k_damp), tri_activation (target-area shift), tri_drag, tri_lift (aerodynamics); rest_x [n, 3] m, the
    rest configuration the triangles' rest shapes are taken from. Bending, per interior edge [e]: bend_ke
    (N m/rad), bend_kd, bend_rest (rest dihedral angle, rad)."""

    tri_ke: Array
    tri_ka: Array
    tri_kd: Array
    tri_activation: Array
    tri_drag: Array
    tri_lift: Array
    rest_x: Array
    bend_ke: Array
    bend_kd: Array
    bend_rest: Array


@pytree_dataclass
class ClothControl:
    """tri_activation [t]: added to `ClothParams.tri_activation` (muscles); bend_rest_offset [e] rad: added
    to `ClothParams.bend_rest` (a hinge that folds on command); None: nothing."""

    tri_activation: Optional[Array] = None
    bend_rest_offset: Optional[Array] = None


def rest_shapes(rest_x, triangles):
    """Per-triangle inverse rest Gram matrix G^-1 [t, 2, 2] (1/m^2) and rest area A0 [t] (m^2).

    Args:
        rest_x: [n, 3] m, rest positions of the particles.
        triangles: [t, 3] int, particle indices (p, q, r) of each triangle.

    Returns:
        (G^-1 [t, 2, 2] 1/m^2, 0 for a degenerate triangle; A0 [t] m^2).
    """
    p, q, r = (rest_x[triangles[:, k]] for k in range(3))
    e = jnp.stack([q - p, r - p], axis=-1)  # [t, 3, 2]
    gram = jnp.einsum("tki,tkj->tij", e, e)
    det = gram[:, 0, 0] * gram[:, 1, 1] - gram[:, 0, 1] * gram[:, 1, 0]
    adj = jnp.stack(
        [jnp.stack([gram[:, 1, 1], -gram[:, 0, 1]], -1), jnp.stack([-gram[:, 1, 0], gram[:, 0, 0]], -1)], -2
    )
    gram_inv = safe_div(adj, det[:, None, None])
    area = 0.5 * jnp.sqrt(jnp.maximum(det, 0.0))
    return gram_inv, area


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def triangle_force(p, q, r, vp, vq, vr, gram_inv, rest_area, ke, ka, kd, activation):
    """Elastic, damping and area forces (f_p, f_q, f_r), each [3], on the corners of one membrane triangle.

    p, q, r, vp, vq, vr: [3] positions and velocities of its corners; gram_inv [2, 2]; the rest scalars.
    Written without short-axis stacks (so that, vmapped over corner-major [t, 3] blocks, XLA's CPU backend
    emits it as whole-array loops): with e_q = q - p, e_r = r - p, only the squared norm of n = e_q x e_r
    is formed, from its components (as accurate for thin triangles as the cross product, unlike
    |e_q|^2 |e_r|^2 - (e_q . e_r)^2), and the area gradients e_r x n and n x e_q are expanded as
    e_q |e_r|^2 - e_r (e_q . e_r) and e_r |e_q|^2 - e_q (e_q . e_r), over |n|. Its scalars are
    `materialize`d, so that neither they nor their cotangents are recomputed per corner and component.

    Args:
        p: [3] m, position of corner p.
        q: [3] m, position of corner q.
        r: [3] m, position of corner r.
        vp: [3] m/s, velocity of corner p.
        vq: [3] m/s, velocity of corner q.
        vr: [3] m/s, velocity of corner r.
        gram_inv: [2, 2] 1/m^2, the inverse rest Gram matrix G^-1 (`rest_shapes`).
        rest_area: () m^2, the rest area A0.
        ke: () N/m, k_mu per rest area (stretch and shear).
        ka: () N/m, k_lambda per rest area (area preservation).
        kd: () N s/m, k_damp per rest area.
        activation: () dimensionless, the shift of the target area ratio.

    Returns:
        (f_p, f_q, f_r), each [3] N.
    """
    k_mu, k_lambda, k_damp = ke * rest_area, ka * rest_area, kd * rest_area
    e_q, e_r = q - p, r - p
    rate_q, rate_r = vq - vp, vr - vp
    a_q, a_r = (materialize_cotangent(k_mu * e + k_damp * rate) for e, rate in ((e_q, rate_q), (e_r, rate_r)))
    (g_qq, g_qr), (_, g_rr) = (unstack(row) for row in unstack(gram_inv))  # G^-1 is symmetric

    qq, rr, qr = (materialize(_dot(a, b)) for a, b in ((e_q, e_q), (e_r, e_r), (e_q, e_r)))
    (qx, qy, qz), (rx, ry, rz) = unstack(e_q, -1), unstack(e_r, -1)
    n_sq = materialize((qy * rz - qz * ry) ** 2 + (qz * rx - qx * rz) ** 2 + (qx * ry - qy * rx) ** 2)
    pos = n_sq > 0.0
    n_len = materialize(jnp.where(pos, jnp.sqrt(jnp.where(pos, n_sq, 1.0)), 0.0))
    inv_a0 = safe_div(1.0, rest_area)
    c = 0.5 * n_len * inv_a0 - (1.0 + safe_div(ke, ka)) + activation
    scale = materialize(0.5 * inv_a0 * safe_div(1.0, n_len))
    dc_q = materialize_cotangent((e_q * rr - e_r * qr) * scale)  # dc/dq
    dc_r = materialize_cotangent((e_r * qq - e_q * qr) * scale)  # dc/dr
    area_force = materialize(k_lambda * c + k_damp * (_dot(dc_q, rate_q) + _dot(dc_r, rate_r)))
    f_q = materialize_cotangent(g_qq * a_q + g_qr * a_r + dc_q * area_force)
    f_r = materialize_cotangent(g_qr * a_q + g_rr * a_r + dc_r * area_force)
    return f_q + f_r, -f_q, -f_r


def triangle_air_force(p, q, r, vp, vq, vr, drag, lift):
    """Aerodynamic force [3] that each corner of one triangle (positions p, q, r, velocities vp, vq, vr [3])
    receives (drag + lift, negated).

    Args:
        p: [3] m, position of corner p.
        q: [3] m, position of corner q.
        r: [3] m, position of corner r.
        vp: [3] m/s, velocity of corner p.
        vq: [3] m/s, velocity of corner q.
        vr: [3] m/s, velocity of corner r.
        drag: () drag coefficient (force = drag x area x |n . v_mid| v_mid, so kg/m^3).
        lift: () lift coefficient (force = lift x area x angle x |v_mid|^2 n, so kg/m^3 per rad).

    Returns:
        [3] N, the force on each of the three corners.
    """
    n = jnp.cross(q - p, r - p)
    area = 0.5 * safe_norm(n)
    n_hat = safe_normalize(n)
    v_mid = (vp + vq + vr) / 3.0
    f_drag = v_mid * (drag * area * jnp.abs(jnp.dot(n_hat, v_mid)))
    attack = 0.5 * math.pi - safe_acos(jnp.dot(n_hat, safe_normalize(v_mid)))
    f_lift = n_hat * (lift * area * attack) * jnp.dot(v_mid, v_mid)
    return -(f_drag + f_lift)


def prepare_membrane(topology, params):
    """What membrane forces need that does not change over a rollout: G^-1 [t, 2, 2] (1/m^2), A0 [t] (m^2),
    the triangles' corners in corner-major order (`gather.corner_major_flat`) and their incidence table
    renumbered for it (`gather.corner_major_incidence`; None without a table). `simulate` computes it
    once, before the time loop. On a grid's stencil path (`stencil.stencil_active(topology.cloth.grid)`) it
    is instead the `stencil.MembraneFamilies`: the rest shapes and the per-triangle coefficients laid out
    in the triangle families' slots.

    With concrete rest positions and triangles (a scene closed over by a jitted loss, rest shapes not
    differentiated) they are evaluated right away while tracing (`jax.ensure_compile_time_eval`): staged
    into the program, XLA would constant-fold them at compile time, which takes minutes on a large mesh.

    Args:
        topology: the scene's Topology; uses `topology.cloth` (triangles [t, 3], tri_incidence, grid).
        params: the scene's Params; uses `params.cloth.rest_x` [n, 3] m (and on the stencil path the tri_* [t]).

    Returns:
        (G^-1 [t, 2, 2] 1/m^2, A0 [t] m^2, flat [3 t] int, corner-major incidence [K, n] int or None); on the
        stencil path the `stencil.MembraneFamilies`.
    """
    tris = topology.cloth.triangles
    gram_inv, rest_area = eager_if_concrete(rest_shapes, params.cloth.rest_x, tris)
    if stencil_active(topology.cloth.grid):
        return eager_if_concrete(membrane_families, topology.cloth.grid, gram_inv, rest_area, params.cloth)
    return (gram_inv, rest_area) + corner_major_layout(tris, topology.cloth.tri_incidence)


def membrane_forces(topology, params, x, v, activation=None, prepared=None):
    """Membrane forces (and aerodynamic ones if `topology.cloth.aerodynamics`) per particle: [n, 3] N.

    On a grid's stencil path (`stencil.stencil_active(topology.cloth.grid)`) as stencil work
    (`grid_membrane_forces`), else by gathers of the triangles' corners and a sum per particle.

    Args:
        topology: the scene's Topology; uses `topology.cloth` (triangles [t, 3], aerodynamics, tri_incidence,
            grid).
        params: the scene's Params; uses `params.cloth` (the tri_* coefficients, rest_x).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        activation: [t] dimensionless, added to `params.cloth.tri_activation`; None: nothing added.
        prepared: `prepare_membrane(topology, params)`; None computes it here.

    Returns:
        [n, 3] N, the summed membrane (and aerodynamic) force on each particle.
    """
    tris = topology.cloth.triangles
    if tris.shape[0] == 0 or not (topology.cloth.membrane or topology.cloth.aerodynamics):
        return jnp.zeros_like(x)
    if not topology.cloth.membrane:  # drag and lift only
        xs, vs = (unstack(gather_corners_major(a, tris)) for a in (x, v))
        air = jax.vmap(triangle_air_force)(*xs, *vs, params.cloth.tri_drag, params.cloth.tri_lift)  # each corner's
        return scatter_corners_major(jnp.stack([air, air, air]), tris, x.shape[0])
    prepared = prepare_membrane(topology, params) if prepared is None else prepared
    if stencil_active(topology.cloth.grid):
        return grid_membrane_forces(topology.cloth.grid, topology.cloth.aerodynamics, prepared, x, v, activation)
    gram_inv, rest_area, flat, table = prepared
    topology, params = topology.cloth, params.cloth
    act = params.tri_activation if activation is None else params.tri_activation + activation
    # One corner-major gather per quantity (its transpose, in the gradient, is one sum of gathers or one
    # scatter-add); each corner is a contiguous [t, 3] block.
    xs, vs = (unstack(gather_corners_major(a, tris, table, flat)) for a in (x, v))
    f = jax.vmap(triangle_force)(*xs, *vs, gram_inv, rest_area, params.tri_ke, params.tri_ka, params.tri_kd, act)
    if topology.aerodynamics:
        air = jax.vmap(triangle_air_force)(*xs, *vs, params.tri_drag, params.tri_lift)
        f = tuple(fc + air for fc in f)
    return scatter_corners_major(jnp.stack(f), tris, x.shape[0], table, flat)


def grid_membrane_forces(grid, aerodynamics, families, x, v, activation=None):
    """`membrane_forces` of a grid cloth as stencil work (`physics.stencil`): each triangle family's
    corners are slices of the lattice, `triangle_force` (and `triangle_air_force`) is mapped over them (all
    families in one call), and the corner forces are summed per particle by padded adds. No gather or
    scatter, except a gather of `activation` into the families when one is given.

    Args:
        grid: the `ClothGrid` (`ClothTopology.grid`).
        aerodynamics: whether the triangles feel drag and lift (static).
        families: `prepare_membrane`'s `stencil.MembraneFamilies`.
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        activation: [t] dimensionless, added to the families' activation; None: nothing added.

    Returns:
        [n, 3] N, the summed membrane (and aerodynamic) force on each particle.
    """
    lx, lv = lattice_view(x, grid), lattice_view(v, grid)
    p = families
    act = p.activation if activation is None else (
        p.activation + family_values(activation, grid.tri_order, grid.tri_families, grid))
    xs, vs = family_corners(lx, grid.tri_families, grid), family_corners(lv, grid.tri_families, grid)
    f = lattice_map(triangle_force, grid)(*xs, *vs, p.gram_inv, p.rest_area, p.ke, p.ka, p.kd, act)
    if aerodynamics:
        air = lattice_map(triangle_air_force, grid)(*xs, *vs, p.drag, p.lift)
        f = tuple(fc + air for fc in f)
    return from_lattice(lattice_forces(f, grid.tri_families, grid), grid, x.shape[0])


def membrane_energy(topology, params, x):
    """Elastic membrane energy sum A0 (k_mu |F|^2 + k_lambda c^2) / 2 (c includes the activation): J.

    Args:
        topology: the scene's Topology; uses `topology.cloth.triangles` [t, 3].
        params: the scene's Params; uses `params.cloth` (tri_ke N/m, tri_ka N/m, tri_activation, rest_x [n, 3] m).
        x: [n, 3] m, particle positions.

    Returns:
        () J, the elastic energy (0 without triangles).
    """
    topology, params = topology.cloth, params.cloth
    tris = topology.triangles
    if tris.shape[0] == 0:
        return jnp.zeros((), x.dtype)
    gram_inv, rest_area = rest_shapes(params.rest_x, tris)
    p, q, r = (x[tris[:, k]] for k in range(3))
    e = jnp.stack([q - p, r - p], axis=-1)
    # |F|^2 = tr(F^T F) = tr(Dm^T E^T E Dm) = tr(E^T E G^-1)
    f_sq = jnp.einsum("tki,tkj,tji->t", e, e, gram_inv)
    area = 0.5 * safe_norm(jnp.cross(q - p, r - p))
    c = area / rest_area - (1.0 + params.tri_ke / params.tri_ka) + params.tri_activation
    return 0.5 * jnp.sum(rest_area * (params.tri_ke * f_sq + params.tri_ka * c * c))


def _hinge(x1, x2, x3, x4):
    """Normals n1 of (x1, x3, x4) and n2 of (x2, x4, x3), the edge e = x4 - x3 and the signed angle."""
    n1 = jnp.cross(x3 - x1, x4 - x1)
    n2 = jnp.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    # acos(n1_hat . n2_hat) with the sign of (n2 x n1) . e, as one atan2: exact and smooth near 0 and pi
    # (no clamping, no sign flip of a flat cloth). |e| scales both arguments alike.
    sin_term = jnp.dot(jnp.cross(n2, n1), e)
    cos_term = jnp.dot(n1, n2) * safe_norm(e)
    degenerate = (sin_term == 0.0) & (cos_term == 0.0)
    theta = jnp.where(degenerate, 0.0, jnp.arctan2(sin_term, jnp.where(degenerate, 1.0, cos_term)))
    return n1, n2, e, theta


def dihedral_angle(x1, x2, x3, x4):
    """Signed dihedral angle (rad) of the two triangles (x1, x3, x4) and (x2, x4, x3) about edge x3-x4.

    Args:
        x1: [3] m, the vertex of the first triangle opposite the edge.
        x2: [3] m, the vertex of the second triangle opposite the edge.
        x3: [3] m, the edge's first vertex.
        x4: [3] m, the edge's second vertex.

    Returns:
        () rad, the signed angle in (-pi, pi] (0 for a flat hinge or a degenerate one).
    """
    return _hinge(x1, x2, x3, x4)[3]


def bending_directions(xs):
    """(d [4, 3], |e|, valid, theta) of one bending edge (xs: [4, 3] positions of x1, x2, x3, x4): the force
    direction d of each vertex (the forces are -|e| (ke (theta - rest) + kd sum d . v) d), the edge length,
    whether the hinge is non-degenerate (else d means nothing) and the dihedral angle.

    Args:
        xs: [4, 3] m, positions of x1, x2 (the vertices opposite the edge), x3, x4 (the edge).

    Returns:
        (d [4, 3] 1/m, the angle's gradient d theta / d x_k; |e| () m; valid () bool; theta () rad).
    """
    x1, x2, x3, x4 = xs
    n1, n2, e, theta = _hinge(x1, x2, x3, x4)
    n1_sq, n2_sq, e_sq = jnp.dot(n1, n1), jnp.dot(n2, n2), jnp.dot(e, e)
    # Collapsed triangles or edges have no defined angle: they exert no bending force.
    valid = (n1_sq > 1e-12 * e_sq * e_sq) & (n2_sq > 1e-12 * e_sq * e_sq) & (e_sq > 0.0)
    n1p = n1 / jnp.where(valid, n1_sq, 1.0)
    n2p = n2 / jnp.where(valid, n2_sq, 1.0)
    e_len = safe_norm(e)
    e_hat = e / jnp.where(valid, e_len, 1.0)
    d = jnp.stack([
        e_len * n1p,
        e_len * n2p,
        n1p * jnp.dot(x1 - x4, e_hat) + n2p * jnp.dot(x2 - x4, e_hat),
        n1p * jnp.dot(x3 - x1, e_hat) + n2p * jnp.dot(x3 - x2, e_hat),
    ])
    return d, e_len, valid, theta


def bending_force(x1, x2, x3, x4, v1, v2, v3, v4, ke, kd, rest):
    """Forces (f1, f2, f3, f4), each [3], on the vertices of one bending edge (positions x1..x4 and
    velocities v1..v4 [3]; x3-x4 the shared edge, as `bending_directions`); zero when degenerate.

    The same forces as -|e| (ke (theta - rest) + kd sum d . v) d with `bending_directions`' d, written on
    the vectors' components (`vectors.unstack`, no cross products or stacks of 3-vectors inside), its
    shared scalars `materialize`d and the cotangents of its edge vectors too, so that XLA's CPU backend
    neither slices nor recomputes per component (vmapped over corner-major [e, 3] blocks).

    Args:
        x1: [3] m, the vertex of the first triangle opposite the edge.
        x2: [3] m, the vertex of the second triangle opposite the edge.
        x3: [3] m, the edge's first vertex.
        x4: [3] m, the edge's second vertex.
        v1: [3] m/s, velocity of x1.
        v2: [3] m/s, velocity of x2.
        v3: [3] m/s, velocity of x3.
        v4: [3] m/s, velocity of x4.
        ke: () bending stiffness (`ClothParams.bend_ke`), per unit edge length and rad.
        kd: () bending damping (`ClothParams.bend_kd`): ke's unit times s.
        rest: () rad, the rest dihedral angle.

    Returns:
        (f1, f2, f3, f4), each [3] N.
    """
    xs = [unstack(x, -1) for x in (x1, x2, x3, x4)]
    vs = [unstack(v, -1) for v in (v1, v2, v3, v4)]
    p1, p2, p3, p4 = xs
    # the hinge's edge vectors, whose cotangents are materialized (each a few terms of the corners')
    a31, a41, a42, a32, e = (tuple(materialize_cotangent(c) for c in sub3(u, w))
                             for u, w in ((p3, p1), (p4, p1), (p4, p2), (p3, p2), (p4, p3)))
    n1 = tuple(materialize(c) for c in cross3(a31, a41))
    n2 = tuple(materialize(c) for c in cross3(a42, a32))
    n1_sq, n2_sq, e_sq = materialize(dot3(n1, n1)), materialize(dot3(n2, n2)), materialize(dot3(e, e))
    e_len = materialize(jnp.where(e_sq > 0.0, jnp.sqrt(jnp.where(e_sq > 0.0, e_sq, 1.0)), 0.0))
    # acos(n1_hat . n2_hat) with the sign of (n2 x n1) . e, as one atan2 (see `_hinge`)
    sin_term = dot3(cross3(n2, n1), e)
    cos_term = dot3(n1, n2) * e_len
    degenerate = (sin_term == 0.0) & (cos_term == 0.0)
    theta = jnp.where(degenerate, 0.0, jnp.arctan2(sin_term, jnp.where(degenerate, 1.0, cos_term)))
    valid = (n1_sq > 1e-12 * e_sq * e_sq) & (n2_sq > 1e-12 * e_sq * e_sq) & (e_sq > 0.0)
    inv1 = materialize(1.0 / jnp.where(valid, n1_sq, 1.0))
    inv2 = materialize(1.0 / jnp.where(valid, n2_sq, 1.0))
    inv_e = materialize(1.0 / jnp.where(valid, e_len, 1.0))
    n1p, n2p = tuple(c * inv1 for c in n1), tuple(c * inv2 for c in n2)
    s13, s23 = -dot3(a41, e) * inv_e, -dot3(a42, e) * inv_e  # (x1 - x4) . e_hat, (x2 - x4) . e_hat
    s31, s32 = dot3(a31, e) * inv_e, dot3(a32, e) * inv_e
    d = [tuple(e_len * c for c in n1p), tuple(e_len * c for c in n2p),
         tuple(a * s13 + b * s23 for a, b in zip(n1p, n2p)), tuple(a * s31 + b * s32 for a, b in zip(n1p, n2p))]
    d = [tuple(materialize(c) for c in dk) for dk in d]
    rate = sum(dot3(dk, vk) for dk, vk in zip(d, vs))
    f_total = materialize(jnp.where(valid, -e_len * (ke * (theta - rest) + kd * rate), 0.0))
    return tuple(jnp.stack([c * f_total for c in dk]) for dk in d)


def prepare_bending(topology, params):
    """The bending edges' corners in corner-major order and their incidence table renumbered for it (None
    without a table), computed once per rollout (`simulate`), eagerly for a closed-over scene. On a grid
    (`topology.cloth.grid`) instead the `stencil.BendingFamilies`: the coefficients in the edge families' slots.

    Args:
        topology: the scene's Topology; uses `topology.cloth` (bend_edges [e, 4], bend_incidence, grid).
        params: the scene's Params; on the stencil path uses `params.cloth` (bend_ke, bend_kd, bend_rest [e]).

    Returns:
        (flat [4 e] int, corner-major incidence [K, n] int or None); on the stencil path the
        `stencil.BendingFamilies`.
    """
    if stencil_active(topology.cloth.grid):
        return eager_if_concrete(bending_families, topology.cloth.grid, params.cloth)
    return corner_major_layout(topology.cloth.bend_edges, topology.cloth.bend_incidence)


def bending_forces(topology, params, x, v, rest_offset=None, prepared=None):
    """Dihedral bending forces per particle: [n, 3] N. `rest_offset` [e] rad is added to
    `params.cloth.bend_rest`; `prepared`: `prepare_bending(topology, params)` (computed here when None).
    On a grid's stencil path (`stencil.stencil_active(topology.cloth.grid)`) as stencil work
    (`grid_bending_forces`).

    Args:
        topology: the scene's Topology; uses `topology.cloth` (bend_edges [e, 4], bend_incidence, grid).
        params: the scene's Params; uses `params.cloth` (bend_ke, bend_kd, bend_rest [e] rad).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        rest_offset: [e] rad, added to `params.cloth.bend_rest`; None: nothing added.
        prepared: `prepare_bending(topology, params)`; None computes it here.

    Returns:
        [n, 3] N, the summed bending force on each particle.
    """
    edges = topology.cloth.bend_edges
    if edges.shape[0] == 0:
        return jnp.zeros_like(x)
    prepared = prepare_bending(topology, params) if prepared is None else prepared
    if stencil_active(topology.cloth.grid):
        return grid_bending_forces(topology.cloth.grid, prepared, x, v, rest_offset)
    flat, table = prepared
    params = params.cloth
    rest = params.bend_rest if rest_offset is None else params.bend_rest + rest_offset
    xs, vs = (unstack(gather_corners_major(a, edges, table, flat)) for a in (x, v))
    f = jax.vmap(bending_force)(*xs, *vs, params.bend_ke, params.bend_kd, rest)
    return scatter_corners_major(jnp.stack(f), edges, x.shape[0], table, flat)


def grid_bending_forces(grid, families, x, v, rest_offset=None):
    """`bending_forces` of a grid cloth as stencil work (`physics.stencil`): `bending_force` mapped over
    each edge family's corner slices, the corner forces summed per particle by padded adds. No gather or
    scatter, except a gather of `rest_offset` into the families when one is given.

    Args:
        grid: the `ClothGrid` (`ClothTopology.grid`).
        families: `prepare_bending`'s `stencil.BendingFamilies`.
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        rest_offset: [e] rad, added to the families' rest angles; None: nothing added.

    Returns:
        [n, 3] N, the summed bending force on each particle.
    """
    lx, lv = lattice_view(x, grid), lattice_view(v, grid)
    rest = families.rest if rest_offset is None else (
        families.rest + family_values(rest_offset, grid.bend_order, grid.bend_families, grid))
    corners = family_corners(lx, grid.bend_families, grid) + family_corners(lv, grid.bend_families, grid)
    f = lattice_map(bending_force, grid)(*corners, families.ke, families.kd, rest)
    return from_lattice(lattice_forces(f, grid.bend_families, grid), grid, x.shape[0])

