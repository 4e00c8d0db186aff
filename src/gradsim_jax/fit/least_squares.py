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

from gradsim_jax.fit.checkpoint import stop_polish_if_asked


@dataclasses.dataclass(frozen=True)
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


#: `forward_jacobian` pushes this many tangents through `fn` at once.
JACOBIAN_BATCH = 4


def forward_jacobian(fn: Callable, z, batch: int = JACOBIAN_BATCH):
    """(fn(z), the columns of its Jacobian [z.size, *fn(z).shape]): forward-mode passes of `batch` unknowns at
    a time (`jax.jvp` vectorized over a batch of the identity's columns, the batches under `lax.map`), so
    memory is `batch` columns' and each batch's primal is computed once. For the few unknowns of a
    Levenberg-Marquardt residual; traceable (call it inside a jitted function).

    On the pendulum demo's 60-frame residual (3 unknowns) this takes 4.5 s where `jax.linearize` and one
    linear pass per column took 7.5 s: the linearized function re-runs the renderer's rematerialized
    (`jax.checkpoint`) frames for every column.

    Args:
        fn: z -> a pytree of arrays (the residual), traceable.
        z: [m] the unknowns, a flat array.
        batch: tangents pushed through `fn` at once (clipped to 1..m).

    Returns:
        (fn(z), the Jacobian as a pytree like fn(z) whose leaves have a leading axis of z.size: leaf [m, *shape],
        column j = d leaf / d z[j]).
    """
    if z.size == 0:
        r = fn(z)
        return r, jax.tree.map(lambda a: jnp.zeros((0,) + jnp.shape(a), a.dtype), r)
    eye = jnp.eye(z.size, dtype=z.dtype)
    primal, cols = jax.lax.map(lambda t: jax.jvp(fn, (z,), (t,)), eye, batch_size=max(1, min(batch, z.size)))
    return jax.tree.map(lambda a: a[0], primal), cols


def levenberg_marquardt(residual: Optional[Callable], linearize: Callable, z0, *, mask=None, steps: int = 10,
                        tol: float = 1e-6, lam: float = 1e-3, step_tol: float = 1e-6,
                        on_step: Optional[Callable[[int, float], None]] = None) -> LeastSquaresResult:
    """Up to `steps` accepted Levenberg-Marquardt steps on min |residual(z)|^2 from z0 [m].

    residual(z) -> r [k]; linearize(z) -> (r [k], J [k, m]); both take and return numpy float64.
    Trial steps are evaluated with `linearize` (an accepted trial's Jacobian is then at hand) until one is
    rejected; from then on with `residual`, when given (None: always `linearize`). A residual's program is
    compiled only if a trial is ever rejected, and then each rejected trial costs a residual, not a Jacobian
    (on the pendulum demo 0.2 s against 1.3 s).
    mask: [m] bool, the entries that move (None: all); the others keep their values.
    Stops when no damped step lowers the cost (10 tries), when a step improves the cost by less than
    `tol` relative, when it moves z by less than 1e-7, or when the undamped Gauss-Newton step from the new z
    would move no entry by more than `step_tol` x max(1, |z|) (the minimum is found to that precision: near
    it a float32 residual's rounding decides which trials lower the cost, and those steps only wander).
    `on_step(k, cost)` after each accepted step.

    Args:
        residual: z [m] -> r [k] (numpy float64), or None to evaluate every trial with `linearize`.
        linearize: z [m] -> (r [k], J [k, m]) (numpy float64).
        z0: [m] the starting point.
        mask: [m] bool, the entries that move (None: all); the others keep their values.
        steps: the most accepted steps.
        tol: the relative cost improvement below which the iteration stops.
        lam: the initial damping lambda (divided by 4 after an accepted step, times 4 after a rejected one).
        step_tol: the Gauss-Newton step, relative to max(1, |z|), below which the iteration stops.
        on_step: called as on_step(k, cost) after the k-th accepted step (cost |r|^2), or None.

    Returns:
        `LeastSquaresResult` at the last accepted z (z0 when none was).
    """
    zf = np.array(z0, np.float64)
    mask = np.ones(zf.shape, bool) if mask is None else np.asarray(mask, bool)

    def linearized(z):
        r, jac = linearize(z)
        return np.asarray(r, np.float64), np.asarray(jac, np.float64)[:, mask]

    r, J = linearized(zf)
    cost = float(r @ r)
    records = []
    rejected = False
    step = None  # the Gauss-Newton step at (r, J), once computed
    for _ in range(steps):
        stop_polish_if_asked(len(records))
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
            J_new = None
            if residual is None or not rejected:
                r_new, J_new = linearized(trial)
            else:
                r_new = np.asarray(residual(trial), np.float64)
            new_cost = float(r_new @ r_new)
            if np.isfinite(new_cost) and new_cost < cost:
                accepted = True
                break
            rejected = True
            lam *= 4.0
        if not accepted:
            break
        improvement = (cost - new_cost) / max(cost, 1e-300)
        zf, lam = trial, max(lam / 4.0, 1e-9)
        r, J = (r_new, J_new) if J_new is not None else linearized(zf)
        cost = float(r @ r)
        step = _gauss_newton_step(J, r)
        records.append((cost, zf.copy()))
        if on_step is not None:
            on_step(len(records), cost)
        if (improvement < tol or np.max(np.abs(dz)) < 1e-7
                or np.all(np.abs(step) <= step_tol * np.maximum(1.0, np.abs(zf[mask])))):
            break
    if step is None:
        step = _gauss_newton_step(J, r)
    return LeastSquaresResult(z=zf, steps=records, cost=cost, residual=r, jacobian=J,
                              grad_norm=float(np.linalg.norm(2.0 * (J.T @ r))), gauss_newton_step=step)


def _gauss_newton_step(J, r) -> np.ndarray:
    """The undamped Gauss-Newton step -J^+ r [m_free] (NaN when J or r is not finite: lstsq's SVD does not
    converge on non-finite entries, and the step is then unknown, not an exception)."""
    if not (np.all(np.isfinite(J)) and np.all(np.isfinite(r))):
        return np.full(J.shape[1], np.nan)
    return np.linalg.lstsq(J, -r, rcond=None)[0]
