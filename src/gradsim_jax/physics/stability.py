"""Host-side check of the explicit step against the stiffness and damping of the elastic elements.

Semi-implicit Euler on the linear system M x'' = -K x - C x' is stable, for one mode of stiffness k, damping
c and mass m (a = dt^2 k / m, b = dt c / m), exactly when a + 2 b < 4: the step's matrix on (x, dt v),
[[1 - a, 1 - b], [-a, 1 - b]], has determinant 1 - b and trace 2 - a - b (Jury's test: 0 < b < 2 and
a + 2 b < 4). For a mesh, `step_report` finds the stiffest mode (the top eigenvector of M^-1/2 K M^-1/2,
by Lanczos on its products with vectors) and the most damped one (of M^-1/2 C M^-1/2), takes each one's own
k and c (Rayleigh quotients) and checks

    max over those two modes of dt^2 k + 2 dt c < 4.

That is exact when the two modes coincide (a mesh of similar elements, where both are the lightest
particles' local modes: the ball of tets below) and for a mode that is only stiff or only damped; between
distinct modes it errs on the safe side near the stiffness limit. The README's 10 x 10 cloth: at 8 substeps
it reads 4.56 (the stiffness alone 3.94) and runs stable for 300 frames; at 6 it reads 7.83 and blows up.
The largest k with the largest c would read 5.24 and 8.74.

K and C are the forces' derivatives at the rest shape (where the tests compare them with JAX's, float64):
- tets (PHYSICS.md "FEM soft bodies"), at F = I: the stable Neo-Hookean elasticity tensor dP/dF =
  (3/4) mu (I + T) + (mu / 8 + lambda) vec(I) vec(I)^T + lambda (1 - alpha + a) (vec(I) vec(I)^T - T)
  (T: dF^T/dF, a: the activation) and the damping tensor c (I + vec(I) vec(I)^T);
- membrane triangles (`physics.cloth`): A0 ke G^-1 (x) I plus the area term's ka (g g^T / A0 + c Hess(area))
  (g = grad(area), c = its value at rest), and A0 kd (G^-1 (x) I + g g^T / A0^2);
- bending hinges: |e| ke d d^T and |e| kd d d^T along the force direction d (exact where the angle is at
  its rest value);
- springs along their axis at the current positions (ke and kd).
Ground contact is not counted here (`contact_report` checks it), nor aerodynamics or rigid bodies.

Why: the damping of a light particle bounds the step long before its stiffness does when k_damp is large
relative to dt k_lambda (a 2.2 g particle of a ball of tets at 32 substeps: its motion turned NaN at
k_damp 18.9 Pa s, where this criterion gives 3.99), and an explicit rollout past the limit does not
degrade gracefully: it blows up within frames. `simulate` warns (`StepWarning`) from this report, and the
system-identification fits keep their quantities inside it (`sysid.bounds.stable_bounds`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import jax
import numpy as np

from gradsim_jax.compilation import on_host
from gradsim_jax.physics.cloth import bending_directions
from gradsim_jax.physics.cloth import rest_shapes as membrane_rest_shapes
from gradsim_jax.physics.fem import rest_shapes as fem_rest_shapes
from gradsim_jax.physics.gather import eager_if_concrete
from gradsim_jax.physics.particles import free_inverse_mass


class StepWarning(UserWarning):
    """The time step is too long for the stiffness and damping of the elastic elements (`step_report`)."""


#: Fraction of the stable limit that a fit may reach (`damping_limit`, `sysid.bounds.stable_bounds`).
STABILITY_MARGIN = 0.98


@dataclasses.dataclass(frozen=True)
class StepReport:
    """Explicit-step stability of a scene's elastic elements (`step_report`); rates in 1/s^2 and 1/s.

    stiffness_rate: lambda_max(M^-1 K) (1/s^2; its square root is the highest angular frequency).
    damping_rate: lambda_max(M^-1 C) (1/s).
    damping_of_stiffest, stiffness_of_most_damped: the damping rate of the stiffest mode and the stiffness rate
    of the most damped one (their Rayleigh quotients, the largest over a repeated eigenvalue's eigenspace; NaN:
    unknown, then the largest of each is used).
    dt: the step checked (s; None: not checked). criterion: the larger of dt^2 k + 2 dt c over those two modes
    (< 4 is stable; 0 when unchecked). max_stable_dt: the largest step for which it holds (s).
    elements: how many tets, springs, triangles and hinges were counted (0: nothing to check).
    """

    stiffness_rate: float = 0.0
    damping_rate: float = 0.0
    dt: Optional[float] = None
    elements: int = 0
    damping_of_stiffest: float = math.nan
    stiffness_of_most_damped: float = math.nan

    def _pairs(self):
        """(k, c) of the two modes the criterion checks: the stiffest, with its own damping, and the most
        damped, with its own stiffness (without those: the largest of each, the conservative pair)."""
        k, c = self.stiffness_rate, self.damping_rate
        ck = c if math.isnan(self.damping_of_stiffest) else self.damping_of_stiffest
        kc = k if math.isnan(self.stiffness_of_most_damped) else self.stiffness_of_most_damped
        return (k, ck), (kc, c)

    @property
    def criterion(self) -> float:
        if self.dt is None:
            return 0.0
        return max(self.dt ** 2 * k + 2.0 * self.dt * c for k, c in self._pairs())

    @property
    def max_stable_dt(self) -> float:
        """The largest dt with dt^2 k + 2 dt c < 4 for both modes (inf when nothing is stiff or damped)."""
        return min(_root(k, c) for k, c in self._pairs())

    @property
    def stable(self) -> bool:
        return self.dt is None or self.criterion < 4.0

    @property
    def message(self) -> str:
        """What is wrong and what to do, or "" when nothing is."""
        if self.stable:
            return ""
        factor = math.ceil(self.dt / (0.8 * self.max_stable_dt))
        return (f"the time step {self.dt:.3g} s is too long for the elastic elements: dt^2 lambda_max(M^-1 K) + "
                f"2 dt lambda_max(M^-1 C) = {self.criterion:.3g} (stiffness {self.dt ** 2 * self.stiffness_rate:.3g}, "
                f"damping {2.0 * self.dt * self.damping_rate:.3g}) must stay under 4, so the explicit step will blow "
                f"up; the stable step is {self.max_stable_dt:.3g} s: use {factor} times as many substeps, or lower "
                f"the stiffness or damping (k_damp of the tets, tri_kd and bend_kd of the cloth, kd of the springs)")


def _root(k: float, c: float) -> float:
    """The positive root of dt^2 k + 2 dt c = 4 (inf for k = c = 0)."""
    if k <= 0.0 and c <= 0.0:
        return math.inf
    if k <= 0.0:
        return 2.0 / c
    return 4.0 / (c + math.sqrt(c * c + 4.0 * k))


def _free_inverse_sqrt_mass(topology, params) -> np.ndarray:
    """[n] 1 / sqrt(m) of the free particles, 0 for pinned and massless ones (`free_inverse_mass`)."""
    with jax.enable_x64(True), on_host(), jax.ensure_compile_time_eval():
        inverse = eager_if_concrete(free_inverse_mass, topology.particles, params.particles)
        return np.sqrt(np.asarray(inverse, np.float64))


def _tet_gradients(rest_x, tets):
    """Shape-function gradients [k, 4, 3] (1/m) and rest volumes [k] (m^3) of the tets: the rows of
    `fem.rest_shapes`' Dm are those of x1, x2, x3 (0 for a degenerate tet)."""
    with jax.enable_x64(True), on_host(), jax.ensure_compile_time_eval():  # on the host in float64, also inside a trace
        dm, volume = (np.asarray(a, np.float64) for a in eager_if_concrete(fem_rest_shapes, rest_x, tets))
    return np.concatenate([-dm.sum(axis=1, keepdims=True), dm], axis=1), volume


