"""Host-side check of the explicit step against the stiffness and damping of the elastic elements.

Semi-implicit Euler on the linear system M x'' = -K x - C x' is stable, for one mode of stiffness k, damping
c and mass m (a = dt^2 k / m, b = dt c / m), exactly when a + 2 b < 4: the step's matrix on (x, dt v),
[[1 - a, 1 - b], [-a, 1 - b]], has determinant 1 - b and trace 2 - a - b (Jury's test: 0 < b < 2 and
a + 2 b < 4). For a mesh, `step_report` takes the largest eigenvalues of M^-1 K and of M^-1 C (power
iteration on M^-1/2 K M^-1/2, which has the same spectrum) and checks

    dt^2 lambda_max(M^-1 K) + 2 dt lambda_max(M^-1 C) < 4,

which is the exact limit when the stiffest and the most damped mode coincide (they do for a mesh of
similar elements: both are the lightest particles' local modes) and otherwise errs on the safe side.

K and C are linearized about the rest shape of the tets (F = I; PHYSICS.md "FEM soft bodies"): there the
stable Neo-Hookean elasticity tensor is dP/dF = (3/4) mu (I + T) + (mu / 8 + lambda) vec(I) vec(I)^T +
lambda (1 - alpha + a) (vec(I) vec(I)^T - T) (T: dF^T/dF, a: the activation) and the damping tensor
c (I + vec(I) vec(I)^T) (the two relative-velocity terms at F = I). Springs count along their axis at the
current positions (ke and kd). Cloth triangles, bending and ground contact are not counted here
(`contact_report` checks the contact).

Why: the damping of a light particle bounds the step long before its stiffness does when k_damp is large
relative to dt k_lambda (a 2.2 g particle of a ball of tets at 32 substeps: its motion turned NaN at
k_damp 18.9 Pa s, where this criterion gives 3.99), and an explicit rollout past the limit does not
degrade gracefully: it blows up within frames. `simulate` warns (`StepWarning`) from this report, and a
fit of `fem_damping` keeps the damping under the limit (`sysid`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np


class StepWarning(UserWarning):
    """The time step is too long for the stiffness and damping of the elastic elements (`step_report`)."""


#: Fraction of the stable limit that a fit of the damping may reach (`damping_limit`).
DAMPING_MARGIN = 0.98


@dataclasses.dataclass(frozen=True)
class StepReport:
    """Explicit-step stability of a scene's tets and springs (`step_report`); rates in 1/s^2 and 1/s.

    stiffness_rate: lambda_max(M^-1 K) (1/s^2; its square root is the highest angular frequency).
    damping_rate: lambda_max(M^-1 C) (1/s).
    dt: the step checked (s; None: not checked). criterion: dt^2 stiffness_rate + 2 dt damping_rate (< 4 is
    stable; 0 when unchecked). max_stable_dt: the largest step for which the criterion holds (s).
    elements: how many tets and springs were counted (0: nothing to check).
    """

    stiffness_rate: float = 0.0
    damping_rate: float = 0.0
    dt: Optional[float] = None
    elements: int = 0

    @property
    def criterion(self) -> float:
        return 0.0 if self.dt is None else self.dt ** 2 * self.stiffness_rate + 2.0 * self.dt * self.damping_rate

    @property
    def max_stable_dt(self) -> float:
        """The positive root of dt^2 k + 2 dt c = 4 (inf when there is nothing stiff or damped)."""
        k, c = self.stiffness_rate, self.damping_rate
        if k <= 0.0 and c <= 0.0:
            return math.inf
        if k <= 0.0:
            return 2.0 / c
        return 4.0 / (c + math.sqrt(c * c + 4.0 * k))

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
                f"the stiffness or damping (k_damp of the tets, kd of the springs)")


def _free_inverse_sqrt_mass(topology, params) -> np.ndarray:
    """[n] 1 / sqrt(m) of the free particles, 0 for pinned and massless ones (they do not move)."""
    mass = np.asarray(params.particles.mass, np.float64)
    free = ~np.asarray(topology.particles.pinned) & (mass > 0.0)
    return np.where(free, 1.0 / np.sqrt(np.where(free, mass, 1.0)), 0.0)


def _tet_gradients(rest_x, tets):
    """Shape-function gradients [k, 4, 3] (1/m) and rest volumes [k] (m^3) of the tets."""
    x = rest_x[tets]  # [k, 4, 3]
    d = np.stack([x[:, i] - x[:, 0] for i in (1, 2, 3)], axis=-1)  # columns
    det = np.linalg.det(d)
    ok = np.abs(det) > 0.0
    dm = np.zeros_like(d)
    dm[ok] = np.linalg.inv(d[ok])  # rows: gradients of the shape functions of x1, x2, x3
    return np.concatenate([-dm.sum(axis=1, keepdims=True), dm], axis=1), det / 6.0


def _sum_into(elements, forces, n: int) -> np.ndarray:
    """Per-particle sums [n, 3] of per-corner forces [E, k, 3] at the particles `elements` [E, k]."""
    idx = elements.reshape(-1)
    flat = forces.reshape(-1, 3)
    return np.stack([np.bincount(idx, weights=flat[:, a], minlength=n) for a in range(3)], axis=-1)


def _operators(topology, params, positions):
    """(K u, C u) of the tets and springs for displacements u [n, 3], or None when there are none."""
    tets = np.asarray(topology.fem.tets, np.int64)
    pairs = np.asarray(topology.springs.pairs, np.int64)
    n = positions.shape[0]
    parts = []
    if tets.shape[0]:
        fem = params.fem
        grads, volume = _tet_gradients(np.asarray(fem.rest_x, np.float64), tets)
        mu, lam = (np.asarray(a, np.float64) for a in (fem.k_mu, fem.k_lambda))
        alpha = 1.0 + 0.75 * np.divide(mu, lam, out=np.zeros_like(mu), where=lam != 0.0)
        shift = lam * (1.0 - alpha + np.asarray(fem.activation, np.float64))
        damp = np.asarray(fem.k_damp, np.float64)
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
        coef = {"k": np.asarray(sp.ke, np.float64), "c": np.asarray(sp.kd, np.float64)}

        def spring_op(u, which):
            rel = np.sum((u[pairs[:, 0]] - u[pairs[:, 1]]) * axis, axis=1) * coef[which]
            f = rel[:, None] * axis
            return _sum_into(pairs, np.stack([f, -f], axis=1), n)

        parts.append(spring_op)
    if not parts:
        return None
    return lambda u, which: sum(op(u, which) for op in parts), int(tets.shape[0] + pairs.shape[0])


def _largest_eigenvalue(matvec, s, iterations: int, rtol: float) -> float:
    """lambda_max of the symmetric positive semidefinite S A S (S = diag(s), s [n]) by power iteration with
    the Rayleigh quotient; 0 when it is zero."""
    rng = np.random.default_rng(0)
    u = rng.standard_normal((s.shape[0], 3)) * s[:, None]
    lam = 0.0
    for _ in range(iterations):
        norm = np.linalg.norm(u)
        if norm == 0.0:
            return 0.0
        u = u / norm
        w = s[:, None] * matvec(s[:, None] * u)
        new = float(np.sum(u * w))
        if abs(new - lam) <= rtol * abs(new):
            return max(new, 0.0)
        lam, u = new, w
    return max(lam, 0.0)


def step_report(topology, params, state=None, dt: Optional[float] = None, *, iterations: int = 500,
                rtol: float = 1e-6) -> StepReport:
    """Host-side stability check of the explicit step `dt` (s; None: rates only) for the tets and springs of
    a scene (module docstring). `state`: positions of the springs (None: the tets' rest positions, or the
    zeros). Inputs must be concrete (not traced). Cost: `iterations` passes over the elements at most."""
    n = int(np.asarray(params.particles.mass).shape[0])
    if state is not None:
        positions = np.asarray(state.particles.x, np.float64)
    elif np.asarray(params.fem.rest_x).shape[0] == n:
        positions = np.asarray(params.fem.rest_x, np.float64)
    else:
        positions = np.zeros((n, 3))
    ops = _operators(topology, params, positions)
    if ops is None:
        return StepReport(dt=None if dt is None else float(dt))
    op, count = ops
    s = _free_inverse_sqrt_mass(topology, params)
    k = _largest_eigenvalue(lambda u: op(u, "k"), s, iterations, rtol)
    c = _largest_eigenvalue(lambda u: op(u, "c"), s, iterations, rtol)
    return StepReport(stiffness_rate=k, damping_rate=c, dt=None if dt is None else float(dt), elements=count)


def damping_limit(report: StepReport, damping_scale: float = 1.0, margin: float = DAMPING_MARGIN) -> float:
    """The largest factor on every element's damping that keeps `report`'s step (its dt) within `margin` of
    the stability limit: (4 margin - dt^2 k) / (2 dt c) times `damping_scale` (the damping the report was
    made with, as the same factor); inf when nothing is damped or no dt was checked, 0 when the stiffness
    alone already exceeds it."""
    if report.dt is None or report.damping_rate <= 0.0:
        return math.inf
    room = 4.0 * margin - report.dt ** 2 * report.stiffness_rate
    return max(room, 0.0) / (2.0 * report.dt * report.damping_rate) * damping_scale
