"""Truncated backpropagation's Levenberg-Marquardt polish (`sysid.windows.windowed`, shooting="truncated"): the pixel
residuals of one run cut into windows by `jax.lax.stop_gradient`, and Gauss-Newton steps with their
truncated forward-mode Jacobian.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.least_squares import forward_jacobian, levenberg_marquardt
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.fit.windows import Windows
from gradsim_jax.render.mesh import trajectory_vertices
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, frames_for
from gradsim_jax.sysid.losses import residual_channels
from gradsim_jax.sysid.quantities import QUANTITIES, assemble, canonical
from gradsim_jax.sysid.windows.runs import check_windowed, push_of, run_from

Array = Any


def truncated_residual(exp: Experiment, windows: Windows, kind: str = "rgba") -> Callable:
    """`residual(theta, target)`: pixel residuals (pred - target) / sqrt(N) of the compared frames of the
    truncated run, flattened (|r|^2 is the rgba loss), rendered with `render(autodiff=True)` so that it
    has a forward-mode derivative. `jax.lax.stop_gradient` stops tangents as well: its Jacobian is the
    truncated one, each frame differentiated only back to the start of its window.

    Args:
      exp: the experiment.
      windows: the windows of the truncated run.
      kind: the residual's channels ("rgba", "rgb", "silhouette").

    Returns:
      `residual(theta, target)`, [N'] flat.
    """
    check_windowed(exp, windows, "truncated")

    def residual(theta, target):
        params, state0 = assemble(exp, theta)
        traj = run_from(exp, params, state0, jnp.asarray(0), windows.frames, push_of(exp, theta),
                        cuts=windows.cuts())
        idx = np.arange(1, windows.frames + 1, windows.stride)
        x = trajectory_vertices(exp.topology, params, jax.tree.map(lambda a: a[idx], traj))
        pred = frames_for(exp, x, theta, dense=True)
        diff = residual_channels(kind, pred - target[idx])
        return jnp.ravel(diff / math.sqrt(diff.size))

    return residual


def polish_truncated(exp: Experiment, target: Array, theta: dict, free, windows: Windows, *, steps: int = 10,
                     kind: str = "rgba", progress: bool = False) -> tuple[dict, list]:
    """Levenberg-Marquardt steps on `truncated_residual` over the scalar quantities `free` (in their fit
    transforms, log for positive ones), with the truncated Jacobian (one forward-mode column per quantity).
    Adam crawls along a valley such as mass x stiffness (a ratio well seen, the scale less); Gauss-Newton
    crosses it.

    Args:
      exp: the experiment.
      target: [frames + 1, H, W, 4] its video.
      theta: quantities (missing ones: the experiment's).
      free: the scalar quantities to solve for.
      windows: the windows of the truncated run.
      steps: the most Levenberg-Marquardt steps.
      kind: the residual's channels.
      progress: print each accepted step.

    Returns:
      (theta, [(loss, {name: value}) per accepted step]).
    """
    free = tuple(canonical(n) for n in free)
    theta = as_theta(exp, {k: v for k, v in theta.items() if not k.startswith("_")})
    if any(np.size(theta[n]) != 1 for n in free):
        raise ValueError(f"polish_truncated fits scalar quantities; {free} has arrays")
    tf = {n: resolve_transform(QUANTITIES[n].transform) for n in free}
    target = jnp.asarray(target, theta["push"].dtype)
    shapes = {n: jnp.shape(theta[n]) for n in free}

    def unpack(z, base):
        return {**base, **{n: tf[n].inverse(z[i]).reshape(shapes[n]) for i, n in enumerate(free)}}

    def linearized(e, z, base, tgt):
        return forward_jacobian(lambda zz: truncated_residual(e, windows, kind)(unpack(zz, base), tgt), z)

    jac = compiled(exp, linearized, ("polish_truncated", windows, kind, free, tuple(shapes.items())))
    dtype = theta["push"].dtype

    def linearize(z):
        r, cols = jac(jnp.asarray(z, dtype), theta, target)
        return np.asarray(r), np.asarray(cols).T

    def on_step(k, cost):
        if progress:
            print(f"  Levenberg-Marquardt step {k} (truncated Jacobian): loss {cost:.4e}")

    z0 = np.array([float(np.ravel(tf[n].forward(theta[n]))[0]) for n in free])
    solution = levenberg_marquardt(None, linearize, z0, steps=steps, on_step=on_step)
    records = [(cost, {n: float(tf[n].inverse(zk[i])) for i, n in enumerate(free)}) for cost, zk in solution.steps]
    out = unpack(jnp.asarray(solution.z, dtype), theta)
    return {n: np.asarray(v) for n, v in out.items()}, records