def _per(value, count: int) -> np.ndarray:
    """A per-element parameter as float64 [count] (a scalar or a broadcastable array)."""
    return np.broadcast_to(np.asarray(value, np.float64), (count,))


def _sum_into(elements, forces, n: int) -> np.ndarray:
    """Per-particle sums [n, 3] of per-corner forces [E, k, 3] at the particles `elements` [E, k]."""
    idx = elements.reshape(-1)
    flat = forces.reshape(-1, 3)
    return np.stack([np.bincount(idx, weights=flat[:, a], minlength=n) for a in range(3)], axis=-1)


def _cross_matrix(a):
    """[..., 3, 3] matrices [a]x with [a]x b = a x b, for a [..., 3]."""
    z = np.zeros(a.shape[:-1])
    return np.stack([np.stack([z, -a[..., 2], a[..., 1]], -1), np.stack([a[..., 2], z, -a[..., 0]], -1),
                     np.stack([-a[..., 1], a[..., 0], z], -1)], -2)


def _membrane_matrices(rest_x, tris, cloth):
    """Per-triangle (K, C) [t, 6, 6] on the edge displacements (de_q, de_r) = (u_q - u_p, u_r - u_p), at rest
    (`physics.cloth`): K = A0 ke G^-1 (x) I + ka (g g^T / A0 + c Hess(area)), C = A0 kd (G^-1 (x) I + g g^T / A0^2)
    with g = grad(area) and c = 1 - alpha + activation the area term's value at rest."""
    with jax.enable_x64(True), on_host(), jax.ensure_compile_time_eval():
        shapes = eager_if_concrete(membrane_rest_shapes, rest_x, tris)
        gram_inv, area = (np.asarray(a, np.float64) for a in shapes)
    p, q, r = (rest_x[tris[:, k]] for k in range(3))
    e1, e2 = q - p, r - p
    cross = np.cross(e1, e2)
    twice = np.linalg.norm(cross, axis=-1)
    ok = (twice > 0.0) & (area > 0.0)
    n_hat = np.divide(cross, twice[:, None], out=np.zeros_like(cross), where=ok[:, None])
    eye = np.eye(3)
    membrane = np.einsum("tij,ab->tiajb", gram_inv, eye).reshape(-1, 6, 6)  # G^-1 (x) I3
    grad = 0.5 * np.concatenate([np.cross(e2, n_hat), np.cross(n_hat, e1)], axis=-1)  # d area / d(e1, e2)
    jac = np.concatenate([-_cross_matrix(e2), _cross_matrix(e1)], axis=-1)  # d(e1 x e2) / d(e1, e2) [t, 3, 6]
    proj = eye - n_hat[:, :, None] * n_hat[:, None, :]
    m = -_cross_matrix(n_hat)
    hess = np.einsum("tki,tkl,tlj->tij", jac, proj, jac) / np.where(ok, 2.0 * twice, 1.0)[:, None, None]
    hess[:, :3, 3:] += 0.5 * m
    hess[:, 3:, :3] += 0.5 * m.swapaxes(1, 2)
    ke, ka, kd, act = (_per(a, tris.shape[0]) for a in (cloth.tri_ke, cloth.tri_ka, cloth.tri_kd,
                                                         cloth.tri_activation))
    c = -np.divide(ke, ka, out=np.zeros_like(ke), where=ka != 0.0) + act
    a0 = np.where(ok, area, 0.0)
    inv_a0 = np.divide(1.0, a0, out=np.zeros_like(a0), where=ok)
    outer = grad[:, :, None] * grad[:, None, :]
    k = (a0 * ke)[:, None, None] * membrane + (ka * inv_a0)[:, None, None] * outer + (ka * c)[:, None, None] * hess
    damp = (a0 * kd)[:, None, None] * membrane + (kd * inv_a0)[:, None, None] * outer
    return k * ok[:, None, None], damp * ok[:, None, None]


