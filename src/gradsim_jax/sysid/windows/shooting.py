"""Gauss-Newton for multiple shooting (Bock and Plitt 1984): Levenberg-Marquardt steps on every unknown of a
multiple-shooting fit at once, the quantities and every window's start state, for scenes whose state is
small (an ODE body: a pendulum's angles and rates, a ball).

Adam crawls on multiple shooting: the join penalty couples each window's start state to the previous window's
end and, through it, to the quantities, a long chain of stiff couplings that first-order steps cross slowly
(measured on the double pendulum: after 40 Adam iterations its lengths were still 2 to 3 % off). A Gauss-Newton
step solves for all of them together.

The residuals are the image residuals of every window's compared frames (the renderer with `autodiff=True`, so that
they have forward-mode derivatives) and the join residuals (window w's simulated state at window w + 1's first
frame minus that window's start state, in units of the join scales), weighted so that |r|^2 is
`windowed_terms`' image + weight x continuity. The Jacobian is block-sparse: window w's residuals depend on the
quantities and on window w's start only. So one forward-mode pass per quantity and one per start-state
component, that component perturbed in every window at once (a colouring of the columns), gives every block:
n_q + D passes instead of n_q + (windows - 1) D. The normal matrix (n_q + (windows - 1) D square: 198 for 50
windows of a double pendulum) is assembled on the host from the per-window blocks and solved densely.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Optional

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.checkpoint import stop_polish_if_asked
from gradsim_jax.fit.windows import Windows
from gradsim_jax.fit.least_squares import JACOBIAN_BATCH
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, frames_for
from gradsim_jax.render.mesh import trajectory_vertices
from gradsim_jax.sysid.quantities import QUANTITIES, assemble, canonical
from gradsim_jax.sysid.losses import residual_channels
from gradsim_jax.sysid.windows.runs import PARTS, join_gap, pose_periods, pose_rate, push_of, run_windows, start_names

Array = Any

#: The largest start state (numbers per window) the Gauss-Newton polish takes: one forward pass per number.
STATE_LIMIT = 32


def _layout(exp: Experiment, theta: dict) -> list:
    """[(part, "pose" | "rate", shape, size)] of one window's start state, in START order."""
    pose, rate = pose_rate(exp, assemble(exp, theta)[1])
    out = []
    for part in pose:
        for kind, value in (("pose", pose[part]), ("rate", rate[part])):
            out.append((part, kind, tuple(np.shape(value)), int(np.size(value))))
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class _Shooting:
    """The fixed layout of one multiple-shooting polish: which numbers are unknown and how they are scaled.

    Attributes:
      free: names of the quantities solved for (canonical).
      tf: {name: its fit transform}; the unknowns are the transformed values.
      shapes: {name: the quantity's shape}.
      layout: `_layout`'s [(part, "pose" | "rate", shape, size)] of one window's start state.
      count: number of windows.
      size: numbers per window start state (D).
      nq: numbers of the free quantities.
      unit: [D] the join scale of each start-state number (pose or rate scale of its part).
      join_w: [D] the join residual weight of each start-state number.
      wrap: [D] an angle's period in scale units (0 where the number is not an angle).
      windows: the windows.
      kind: the image residual's channels (`residual_channels`).
    """
    free: tuple
    tf: dict
    shapes: dict
    layout: list
    count: int
    size: int
    nq: int
    unit: np.ndarray
    join_w: np.ndarray
    wrap: np.ndarray
    windows: Windows
    kind: str


