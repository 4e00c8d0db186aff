"""Bounds that keep a fit's quantities where the explicit step is stable (`stable_bounds`)."""

from __future__ import annotations

import math
import warnings
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.stability import STABILITY_MARGIN, StepWarning, step_report
from gradsim_jax.sysid.quantities import assemble

#: Scalar quantities that stiffen or damp the explicit step as they grow (+1) or shrink (-1): a fit of any
#: of them is bounded where the step's stability criterion reaches `STABILITY_MARGIN` of its limit.
STEP_QUANTITIES = {"fem_mu": 1, "fem_lambda": 1, "fem_damping": 1, "stiffness": 1, "damping": 1, "bending": 1,
                   "mass": -1, "density": -1}
#: A bound further than this factor from the start is left out (no fit from a sensible start gets there).
BOUND_REACH = 100.0
#: A start past the step's limit moves under it by at most this factor (then: a ValueError, use more substeps).
MAX_START_MOVE = 2.0


def _stable_factor(criterion, base: float, goal: float) -> Optional[float]:
    """The factor t at which criterion(t) (increasing in t, criterion(1) = base) reaches `goal`, to 0.1 %, from
    the stable side; None when it lies beyond BOUND_REACH, or (base >= goal) below 1 / MAX_START_MOVE. A
    stiffness or damping t >= 1 times larger gives at most about t times the criterion, so the search starts
    at goal / base."""
    if base <= 0.0:
        return None
    if base < goal:
        lo, hi = 1.0, goal / base
        if hi >= BOUND_REACH:
            return None
        while criterion(hi) < goal:
            lo, hi = hi, 2.0 * hi
            if hi > BOUND_REACH:
                return None
    else:
        lo, hi = 1.0 / MAX_START_MOVE, 1.0
        if criterion(lo) >= goal:
            return None
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if criterion(mid) < goal else (lo, mid)
    return lo


def stable_bounds(exp, theta: dict, free) -> tuple[dict, dict]:
    """(theta, bounds) for the Adam stage: every free scalar quantity of `STEP_QUANTITIES` (FEM moduli and
    damping, cloth stiffness, damping and bending, mass, density) is bounded where the explicit step's
    stability criterion (`physics.stability.step_report`) reaches `STABILITY_MARGIN` of its limit, each with the
    others at `theta` (what a joint change of several does is left to the margin, 2 % of the criterion, and to
    `fit`'s back-off). Past the limit the rollout turns NaN within frames, and Adam's momentum can carry a
    quantity there while the others are still off (a ball of tets: its damping from 1.5x its truth to the
    limit, 1.9x, then `FitDiverged`). A start past the bound moves under it, with a `StepWarning`: the first
    free quantity that gets there within MAX_START_MOVE. Per-element quantities are not bounded. Returns
    bounds {name: (lo, hi)} in physical units ({} when nothing needs one).

    When the start is past the limit itself and no single quantity's move within MAX_START_MOVE brings it
    back, it warns (the step needs more substeps) and bounds nothing.

    Args:
        exp: the experiment (scene, frame_dt s and substeps give the step's dt).
        theta: {canonical quantity name: value}, the start of the fit, each in its quantity's unit.
        free: canonical names of the quantities the fit estimates.

    Returns:
        (theta, moved under its bound where the start was past it; bounds {name: (lo, hi)} in the quantities'
        units).
    """
    names = [n for n in free if n in STEP_QUANTITIES and np.size(theta[n]) == 1]
    if not names:
        return theta, {}
    dt = exp.frame_dt / exp.substeps
    goal = 4.0 * STABILITY_MARGIN

    def report(th):
        params, state0 = assemble(exp, th)
        return step_report(exp.topology, params, state0, dt=dt)

    def scaled(th, n, t):
        return {**th, n: jnp.asarray(float(np.asarray(th[n])) * t ** STEP_QUANTITIES[n], jnp.asarray(th[n]).dtype)}

    start = report(theta)
    base = start.criterion
    if base >= goal:
        for n in names:
            factor = _stable_factor(lambda t: report(scaled(theta, n, t)).criterion, base, goal)  # noqa: B023
            if factor is not None:
                moved = scaled(theta, n, 0.9 * factor)
                warnings.warn(f"at the initial guess the explicit step is {'past' if base >= 4.0 else 'near'} its "
                              f"stability limit (criterion {base:.3g}, {start.message or 'limit 4'}): the fit starts "
                              f"from {n} {float(np.asarray(moved[n])):.4g} instead of {float(np.asarray(theta[n])):.4g}",
                              StepWarning, stacklevel=3)
                theta, base = moved, report(moved).criterion
                break
        if base >= 4.0:
            warnings.warn(f"at the initial guess the simulation is unstable and no free quantity within "
                          f"{MAX_START_MOVE:g}x of its start makes it stable, so the fit runs unbounded: "
                          f"{start.message}", StepWarning, stacklevel=3)
            return theta, {}
    bounds = {}
    for n in names:
        value = float(np.asarray(theta[n]))
        factor = _stable_factor(lambda t: report(scaled(theta, n, t)).criterion, base, goal)  # noqa: B023
        if factor is not None and factor > 1.0:
            edge = value * factor ** STEP_QUANTITIES[n]
            bounds[n] = (None, edge) if STEP_QUANTITIES[n] > 0 else (edge, None)
    return theta, bounds
