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

import math
from typing import Any, Optional

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.windows import Windows
from gradsim_jax.fit.least_squares import JACOBIAN_BATCH
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, frames_for
from gradsim_jax.render.mesh import trajectory_vertices
from gradsim_jax.sysid.quantities import QUANTITIES, assemble, canonical
from gradsim_jax.sysid.losses import residual_channels
from gradsim_jax.sysid.window_starts import PARTS, join_gap, pose_periods, pose_rate, push_of, run_windows, start_names

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


def polish_multiple(exp: Experiment, target: Array, theta: dict, free, windows: Windows, scales: dict, *,
                    weight: float, steps: int = 10, kind: str = "rgba", progress: bool = False,
                    lam: float = 1e-3) -> tuple[dict, list]:
    """Up to `steps` Levenberg-Marquardt steps on the multiple-shooting residuals (module docstring).

    Args:
      exp, target: the experiment and its video [frames + 1, H, W, 4].
      theta: quantities and the start states (`start_names(exp)`), as `fit_windowed` holds them.
      free: the quantities to solve for (their fit transforms: log for positive ones).
      windows: the windows (overlap and stride as fitted).
      scales: {part: (pose scale, rate scale)} of the joins (`windowed._join_scales`); weight: the join weight.
      lam: the initial damping (relative to the normal matrix's diagonal).
    Returns:
      (theta with the free quantities and the start states updated, [(cost, {name: value}) per accepted step]).
    """
    free = tuple(canonical(n) for n in free)
    theta = dict(as_theta(exp, {k: v for k, v in theta.items() if not k.startswith("_")}),
                 **{k: jnp.asarray(theta[k], exp.dtype) for k in start_names(exp)})
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

    def pack_states(th):
        cols = []
        for part, which, _, s in layout:
            name = PARTS[part][0 if which == "pose" else 1]
            cols.append(jnp.reshape(th[name], (count - 1, s)))
        return jnp.concatenate(cols, axis=1) / unit

    def unpack_states(z):
        z = z * unit
        out, at = {}, 0
        for part, which, shape, s in layout:
            out[PARTS[part][0 if which == "pose" else 1]] = jnp.reshape(z[..., at:at + s], z.shape[:-1] + shape)
            at += s
        return out

    def with_unknowns(th, zq, zs):
        quantities, at = {}, 0
        for n in free:
            k = int(np.prod(shapes[n], dtype=np.int64))
            quantities[n] = tf[n].inverse(jnp.reshape(zq[at:at + k], shapes[n]))
            at += k
        return {**th, **quantities, **unpack_states(zs)}

    def pieces(e, th, tgt, zq, zs):
        """(image residuals [count, Nw], ends [count - 1, D] in scale units)."""
        th = with_unknowns(th, zq, zs)
        params, state0 = assemble(e, th)
        pose0, rate0 = pose_rate(e, state0)
        states = unpack_states(zs)
        poses = {p: jnp.concatenate([pose0[p][None], states[PARTS[p][0]]]) for p in pose0}
        rates = {p: jnp.concatenate([rate0[p][None], states[PARTS[p][1]]]) for p in pose0}
        frames, ends = run_windows(e, params, state0, poses, rates, windows, push_of(e, th))
        pred = frames_for(e, trajectory_vertices(e.topology, params, frames), th, dense=True)
        diff = residual_channels(kind, pred - tgt[windows.frame_index().reshape(-1)])
        residual = diff.reshape(count, -1) / math.sqrt(diff.size)
        end_pose, end_rate = pose_rate(e, ends)
        flat = []
        for part, which, _, s in layout:
            flat.append(jnp.reshape((end_pose if which == "pose" else end_rate)[part], (count - 1, s)))
        return residual, jnp.concatenate(flat, axis=1) / unit

    nq = sum(int(np.prod(shapes[n], dtype=np.int64)) for n in free)

    def linearized(e, th, tgt, zq, zs):
        # One tangent per quantity, then one per start-state number (every window's at once: each window
        # depends on its own start only), pushed JACOBIAN_BATCH at a time (`fit.least_squares.forward_jacobian`).
        tq = jnp.concatenate([jnp.eye(nq, dtype=zq.dtype), jnp.zeros((size, nq), zq.dtype)])
        ts = jnp.concatenate([jnp.zeros((nq, count - 1, size), zs.dtype),
                              jnp.broadcast_to(jnp.eye(size, dtype=zs.dtype)[:, None, :], (size, count - 1, size))])
        (res, ends), (d_res, d_ends) = jax.lax.map(
            lambda t: jax.jvp(lambda a, b: pieces(e, th, tgt, a, b), (zq, zs), t), (tq, ts),
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

    def cost_only(e, th, tgt, zq, zs):
        res, ends = pieces(e, th, tgt, zq, zs)
        return jnp.sum(jnp.square(res)), ends

    key = ("polish_multiple", windows, kind, free, tuple(shapes.items()), tuple(layout), tuple(unit), weight)
    lin_c = compiled(exp, linearized, key + ("jacobian",))
    cost_c = compiled(exp, cost_only, key + ("cost",))
    target = jnp.asarray(target, exp.dtype)
    zq = np.concatenate([np.ravel(np.asarray(tf[n].forward(theta[n]), np.float64)) for n in free])
    zs = np.asarray(pack_states(theta), np.float64)
    n_s = (count - 1) * size
    dim = nq + n_s

    def join_cost(ends, zs_):
        c = join_w * join_gap(np.asarray(ends, np.float64), zs_, wrap)
        return float(np.sum(np.square(c))), c

    def normal(zq_, zs_):
        image, ends, gram, grad, e_q, e_s = (np.asarray(v, np.float64) for v in
                                            lin_c(theta, target, jnp.asarray(zq_, exp.dtype),
                                                  jnp.asarray(zs_, exp.dtype)))
        joins, c = join_cost(ends, zs_)
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
            rows[:, :nq] = join_w[:, None] * e_q[w]
            if w:
                rows[:, nq + (w - 1) * size:nq + w * size] = join_w[:, None] * e_s[w]
            rows[:, nq + w * size:nq + (w + 1) * size] -= np.diag(join_w)
            h += rows.T @ rows
            g += rows.T @ c[w]
        return image + joins, h, g

    def record(zq_):
        out, at = {}, 0
        for n in free:
            k = int(np.prod(shapes[n], dtype=np.int64))
            value = np.asarray(tf[n].inverse(jnp.asarray(zq_[at:at + k]).reshape(shapes[n])))
            out[n] = value.item() if value.size == 1 else value
            at += k
        return out

    cost, h, g = normal(zq, zs)
    records = []
    tries = 0
    while len(records) < steps and tries < 4 * steps:
        tries += 1
        damped = h + lam * np.diag(np.maximum(np.diag(h), 1e-12 * max(np.max(np.diag(h)), 1e-30)))
        try:
            delta = -np.linalg.solve(damped, g)
        except np.linalg.LinAlgError:
            lam *= 10.0
            continue
        tq, ts = zq + delta[:nq], zs + delta[nq:].reshape(count - 1, size)
        image, ends = cost_c(theta, target, jnp.asarray(tq, exp.dtype), jnp.asarray(ts, exp.dtype))
        trial = float(image) + join_cost(ends, ts)[0]
        if np.isfinite(trial) and trial < cost:
            zq, zs, lam = tq, ts, max(lam * 0.3, 1e-9)
            records.append((trial, record(zq)))
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
    out = with_unknowns(theta, jnp.asarray(zq, exp.dtype), jnp.asarray(zs, exp.dtype))
    return out, records


def state_size(exp: Experiment, theta: Optional[dict] = None) -> int:
    """Numbers per window start state (pose and rate of every part)."""
    return sum(s for *_, s in _layout(exp, as_theta(exp, theta or {})))