def _problem(exp: Experiment, theta: dict, free, windows: Windows, scales: dict, weight: float,
             kind: str) -> _Shooting:
    """The polish's layout (`_Shooting`), after checking that the start state is small and there are joins."""
    layout = _layout(exp, theta)
    size = sum(s for *_, s in layout)
    if size > STATE_LIMIT:
        raise ValueError(f"the Gauss-Newton polish of multiple shooting takes start states of at most {STATE_LIMIT} "
                         f"numbers per window; this scene's have {size}")
    count = windows.count
    if count < 2:
        raise ValueError("the multiple-shooting polish needs at least two windows")
    tf = {n: resolve_transform(QUANTITIES[n].transform) for n in free}
    shapes = {n: tuple(jnp.shape(theta[n])) for n in free}
    unit = np.concatenate([np.full(s, scales[part][0 if which == "pose" else 1]) for part, which, _, s in layout])
    # Join residual weights: |c|^2 = weight x mean over joins of the sum over parts of the pose's and the rate's
    # mean squared mismatch in scale units.
    join_w = np.concatenate([np.full(s, math.sqrt(weight / ((count - 1) * s))) for *_, s in layout])
    # An angle's join is measured on the circle (`join_gap`): its period in scale units, per start-state number.
    periods = pose_periods(exp)
    wrap = np.concatenate([np.full(s, 0.0 if which == "rate" or periods[part] is None else
                                   periods[part] / scales[part][0]) for part, which, _, s in layout])
    nq = sum(int(np.prod(shapes[n], dtype=np.int64)) for n in free)
    return _Shooting(free, tf, shapes, layout, count, size, nq, unit, join_w, wrap, windows, kind)


def _pack_states(p: _Shooting, th: dict):
    """[count - 1, D] the start states of windows 1.. in scale units."""
    cols = []
    for part, which, _, s in p.layout:
        name = PARTS[part][0 if which == "pose" else 1]
        cols.append(jnp.reshape(th[name], (p.count - 1, s)))
    return jnp.concatenate(cols, axis=1) / p.unit


def _unpack_states(p: _Shooting, z) -> dict:
    """{start-state name: value} from [..., D] numbers in scale units."""
    z = z * p.unit
    out, at = {}, 0
    for part, which, shape, s in p.layout:
        out[PARTS[part][0 if which == "pose" else 1]] = jnp.reshape(z[..., at:at + s], z.shape[:-1] + shape)
        at += s
    return out


def _with_unknowns(p: _Shooting, th: dict, zq, zs) -> dict:
    """theta with the free quantities from `zq` (transformed, flat) and the start states from `zs`."""
    quantities, at = {}, 0
    for n in p.free:
        k = int(np.prod(p.shapes[n], dtype=np.int64))
        quantities[n] = p.tf[n].inverse(jnp.reshape(zq[at:at + k], p.shapes[n]))
        at += k
    return {**th, **quantities, **_unpack_states(p, zs)}


def _pieces(p: _Shooting, e, th, tgt, zq, zs):
    """(image residuals [count, Nw], ends [count - 1, D] in scale units)."""
    th = _with_unknowns(p, th, zq, zs)
    params, state0 = assemble(e, th)
    pose0, rate0 = pose_rate(e, state0)
    states = _unpack_states(p, zs)
    poses = {q: jnp.concatenate([pose0[q][None], states[PARTS[q][0]]]) for q in pose0}
    rates = {q: jnp.concatenate([rate0[q][None], states[PARTS[q][1]]]) for q in pose0}
    frames, ends = run_windows(e, params, state0, poses, rates, p.windows, push_of(e, th))
    pred = frames_for(e, trajectory_vertices(e.topology, params, frames), th, dense=True)
    diff = residual_channels(p.kind, pred - tgt[p.windows.frame_index().reshape(-1)])
    residual = diff.reshape(p.count, -1) / math.sqrt(diff.size)
    end_pose, end_rate = pose_rate(e, ends)
    flat = []
    for part, which, _, s in p.layout:
        flat.append(jnp.reshape((end_pose if which == "pose" else end_rate)[part], (p.count - 1, s)))
    return residual, jnp.concatenate(flat, axis=1) / p.unit