def _hinge_gradients(x, edges):
    """The bending forces' direction d [e, 4, 3] per hinge and |e| [e] at positions x
    (`cloth.bending_directions`; 0 for a degenerate hinge)."""
    with jax.enable_x64(True), on_host(), jax.ensure_compile_time_eval():
        d, e_len, valid, _ = eager_if_concrete(_hinge_directions, np.asarray(x, np.float64), edges)
        return np.asarray(d, np.float64) * np.asarray(valid)[:, None, None], np.asarray(e_len, np.float64)


def _hinge_directions(x, edges):
    """`bending_directions` of every hinge `edges` [e, 4] at positions x [n, 3] (one compiled program)."""
    return jax.vmap(bending_directions)(x[edges])


def _operators(topology, params, positions):
    """(op(u, "k") = K u, op(u, "c") = C u) of the tets, springs, membrane triangles and bending hinges for
    displacements u [n, 3], and the number of elements; None when there are none."""
    tets = np.asarray(topology.fem.tets, np.int64)
    pairs = np.asarray(topology.springs.pairs, np.int64)
    tris = np.asarray(topology.cloth.triangles, np.int64)
    hinges = np.asarray(topology.cloth.bend_edges, np.int64)
    n = positions.shape[0]
    parts = []
    if tets.shape[0]:
        fem = params.fem
        grads, volume = _tet_gradients(np.asarray(fem.rest_x, np.float64), tets)
        mu, lam, act, damp = (_per(a, tets.shape[0]) for a in (fem.k_mu, fem.k_lambda, fem.activation, fem.k_damp))
        alpha = 1.0 + 0.75 * np.divide(mu, lam, out=np.zeros_like(mu), where=lam != 0.0)
        shift = lam * (1.0 - alpha + act)
        eye = np.eye(3)

        def tet_op(u, which):
            f = u[tets].swapaxes(1, 2) @ grads  # displacement gradient per tet [k, 3, 3]
            tr = np.trace(f, axis1=1, axis2=2)[:, None, None] * eye
            if which == "k":
                p = (0.75 * mu[:, None, None] * f + (mu / 8.0 + lam)[:, None, None] * tr
                     + shift[:, None, None] * (tr - f.swapaxes(1, 2)))
            else:
                p = damp[:, None, None] * (f + tr)
            return _sum_into(tets, volume[:, None, None] * (grads @ p.swapaxes(1, 2)), n)

        parts.append(tet_op)
    if pairs.shape[0]:
        sp = params.springs
        d = positions[pairs[:, 0]] - positions[pairs[:, 1]]
        length = np.linalg.norm(d, axis=1, keepdims=True)
        axis = np.divide(d, length, out=np.zeros_like(d), where=length > 0.0)
        spring_coef = {"k": _per(sp.ke, pairs.shape[0]), "c": _per(sp.kd, pairs.shape[0])}

        def spring_op(u, which):
            rel = np.sum((u[pairs[:, 0]] - u[pairs[:, 1]]) * axis, axis=1) * spring_coef[which]
            f = rel[:, None] * axis
            return _sum_into(pairs, np.stack([f, -f], axis=1), n)

        parts.append(spring_op)
    if tris.shape[0]:
        cloth_rest = np.asarray(params.cloth.rest_x, np.float64)
        k_tri, c_tri = _membrane_matrices(cloth_rest if cloth_rest.shape[0] == n else positions, tris,
                                          params.cloth)
        tri_mats = {"k": k_tri, "c": c_tri}

        def membrane_op(u, which):
            de = np.concatenate([u[tris[:, 1]] - u[tris[:, 0]], u[tris[:, 2]] - u[tris[:, 0]]], axis=-1)
            f = (tri_mats[which] @ de[:, :, None])[:, :, 0].reshape(-1, 2, 3)
            return _sum_into(tris, np.concatenate([-f.sum(axis=1, keepdims=True), f], axis=1), n)

        parts.append(membrane_op)
    if hinges.shape[0]:
        d, e_len = _hinge_gradients(positions, hinges)
        cl = params.cloth
        hinge_coef = {"k": e_len * _per(cl.bend_ke, hinges.shape[0]), "c": e_len * _per(cl.bend_kd, hinges.shape[0])}

        def bending_op(u, which):
            along = np.sum(d * u[hinges], axis=(1, 2)) * hinge_coef[which]
            return _sum_into(hinges, along[:, None, None] * d, n)

        parts.append(bending_op)
    if not parts:
        return None
    count = sum(int(a.shape[0]) for a in (tets, pairs, tris, hinges))
    return (lambda u, which: sum(op(u, which) for op in parts)), count


