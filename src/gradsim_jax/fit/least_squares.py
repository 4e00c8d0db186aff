"""Levenberg-Marquardt polish of a nonlinear least-squares problem min |r(z)|^2 over a flat vector z.

The caller supplies the residual `r(z)` and its linearization `(r, J)` (typically compiled functions; a
Jacobian from forward-mode differentiation, one column per unknown, so this is for a few hundred unknowns
at most); the iteration itself runs on the host in float64: a damped Gauss-Newton step solves
(J^T J + lambda diag(J^T J)) dz = -J^T r, is accepted when it lowers the cost (then lambda / 4), else
lambda * 4 and again (Marquardt 1963; Nocedal and Wright, "Numerical Optimization", section 10.3).

Measured against optimistix's `LevenbergMarquardt` (a JAX solver that runs the whole loop in one compiled
`while_loop`) on the system-identification test scenes: see `benchmarks/bench_least_squares.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass
class LeastSquaresResult:
    """z: the solution [m] (float64); steps: [(cost |r|^2, z)] after each accepted step; cost: |r(z)|^2;
    residual [k] and jacobian [k, m_free] at z (the free columns only); grad_norm: |grad of |r|^2| over the
    free entries; gauss_newton_step: the undamped Gauss-Newton step [m_free] from z (near 0 at a minimum)."""

    z: np.ndarray
    steps: list
    cost: float
    residual: np.ndarray
    jacobian: np.ndarray
    grad_norm: float
    gauss_newton_step: np.ndarray


def forward_jacobian(fn: Callable, z):
    """(fn(z), the columns of its Jacobian [z.size, *fn(z).shape]): `jax.linearize` once, then one
    forward-mode pass per unknown (`lax.map` over the identity), so memory is one column's. For the few
    unknowns of a Levenberg-Marquardt residual; traceable (call it inside a jitted function)."""
    r, lin = jax.linearize(fn, z)
    return r, jax.lax.map(lin, jnp.eye(z.size, dtype=z.dtype))


def levenberg_marquardt(residual: Optional[Callable], linearize: Callable, z0, *, mask=None, steps: int = 10,
                        tol: float = 1e-6, lam: float = 1e-3,
                        on_step: Optional[Callable[[int, float], None]] = None) -> LeastSquaresResult:
    """Up to `steps` accepted Levenberg-Marquardt steps on min |residual(z)|^2 from z0 [m].

    residual(z) -> r [k]; linearize(z) -> (r [k], J [k, m]); both take and return numpy float64.
    residual=None evaluates trial steps with `linearize` and keeps the accepted trial's Jacobian: one compiled
    function instead of two (for a few unknowns a Jacobian costs little more than a residual, and compiling
    a second program of the whole rollout and render costs more than the runs it would save).
    mask: [m] bool, the entries that move (None: all); the others keep their values.
    Stops when no damped step lowers the cost (10 tries), when a step improves the cost by less than
    `tol` relative, or when it moves z by less than 1e-7. `on_step(k, cost)` after each accepted step.
    """
    zf = np.array(z0, np.float64)
    mask = np.ones(zf.shape, bool) if mask is None else np.asarray(mask, bool)

    def linearized(z):
        r, jac = linearize(z)
        return np.asarray(r, np.float64), np.asarray(jac, np.float64)[:, mask]

    r, J = linearized(zf)
    cost = float(r @ r)
    records = []
    for _ in range(steps):
        g = J.T @ r
        H = J.T @ J
        diag = np.diag(H).copy()
        diag[diag <= 0] = 1e-12
        accepted = False
        if not (np.all(np.isfinite(H)) and np.all(np.isfinite(g))):
            break  # a non-finite Jacobian gives no step (solve would return NaN, or fail on a singular matrix)
        for _ in range(10):
            dz = np.linalg.solve(H + lam * np.diag(diag), -g)
            trial = zf.copy()
            trial[mask] += dz
            if residual is None:
                r_new, J_new = linearized(trial)
            else:
                r_new = np.asarray(residual(trial), np.float64)
            new_cost = float(r_new @ r_new)
            if np.isfinite(new_cost) and new_cost < cost:
                accepted = True
                break
            lam *= 4.0
        if not accepted:
            break
        improvement = (cost - new_cost) / max(cost, 1e-300)
        zf, lam = trial, max(lam / 4.0, 1e-9)
        r, J = (r_new, J_new) if residual is None else linearized(zf)
        cost = float(r @ r)
        records.append((cost, zf.copy()))
        if on_step is not None:
            on_step(len(records), cost)
        if improvement < tol or np.max(np.abs(dz)) < 1e-7:
            break
    finite = bool(np.all(np.isfinite(J)) and np.all(np.isfinite(r)))
    # lstsq's SVD does not converge on non-finite entries: then the step is unknown (NaN), not an exception.
    step = np.linalg.lstsq(J, -r, rcond=None)[0] if finite else np.full(J.shape[1], np.nan)
    return LeastSquaresResult(z=zf, steps=records, cost=cost, residual=r, jacobian=J,
                              grad_norm=float(np.linalg.norm(2.0 * (J.T @ r))), gauss_newton_step=step)
