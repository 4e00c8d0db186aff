"""The Levenberg-Marquardt polish of a fit: Gauss-Newton steps on the pixel residuals over a few free
quantities, with the Jacobian from forward-mode differentiation through the renderer (`render(autodiff=True)`)
(`fit.least_squares` does the algebra; this module makes the residuals of an experiment)."""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit import least_squares
from gradsim_jax.fit.identifiability import scalar_labels
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled
from gradsim_jax.sysid.losses import horizon_weights, loss_frames, residual_with_target
from gradsim_jax.sysid.quantities import QUANTITIES, canonical


Array = Any

#: Levenberg-Marquardt with at most this many Jacobian columns evaluates its trial steps with the Jacobian's
#: compiled function only: compiling a second, residual-only program of the whole rollout and render (3.5 s for
#: the pendulum demo) costs more than the rejected trials it would make cheaper (1.3 s -> 0.2 s each; the
#: Gauss-Newton step test stops the polish before the trials near the float32 floor that were most of them).
LM_TRIALS_BY_JACOBIAN = 8


def levenberg_marquardt(exp: Experiment, target: Array, theta: dict, free, *, steps: int = 10,
                        kind: str = "rgba", frame_stride: int = 1, jac_fields=None, progress: bool = False,
                        tol: float = 1e-6, horizons=None, info: Optional[dict] = None):
    """Levenberg-Marquardt on the pixel residuals over the free quantities (log space for positive ones).

    The Jacobian comes from forward-mode differentiation through the renderer (`render(autodiff=True)`), one
    column per free scalar, so this is for a few scalars (a handful of quantities, or a small cloth's velocities).
    Returns (theta, [(loss on the stage's horizon, {name: value}) after each accepted step]); `info`, when
    given, receives "grad_norm": |grad of the loss| in the transformed space at the returned theta, and
    "gn_step": the largest relative change of a quantity that one more Gauss-Newton step would make, and
    "jacobian" [residuals, free scalars], "residual", "labels", "values" and "dxdz" (the transforms' slopes)
    at the returned theta, over the whole video: what `report_from_jacobian` needs.

    Args:
        exp: the experiment.
        target: [frames + 1, H, W, 4], the target video.
        theta: {quantity name: value}, the start (missing entries from the experiment's defaults).
        free: names of the quantities to fit.
        steps: the most Levenberg-Marquardt steps of each horizon stage.
        kind: the image loss compared ("rgba", "rgb" or "silhouette").
        frame_stride: compare every frame_stride-th frame (frame 0 is never compared).
        jac_fields: a superset of `free` that lets different free sets share one compiled Jacobian (None: free).
        progress: print the loss after each step.
        tol: stop when a step improves the loss by less than this, relatively (`fit.least_squares`).
        horizons: growing numbers of leading frames to fit in turn (each stage up to `steps` steps; the
            last is always the whole video): a start far off in a ratio such as stiffness / mass puts the
            oscillations out of phase late in the video, but the first frames still point the right way.
        info: a dict that receives the entries above, or None.

    Returns:
        (theta, all its quantities, the free ones fitted; records [(loss, {name: value})] after each accepted
        step).
    """
    free = tuple(canonical(n) for n in free)
    jac_fields = tuple(canonical(n) for n in jac_fields) if jac_fields is not None else free
    if not set(free) <= set(jac_fields):
        raise ValueError(f"jac_fields {jac_fields} must include every free quantity {free}")
    tf = {n: resolve_transform(QUANTITIES[n].transform) for n in jac_fields}
    theta = as_theta(exp, theta)
    shapes = {n: jnp.shape(theta[n]) for n in jac_fields}
    sizes = {n: int(np.prod(shapes[n])) for n in jac_fields}
    target = jnp.asarray(target, theta["push"].dtype)
    # Everything the closures below hold: the compiled pair is shared by every call with these.
    key = ("lm", kind, frame_stride, jac_fields, tuple(shapes.items()),
           tuple(QUANTITIES[n].transform for n in jac_fields))

    def r_of_z(e, z, base, tgt, w):
        th, off = dict(base), 0
        for n in jac_fields:
            th[n] = tf[n].inverse(z[off:off + sizes[n]].reshape(shapes[n]))
            off += sizes[n]
        return residual_with_target(e, kind, frame_stride, dense=True)(th, tgt, w)

    def jac(e, z, base, tgt, w):
        return least_squares.forward_jacobian(lambda zz: r_of_z(e, zz, base, tgt, w), z)

    r_fn0, jac_fn0 = compiled(exp, r_of_z, key + ("residual",)), compiled(exp, jac, key + ("jacobian",))
    num = len(loss_frames(exp, frame_stride))
    z = jnp.concatenate([jnp.ravel(tf[n].forward(theta[n])) for n in jac_fields])
    mask = np.concatenate([np.full(sizes[n], n in free) for n in jac_fields])

    def unpack(zz):
        th, off = dict(theta), 0
        for n in jac_fields:
            if n in free:  # the others keep their exact values (no log/exp round trip)
                th[n] = tf[n].inverse(jnp.asarray(zz[off:off + sizes[n]], z.dtype).reshape(shapes[n]))
            off += sizes[n]
        return th

    zf = np.asarray(z, np.float64)
    records = []
    stages = sorted({min(int(h), num) for h in (horizons or ())} | {num})
    for horizon in stages:
        w = horizon_weights(num, horizon)
        done = len(records)

        def residual(zz):
            return r_fn0(jnp.asarray(zz, z.dtype), theta, target, w)  # noqa: B023

        def linearize(zz):
            r, cols = jac_fn0(jnp.asarray(zz, z.dtype), theta, target, w)  # noqa: B023
            return r, np.asarray(cols).T

        def on_step(k, cost):
            if progress:
                print(f"  LM step {done + k} (first {horizon} frames): loss {cost:.4e}")  # noqa: B023

        solution = least_squares.levenberg_marquardt(
            residual if z.size > LM_TRIALS_BY_JACOBIAN else None, linearize, zf, mask=mask, steps=steps, tol=tol,
            on_step=on_step)
        zf = solution.z
        for cost, zk in solution.steps:
            th = unpack(zk)
            records.append((cost, {n: np.asarray(th[n]) for n in free}))
    if info is not None:
        info["grad_norm"] = solution.grad_norm
        info["jacobian"], info["residual"] = solution.jacobian, solution.residual
        info["labels"] = tuple(lab for n in jac_fields if n in free
                               for lab in scalar_labels(n, shapes[n], tf[n].label))
        z_free = jnp.asarray(zf[mask], z.dtype)
        values, slopes, off = [], [], 0
        for n in (n for n in jac_fields if n in free):
            zn = z_free[off:off + sizes[n]]
            off += sizes[n]
            values.append(np.ravel(np.asarray(tf[n].inverse(zn), np.float64)))
            slopes.append(np.ravel(np.asarray(jax.jvp(tf[n].inverse, (zn,), (jnp.ones_like(zn),))[1], np.float64)))
        info["values"], info["dxdz"] = np.concatenate(values), np.concatenate(slopes)
        # How far the (undamped) Gauss-Newton step would still move each quantity, relative to its
        # value: near 0 at a minimum, whatever size the last accepted step had.
        trial = zf.copy()
        trial[mask] += solution.gauss_newton_step
        here, there = unpack(zf), unpack(trial)
        info["gn_step"] = max((float(np.linalg.norm(np.asarray(there[n], np.float64) - np.asarray(here[n], np.float64))
                                     / max(float(np.linalg.norm(np.asarray(here[n], np.float64))), 1e-300))
                               for n in free), default=0.0)
    return unpack(zf), records