#: Up to this many free coordinates the eigenvalues come from the dense matrix (numpy), beyond it from Lanczos.
DENSE_MAX = 90


def _largest_eigenvalue(matvec, s, iterations: int, rtol: float, method: str):
    """(lambda_max, its unit eigenvectors [m, n, 3] or None) of the symmetric positive semidefinite S A S
    (S = diag(s), s [n]; A u = matvec(u) for u [n, 3]) over the free particles (s > 0); (0, None) for none. A
    few of them: the dense matrix's. Else `method` "lanczos" (scipy's ARPACK: `iterations` restarts at most,
    relative tolerance `rtol`) or "power" (power iteration, `iterations` steps at most, stopping when the
    Rayleigh quotient changes by less than `rtol`; fast, and low by up to a few % when the top eigenvalues
    cluster)."""
    free = np.flatnonzero(s > 0.0)
    n, dims = s.shape[0], 3 * free.size
    if dims == 0:
        return 0.0, None
    scale = s[free, None]

    def apply(flat):
        u = np.zeros((n, 3))
        u[free] = np.reshape(flat, (-1, 3)) * scale
        return (scale * matvec(u)[free]).ravel()

    def full(vec):
        out = np.zeros((1, n, 3))
        out[0, free] = np.reshape(vec, (-1, 3)) / max(float(np.linalg.norm(vec)), 1e-300)
        return out

    if dims <= DENSE_MAX:
        dense = np.stack([apply(col) for col in np.eye(dims)], axis=1)
        values, vectors = np.linalg.eigh(0.5 * (dense + dense.T))
        # The whole top eigenspace (a symmetric mesh repeats its top eigenvalue): which vector of it eigh
        # returns depends on rounding, its span does not.
        top = np.flatnonzero(values >= values[-1] - 1e-9 * abs(values[-1]))
        return max(float(values[-1]), 0.0), np.concatenate([full(vectors[:, j]) for j in top])
    start = np.random.default_rng(0).standard_normal(dims)
    if method == "power":
        u, lam, new = start / np.linalg.norm(start), 0.0, 0.0
        for _ in range(iterations):
            w = apply(u)
            new, norm = float(u @ w), float(np.linalg.norm(w))
            if norm == 0.0:
                return 0.0, None
            if abs(new - lam) <= rtol * abs(new):
                break
            lam, u = new, w / norm
        return max(new, 0.0), full(u)
    from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

    image = apply(start)
    if not np.any(image):  # nothing is stiff (or damped): ARPACK would stop on an all-zero Krylov space
        return 0.0, None
    operator = LinearOperator((dims, dims), matvec=apply, dtype=np.float64)
    try:
        values, vectors = eigsh(operator, k=1, which="LA", tol=rtol, maxiter=iterations, v0=start)
    except ArpackNoConvergence as e:  # the best estimate so far (from below), or the start's Rayleigh quotient
        if len(e.eigenvalues):
            values, vectors = e.eigenvalues, e.eigenvectors
        else:
            values, vectors = [float(start @ image) / float(start @ start)], start[:, None]
    except ArpackError:
        # A rank-deficient operator (a few damped elements in a large mesh) can exhaust its Krylov space
        # before ARPACK converges: the power iteration has no such failure.
        return _largest_eigenvalue(matvec, s, max(iterations, 200), rtol, "power")
    best = int(np.argmax(values))
    return max(float(values[best]), 0.0), full(vectors[:, best])


