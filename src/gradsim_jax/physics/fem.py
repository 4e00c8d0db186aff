"""FEM soft bodies: linear tetrahedra with the stable Neo-Hookean material (Smith, de Goes, Kim 2018).

PHYSICS.md "FEM soft bodies". For a tet (x0, x1, x2, x3) with rest edge matrix D = [X1 - X0, X2 - X0,
X3 - X0] (columns, from `FemParams.rest_x`): Dm = D^-1, rest volume V0 = det(D) / 6 = 1 / (6 det Dm).
Deformation F = [x1 - x0, x2 - x0, x3 - x0] Dm, Ic = tr(F^T F) (the full trace), J = det F,
dJ/dF = cof F (columns F1 x F2, F2 x F0, F0 x F1). With mu = V0 k_mu, lambda = V0 k_lambda, c = V0 k_damp
and alpha = 1 + 3 k_mu / (4 k_lambda) (written 1 + mu/lambda - mu/(4 lambda) in the paper and in Warp),

    P = mu F (1 - 1 / (Ic + 1)) + (lambda (J - alpha + a) + c dJ/dt) dJ/dF + c F_dot,

F_dot = [v1 - v0, v2 - v0, v3 - v0] Dm and dJ/dt = dJ/dF : F_dot = sum_i dJ/dx_i . (v_i - v0): both
damping terms see relative velocities only, so a rigidly translating tet is not damped (Warp 1.8 damps the
volume with absolute velocities). a is the activation (`FemParams.activation` + `FemControl`): it moves
the volume ratio the lambda term pulls J towards from alpha to alpha - a, so a > 0 contracts a tet and
a < 0 swells it (muscles).
Forces on x1..x3 are the columns of -P Dm^T; x0 gets minus their sum.

Known limitation (as in dflex/Warp): the c F_dot term is not rotation invariant. A rigid spin w gives
F_dot = [w]x F, so a spinning tet feels a braking torque (-2 V0 k_damp w at rest) and angular momentum is
not conserved while k_damp > 0; damping the strain rate sym(F^T F_dot) instead would not do that.

At rest (F = I) P = mu (3/4) I + lambda (1 - alpha) I = 0: alpha is chosen for that. The elastic part
derives from the energy V0 [k_mu/2 (Ic - 3) - k_mu/2 log(Ic + 1) + k_lambda/2 (J - alpha + a)^2]
(`fem_energy`), whose negative gradient the tests compare with the forces. Inverted tets (J < 0) stay
finite: Ic + 1 >= 1 and nothing divides by J.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from gradsim_jax.mathutil import safe_div
from gradsim_jax.physics.gather import (corner_major_layout, eager_if_concrete, gather_corners,
                                        gather_corners_major, scatter_corners, scatter_corners_major)
from gradsim_jax.typing import Array, pytree_dataclass
from gradsim_jax.vectors import cross3, materialize, materialize_cotangent, unstack


@pytree_dataclass
class FemTopology:
    """tets: [k, 4] int32 particle indices (x0, x1, x2, x3) of positively oriented tetrahedra.
    surface: [f, 3] int32 boundary triangles (wound outward), for rendering only.
    incidence: the tets' `corner_incidence` table [K, n] int32 (None: forces summed by scatter-add;
    `Scene.build` makes it)."""

    tets: Array
    surface: Array
    incidence: Optional[Array] = None


@pytree_dataclass
class FemParams:
    """Per tet [k]: k_mu (Pa, shear), k_lambda (Pa, volume), k_damp (Pa s), activation (target-volume
    shift, 1); all scaled by the rest volume. rest_x [n, 3] m: the rest configuration the tets take their
    rest shapes from. particle_volume [n] m^3: the volume each particle's mass stands for, mass = density x
    particle_volume (the sum of V0 / 4 over its tets when lumped; a whole grid cell for Warp's soft grids; 0
    for particles of no tet): what a density sets (`sysid` quantity "density"); the forces never read it."""

    k_mu: Array
    k_lambda: Array
    k_damp: Array
    activation: Array
    rest_x: Array
    particle_volume: Array


@pytree_dataclass
class FemControl:
    """tet_activation [k]: added to `FemParams.activation` (muscles); None: nothing."""

    tet_activation: Optional[Array] = None


def _edges(tets, x):
    """[k, 3, 3] edge matrices [x1 - x0, x2 - x0, x3 - x0] (columns) of the tets at positions x [n, 3]."""
    x0 = x[tets[:, 0]]
    return jnp.stack([x[tets[:, i]] - x0 for i in (1, 2, 3)], axis=-1)


def rest_shapes(rest_x, tets):
    """Per-tet inverse rest edge matrix Dm [k, 3, 3] (1/m) and rest volume V0 [k] (m^3, > 0 for positive
    tets); a degenerate rest tet gets Dm = 0 (no force) instead of a NaN.

    Args:
        rest_x: [n, 3] m, rest positions of the particles.
        tets: [k, 4] int, particle indices (x0, x1, x2, x3) of each tet.

    Returns:
        (Dm [k, 3, 3] 1/m; V0 [k] m^3).
    """
    d = _edges(tets, rest_x)
    det = _det(d)
    dm = safe_div(_cofactor(d).swapaxes(-1, -2), det[:, None, None])  # adj(D) / det(D)
    return dm, det / 6.0


def _cofactor(m):
    """Cofactor matrix of [..., 3, 3] (d det(m) / dm): columns c1 x c2, c2 x c0, c0 x c1."""
    c0, c1, c2 = m[..., :, 0], m[..., :, 1], m[..., :, 2]
    return jnp.stack([jnp.cross(c1, c2), jnp.cross(c2, c0), jnp.cross(c0, c1)], axis=-1)


def _det(m):
    """det of [..., 3, 3] as a triple product (smooth everywhere, unlike an LU-based det's gradient)."""
    return jnp.sum(m[..., :, 0] * jnp.cross(m[..., :, 1], m[..., :, 2]), axis=-1)


def rest_alpha(k_mu, k_lambda):
    """alpha = 1 + 3 k_mu / (4 k_lambda): the volume ratio at which the stress vanishes at F = I (1 when
    k_lambda = 0).

    Args:
        k_mu: Pa, shear modulus (any shape).
        k_lambda: Pa, volume modulus, broadcasting against `k_mu`.

    Returns:
        Dimensionless alpha of the broadcast shape.
    """
    return 1.0 + 0.75 * safe_div(k_mu, k_lambda)


def tet_stress(xs, vs, dm, k_mu, k_lambda, k_damp, activation):
    """First Piola-Kirchhoff stress P [3, 3] (Pa) of one tet (xs, vs: [4, 3]; dm [3, 3]); unscaled moduli.

    Args:
        xs: [4, 3] m, positions of the tet's vertices (x0, x1, x2, x3).
        vs: [4, 3] m/s, their velocities.
        dm: [3, 3] 1/m, the inverse rest edge matrix Dm.
        k_mu: () Pa, shear modulus (not scaled by the rest volume).
        k_lambda: () Pa, volume modulus.
        k_damp: () Pa s, damping.
        activation: () dimensionless, the shift of the target volume ratio.

    Returns:
        [3, 3] Pa, the stress P.
    """
    f = (xs[1:] - xs[0]).T @ dm
    f_dot = (vs[1:] - vs[0]).T @ dm
    ic = jnp.sum(f * f)
    dj_df = _cofactor(f)
    j = jnp.sum(f[:, 0] * dj_df[:, 0])  # det F, expanded along the first column
    j_dot = jnp.sum(dj_df * f_dot)
    volume = k_lambda * (j - rest_alpha(k_mu, k_lambda) + activation) + k_damp * j_dot
    return k_mu * f * (1.0 - 1.0 / (ic + 1.0)) + volume * dj_df + k_damp * f_dot


def tet_force_matrices(xs, vs, dm, rest_volume, k_mu, k_lambda, k_damp, activation):
    """Elastic, volume and damping forces [4, 3] (N) on the vertices (x0, x1, x2, x3) of one tet (xs, vs:
    [4, 3]), as `tet_force` but with 3 x 3 products: the faster kernel for small meshes.

    Args:
        xs: [4, 3] m, positions of the tet's vertices (x0, x1, x2, x3).
        vs: [4, 3] m/s, their velocities.
        dm: [3, 3] 1/m, the inverse rest edge matrix Dm.
        rest_volume: () m^3, the rest volume V0.
        k_mu: () Pa, shear modulus.
        k_lambda: () Pa, volume modulus.
        k_damp: () Pa s, damping.
        activation: () dimensionless, the shift of the target volume ratio.

    Returns:
        [4, 3] N, the force on each vertex.
    """
    p = tet_stress(xs, vs, dm, k_mu, k_lambda, k_damp, activation)
    h = -rest_volume * (p @ dm.T)  # columns: forces on x1, x2, x3
    return jnp.concatenate([-jnp.sum(h, axis=1)[None], h.T])


#: `fem_forces` runs the entry-wise kernel `tet_force` on corner-major blocks from this many tets on, and
#: `tet_force_matrices` (3 x 3 products, [k, 4, 3] corners) below, where the entry-wise kernel's more
#: numerous buffers cost more than they save (a step forward / with its gradient, 2-core Xeon: 48 tets
#: 4 / 11 us against 5-9 / 15-25 us; 1296 tets 73 / 231 us against 75 / 257 us; 3072 tets 187 / 568 us
#: against 122 / 432 us; 24,576 tets 1.28 / 3.50 ms against 0.82 / 2.47 ms).
ENTRYWISE_MIN_TETS = 2048


def _columns_times(a, b):
    """(A B)[i][j] = sum_c A[i][c] B[c][j] of 3 x 3 matrices given as nested tuples of entries."""
    return tuple(tuple(sum(a[i][c] * b[c][j] for c in range(3)) for j in range(3)) for i in range(3))


def tet_force(x0, x1, x2, x3, v0, v1, v2, v3, dm, rest_volume, k_mu, k_lambda, k_damp, activation):
    """Elastic, volume and damping forces (f0, f1, f2, f3), each [3] (N), on the vertices of one tet
    (positions x0..x3 and velocities v0..v3 [3], dm [3, 3]): -V0 P Dm^T for the columns x1..x3, minus
    their sum for x0, with P of `tet_stress`.

    Written on the matrices' entries (`vectors.unstack`), no 3 x 3 products or stacks of 3-vectors inside,
    F, its cofactor and the stress's scalars `materialize`d, so that XLA's CPU backend neither slices nor
    recomputes per entry (vmapped over corner-major [k, 3] blocks).

    Args:
        x0: [3] m, position of vertex 0.
        x1: [3] m, position of vertex 1.
        x2: [3] m, position of vertex 2.
        x3: [3] m, position of vertex 3.
        v0: [3] m/s, velocity of vertex 0.
        v1: [3] m/s, velocity of vertex 1.
        v2: [3] m/s, velocity of vertex 2.
        v3: [3] m/s, velocity of vertex 3.
        dm: [3, 3] 1/m, the inverse rest edge matrix Dm.
        rest_volume: () m^3, the rest volume V0.
        k_mu: () Pa, shear modulus.
        k_lambda: () Pa, volume modulus.
        k_damp: () Pa s, damping.
        activation: () dimensionless, the shift of the target volume ratio.

    Returns:
        (f0, f1, f2, f3), each [3] N.
    """
    xs = [unstack(x, -1) for x in (x0, x1, x2, x3)]
    vs = [unstack(v, -1) for v in (v0, v1, v2, v3)]
    d = tuple(unstack(row) for row in unstack(dm))  # d[c][j]
    ds = tuple(tuple(xs[c + 1][i] - xs[0][i] for c in range(3)) for i in range(3))  # edge matrix, [i][c]
    ds_dot = tuple(tuple(vs[c + 1][i] - vs[0][i] for c in range(3)) for i in range(3))
    f = tuple(tuple(materialize(e) for e in row) for row in _columns_times(ds, d))
    f_dot = tuple(tuple(materialize(e) for e in row) for row in _columns_times(ds_dot, d))
    col = [tuple(f[i][j] for i in range(3)) for j in range(3)]
    cof_cols = [cross3(col[1], col[2]), cross3(col[2], col[0]), cross3(col[0], col[1])]
    cof = tuple(tuple(materialize(cof_cols[j][i]) for j in range(3)) for i in range(3))  # [i][j]
    ic = materialize(sum(f[i][j] * f[i][j] for i in range(3) for j in range(3)))
    det = sum(f[i][0] * cof[i][0] for i in range(3))  # det F, expanded along the first column
    det_dot = sum(cof[i][j] * f_dot[i][j] for i in range(3) for j in range(3))
    volume = materialize(k_lambda * (det - rest_alpha(k_mu, k_lambda) + activation) + k_damp * det_dot)
    shear = materialize(k_mu * (1.0 - 1.0 / (ic + 1.0)))
    p = tuple(tuple(materialize_cotangent(shear * f[i][j] + volume * cof[i][j] + k_damp * f_dot[i][j])
                    for j in range(3)) for i in range(3))
    # h = -V0 P Dm^T; column j is the force on x_{j+1}
    h = tuple(tuple(-rest_volume * sum(p[i][b] * d[j][b] for b in range(3)) for j in range(3)) for i in range(3))
    forces = [jnp.stack([h[i][j] for i in range(3)]) for j in range(3)]
    return (-(forces[0] + forces[1] + forces[2]), *forces)


def _activation(params, activation):
    return params.activation if activation is None else params.activation + activation


def prepare_fem(topology, params):
    """Dm [k, 3, 3] and V0 [k] (`rest_shapes`), and for meshes of `ENTRYWISE_MIN_TETS` tets or more the
    corners in corner-major order with the incidence table renumbered for it (`gather.corner_major_flat`,
    `corner_major_incidence`; else None, None): computed once per rollout by `simulate`, evaluated while
    tracing when the rest positions and tets are concrete (no constant folding by XLA).

    Args:
        topology: the scene's Topology; uses `topology.fem` (tets [k, 4], incidence).
        params: the scene's Params; uses `params.fem.rest_x` [n, 3] m.

    Returns:
        (Dm [k, 3, 3] 1/m, V0 [k] m^3, flat [4 k] int or None, corner-major incidence [K, n] int or None).
    """
    tets = topology.fem.tets
    dm, rest_volume = eager_if_concrete(rest_shapes, params.fem.rest_x, tets)
    if tets.shape[0] < ENTRYWISE_MIN_TETS:
        return dm, rest_volume, None, None
    return (dm, rest_volume) + corner_major_layout(tets, topology.fem.incidence)


def fem_forces(topology, params, x, v, activation=None, prepared=None):
    """Tetrahedral FEM forces per particle: [n, 3] N. `activation` [k] is added to `params.fem.activation`;
    `prepared`: `prepare_fem(topology, params)` (computed here when None).

    Args:
        topology: the scene's Topology; uses `topology.fem` (tets [k, 4], incidence).
        params: the scene's Params; uses `params.fem` (k_mu Pa, k_lambda Pa, k_damp Pa s, activation, rest_x).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        activation: [k] dimensionless, added to `params.fem.activation`; None: nothing added.
        prepared: `prepare_fem(topology, params)`; None computes it here.

    Returns:
        [n, 3] N, the summed FEM force on each particle.
    """
    tets, incidence = topology.fem.tets, topology.fem.incidence
    if tets.shape[0] == 0:
        return jnp.zeros_like(x)
    dm, rest_volume, flat, table = prepare_fem(topology, params) if prepared is None else prepared
    params = params.fem
    act = _activation(params, activation)
    args = (params.k_mu, params.k_lambda, params.k_damp, act)
    if tets.shape[0] < ENTRYWISE_MIN_TETS:
        f = jax.vmap(tet_force_matrices)(gather_corners(x, tets, incidence), gather_corners(v, tets, incidence),
                                         dm, rest_volume, *args)
        return scatter_corners(f, tets, x.shape[0], incidence)
    xs, vs = (unstack(gather_corners_major(a, tets, table, flat)) for a in (x, v))
    f = jax.vmap(tet_force)(*xs, *vs, dm, rest_volume, *args)
    return scatter_corners_major(jnp.stack(f), tets, x.shape[0], table, flat)


def tet_energy_density(f, k_mu, k_lambda, activation):
    """Stable Neo-Hookean energy per rest volume (J/m^3) at deformation gradient f [3, 3].

    Args:
        f: [3, 3] dimensionless, the deformation gradient F.
        k_mu: () Pa, shear modulus.
        k_lambda: () Pa, volume modulus.
        activation: () dimensionless, the shift of the target volume ratio.

    Returns:
        () J/m^3, the energy density psi(F).
    """
    ic = jnp.sum(f * f)
    c = _det(f) - rest_alpha(k_mu, k_lambda) + activation
    return 0.5 * k_mu * (ic - 3.0) - 0.5 * k_mu * jnp.log(ic + 1.0) + 0.5 * k_lambda * c * c


def fem_energy(topology, params, x, activation=None):
    """Elastic energy sum V0 psi(F) of the tets (J); -grad of it w.r.t. x is the undamped `fem_forces`.

    Args:
        topology: the scene's Topology; uses `topology.fem.tets` [k, 4].
        params: the scene's Params; uses `params.fem` (k_mu Pa, k_lambda Pa, activation, rest_x [n, 3] m).
        x: [n, 3] m, particle positions.
        activation: [k] dimensionless, added to `params.fem.activation`; None: nothing added.

    Returns:
        () J, the elastic energy (0 without tets).
    """
    tets, params = topology.fem.tets, params.fem
    if tets.shape[0] == 0:
        return jnp.zeros((), x.dtype)
    dm, rest_volume = rest_shapes(params.rest_x, tets)
    f = _edges(tets, x) @ dm
    psi = jax.vmap(tet_energy_density)(f, params.k_mu, params.k_lambda, _activation(params, activation))
    return jnp.sum(rest_volume * psi)


def fem_stress(topology, params, x, v, activation=None):
    """First Piola-Kirchhoff stress P [k, 3, 3] (Pa) of every tet, damping included.

    Args:
        topology: the scene's Topology; uses `topology.fem.tets` [k, 4].
        params: the scene's Params; uses `params.fem` (moduli, activation, rest_x [n, 3] m).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        activation: [k] dimensionless, added to `params.fem.activation`; None: nothing added.

    Returns:
        [k, 3, 3] Pa, the stress of each tet.
    """
    tets, params = topology.fem.tets, params.fem
    dm, _ = rest_shapes(params.rest_x, tets)
    return jax.vmap(tet_stress)(x[tets], v[tets], dm, params.k_mu, params.k_lambda, params.k_damp,
                                _activation(params, activation))


def fem_volumes(topology, x):
    """Signed volumes [k] (m^3) of the tets at positions x [n, 3].

    Args:
        topology: the scene's Topology; uses `topology.fem.tets` [k, 4].
        x: [n, 3] m, particle positions.

    Returns:
        [k] m^3, signed volumes (negative for inverted tets).
    """
    return _det(_edges(topology.fem.tets, x)) / 6.0