def _linearized(p: _Shooting, e, th, tgt, zq, zs):
    """(image cost, ends [count - 1, D], per-window gram [count, nq + D, nq + D] and gradient [count, nq + D],
    the ends' derivatives against the quantities [count - 1, D, nq] and against the own start [count - 1, D, D])."""
    nq, size, count = p.nq, p.size, p.count
    # One tangent per quantity, then one per start-state number (every window's at once: each window
    # depends on its own start only), pushed JACOBIAN_BATCH at a time (`fit.least_squares.forward_jacobian`).
    tq = jnp.concatenate([jnp.eye(nq, dtype=zq.dtype), jnp.zeros((size, nq), zq.dtype)])
    ts = jnp.concatenate([jnp.zeros((nq, count - 1, size), zs.dtype),
                          jnp.broadcast_to(jnp.eye(size, dtype=zs.dtype)[:, None, :], (size, count - 1, size))])
    (res, ends), (d_res, d_ends) = jax.lax.map(
        lambda t: jax.jvp(lambda a, b: _pieces(p, e, th, tgt, a, b), (zq, zs), t), (tq, ts),
        batch_size=min(JACOBIAN_BATCH, nq + size))
    res, ends = res[0], ends[0]
    dq, ds = (d_res[:nq], d_ends[:nq]), (d_res[nq:], d_ends[nq:])
    # Per window: J_w = [A_w | B_w] (its residuals against the quantities and against its own start).
    a = jnp.moveaxis(dq[0], 0, -1)  # [count, Nw, nq]
    b = jnp.moveaxis(ds[0], 0, -1)  # [count, Nw, size] (window 0's start is not free: zero)
    jw = jnp.concatenate([a, b], axis=-1)
    gram = jnp.einsum("wni,wnj->wij", jw, jw)
    grad = jnp.einsum("wni,wn->wi", jw, res)
    return (jnp.sum(jnp.square(res)), ends, gram, grad, jnp.moveaxis(dq[1], 0, -1), jnp.moveaxis(ds[1], 0, -1))


def _cost_only(p: _Shooting, e, th, tgt, zq, zs):
    """(image cost, ends [count - 1, D] in scale units)."""
    res, ends = _pieces(p, e, th, tgt, zq, zs)
    return jnp.sum(jnp.square(res)), ends


def _join_cost(p: _Shooting, ends, zs) -> tuple:
    """(the joins' cost, their weighted residuals [count - 1, D]) of the ends against the next starts."""
    c = p.join_w * join_gap(np.asarray(ends, np.float64), zs, p.wrap)
    return float(np.sum(np.square(c))), c


def _normal(p: _Shooting, lin_c, theta: dict, target, dtype, zq, zs) -> tuple:
    """(cost, normal matrix [nq + (count - 1) D]^2, gradient) at (zq, zs), assembled on the host."""
    nq, size, count = p.nq, p.size, p.count
    image, ends, gram, grad, e_q, e_s = (np.asarray(v, np.float64) for v in
                                        lin_c(theta, target, jnp.asarray(zq, dtype), jnp.asarray(zs, dtype)))
    joins, c = _join_cost(p, ends, zs)
    dim = nq + (count - 1) * size
    h, g = np.zeros((dim, dim)), np.zeros(dim)
    for w in range(count):
        h[:nq, :nq] += gram[w, :nq, :nq]
        g[:nq] += grad[w, :nq]
        if w:
            s = slice(nq + (w - 1) * size, nq + w * size)
            h[:nq, s] += gram[w, :nq, nq:]
            h[s, :nq] += gram[w, nq:, :nq]
            h[s, s] += gram[w, nq:, nq:]
            g[s] += grad[w, nq:]
    for w in range(count - 1):  # join w: window w's end against window w + 1's start
        rows = np.zeros((size, dim))
        rows[:, :nq] = p.join_w[:, None] * e_q[w]
        if w:
            rows[:, nq + (w - 1) * size:nq + w * size] = p.join_w[:, None] * e_s[w]
        rows[:, nq + w * size:nq + (w + 1) * size] -= np.diag(p.join_w)
        h += rows.T @ rows
        g += rows.T @ c[w]
    return image + joins, h, g


def _record(p: _Shooting, zq) -> dict:
    """{name: value} of the free quantities at the unknowns `zq` (a float where the quantity is one number)."""
    out, at = {}, 0
    for n in p.free:
        k = int(np.prod(p.shapes[n], dtype=np.int64))
        value = np.asarray(p.tf[n].inverse(jnp.asarray(zq[at:at + k]).reshape(p.shapes[n])))
        out[n] = value.item() if value.size == 1 else value
        at += k
    return out