def _rayleigh(matvec, s, modes) -> float:
    """The largest u^T S A S u over unit vectors u in the span of the orthonormal `modes` [m, n, 3] (for one
    mode its Rayleigh quotient; 0 when None)."""
    if modes is None:
        return 0.0
    images = np.stack([s[:, None] * matvec(s[:, None] * u) for u in modes])
    gram = np.einsum("inc,jnc->ij", modes, images)
    return float(np.linalg.eigvalsh(0.5 * (gram + gram.T))[-1])


def step_report(topology, params, state=None, dt: Optional[float] = None, *, method: str = "lanczos",
                iterations: int = 500, rtol: float = 1e-3) -> StepReport:
    """Host-side stability check of the explicit step `dt` (s; None: rates only) for the tets, springs,
    membrane triangles and bending hinges of a scene (module docstring). `state`: positions of the springs
    and hinges (None: the tets' or the cloth's rest positions, or the zeros). Inputs must be concrete (not
    traced). `method`, `iterations`, `rtol`: how the largest eigenvalues are found (`_largest_eigenvalue`;
    up to 30 free particles, exactly; with "lanczos" at rtol 1e-3 the eigenvalues come out within about 3e-4
    of the converged ones). Cost with "lanczos": 0.04-0.2 s for the demo cloth's 400 triangles, 2-6 s for
    33k; `simulate`'s own check uses "power" with 30 steps (10 ms and 0.5-2 s, about 2 % low on those
    grids).

    Args:
        topology: the scene's Topology (tets, springs, triangles, hinges, pinned particles), concrete.
        params: the scene's Params (masses kg, the elements' stiffness and damping, rest positions m), concrete.
        state: a State whose particles.x [n, 3] m are the springs' and hinges' positions; None: the rest
            positions (the tets', else the cloth's) or zeros.
        dt: s, the step to check; None: the rates only.
        method: "lanczos" (scipy's ARPACK) or "power" (power iteration); ValueError otherwise.
        iterations: ARPACK restarts or power steps at most.
        rtol: relative tolerance of the eigenvalues.

    Returns:
        The StepReport (rates in 1/s^2 and 1/s).
    """
    n = int(np.asarray(params.particles.mass).shape[0])
    if state is not None:
        positions = np.asarray(state.particles.x, np.float64)
    elif np.asarray(params.fem.rest_x).shape[0] == n:
        positions = np.asarray(params.fem.rest_x, np.float64)
    elif np.asarray(params.cloth.rest_x).shape[0] == n:
        positions = np.asarray(params.cloth.rest_x, np.float64)
    else:
        positions = np.zeros((n, 3))
    ops = _operators(topology, params, positions)
    if ops is None:
        return StepReport(dt=None if dt is None else float(dt))
    op, count = ops
    s = _free_inverse_sqrt_mass(topology, params)
    if method not in ("lanczos", "power"):
        raise ValueError(f"method must be 'lanczos' or 'power'; got {method!r}")
    stiff, damp = (lambda u: op(u, "k")), (lambda u: op(u, "c"))
    k, k_mode = _largest_eigenvalue(stiff, s, iterations, rtol, method)
    c, c_mode = _largest_eigenvalue(damp, s, iterations, rtol, method)
    return StepReport(stiffness_rate=k, damping_rate=c, dt=None if dt is None else float(dt), elements=count,
                      damping_of_stiffest=_rayleigh(damp, s, k_mode), stiffness_of_most_damped=_rayleigh(stiff, s, c_mode))


def damping_limit(report: StepReport, damping_scale: float = 1.0, margin: float = STABILITY_MARGIN) -> float:
    """The largest factor on every element's damping that keeps `report`'s step (its dt) within `margin` of
    the stability limit (both of its modes: (4 margin - dt^2 k) / (2 dt c)) times `damping_scale` (the
    damping the report was made with, as the same factor); inf when nothing is damped or no dt was checked,
    0 when the stiffness alone already exceeds it.

    Args:
        report: a `step_report` made with a dt.
        damping_scale: dimensionless, the factor on the damping the report was made with.
        margin: dimensionless, the fraction of the stable limit (< 4) the criterion may reach.

    Returns:
        float, dimensionless, the largest damping factor (inf or 0 as above).
    """
    if report.dt is None:
        return math.inf
    limits = [max(4.0 * margin - report.dt ** 2 * k, 0.0) / (2.0 * report.dt * c)
              for k, c in report._pairs() if c > 0.0]
    return min(limits, default=math.inf) * damping_scale