def _damped_steps(p: _Shooting, normal, trial_cost, zq, zs, steps: int, lam: float, progress: bool) -> tuple:
    """Levenberg-Marquardt on (zq, zs): `normal(zq, zs)` gives (cost, H, g), `trial_cost(zq, zs)` the cost.

    Returns:
      (zq, zs, [(cost, {name: value}) per accepted step]).
    """
    cost, h, g = normal(zq, zs)
    records = []
    tries = 0
    while len(records) < steps and tries < 4 * steps:
        stop_polish_if_asked(len(records))
        tries += 1
        damped = h + lam * np.diag(np.maximum(np.diag(h), 1e-12 * max(np.max(np.diag(h)), 1e-30)))
        try:
            delta = -np.linalg.solve(damped, g)
        except np.linalg.LinAlgError:
            lam *= 10.0
            continue
        tq, ts = zq + delta[:p.nq], zs + delta[p.nq:].reshape(p.count - 1, p.size)
        trial = trial_cost(tq, ts)
        if np.isfinite(trial) and trial < cost:
            zq, zs, lam = tq, ts, max(lam * 0.3, 1e-9)
            records.append((trial, _record(p, zq)))
            if progress:
                print(f"  Gauss-Newton multiple shooting step {len(records)}: loss {trial:.4e} "
                      f"{', '.join(f'{n} {v}' for n, v in records[-1][1].items())}", flush=True)
            converged = cost - trial < 1e-7 * cost
            cost, h, g = (trial, h, g) if converged else normal(zq, zs)
            if converged:
                break
        else:
            lam *= 10.0
            if lam > 1e8:
                break
    return zq, zs, records


def polish_multiple(exp: Experiment, target: Array, theta: dict, free, windows: Windows, scales: dict, *,
                    weight: float, steps: int = 10, kind: str = "rgba", progress: bool = False,
                    lam: float = 1e-3) -> tuple[dict, list]:
    """Up to `steps` Levenberg-Marquardt steps on the multiple-shooting residuals (module docstring).

    Args:
      exp: the experiment.
      target: [frames + 1, H, W, 4] the experiment's video.
      theta: quantities and the start states (`start_names(exp)`), as `fit_windowed` holds them.
      free: the quantities to solve for (their fit transforms: log for positive ones).
      windows: the windows (overlap and stride as fitted).
      scales: {part: (pose scale, rate scale)} of the joins (`windowed._join_scales`).
      weight: the join weight.
      steps: the most accepted steps.
      kind: the image residual's channels ("rgba", ...; `residual_channels`).
      progress: print each accepted step.
      lam: the initial damping (relative to the normal matrix's diagonal).
    Returns:
      (theta with the free quantities and the start states updated, [(cost, {name: value}) per accepted step]).
    """
    free = tuple(canonical(n) for n in free)
    theta = dict(as_theta(exp, {k: v for k, v in theta.items() if not k.startswith("_")}),
                 **{k: jnp.asarray(theta[k], exp.dtype) for k in start_names(exp)})
    p = _problem(exp, theta, free, windows, scales, weight, kind)
    key = ("polish_multiple", windows, kind, free, tuple(p.shapes.items()), tuple(p.layout), tuple(p.unit), weight)
    lin_c = compiled(exp, functools.partial(_linearized, p), key + ("jacobian",))
    cost_c = compiled(exp, functools.partial(_cost_only, p), key + ("cost",))
    target = jnp.asarray(target, exp.dtype)
    zq = np.concatenate([np.ravel(np.asarray(p.tf[n].forward(theta[n]), np.float64)) for n in free])
    zs = np.asarray(_pack_states(p, theta), np.float64)

    def trial_cost(tq, ts):
        image, ends = cost_c(theta, target, jnp.asarray(tq, exp.dtype), jnp.asarray(ts, exp.dtype))
        return float(image) + _join_cost(p, ends, ts)[0]

    zq, zs, records = _damped_steps(p, lambda a, b: _normal(p, lin_c, theta, target, exp.dtype, a, b),
                                    trial_cost, zq, zs, steps, lam, progress)
    out = _with_unknowns(p, theta, jnp.asarray(zq, exp.dtype), jnp.asarray(zs, exp.dtype))
    return out, records


def state_size(exp: Experiment, theta: Optional[dict] = None) -> int:
    """Numbers per window start state (pose and rate of every part).

    Args:
      exp: the experiment.
      theta: quantities (None or missing ones: the experiment's).

    Returns:
      the count (D).
    """
    return sum(s for *_, s in _layout(exp, as_theta(exp, theta or {})))
