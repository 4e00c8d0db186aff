"""Windowed fits for long recordings: multiple shooting and truncated backpropagation through time.

Over a long horizon a stiff, swinging cloth is chaotic: the gradient of a loss on late frames with respect
to the parameters grows exponentially with the horizon and, past some horizon, float32 and float64
gradients no longer agree (`gradsim-jax horizon` measures it). A gradient over the full horizon then
follows noise. A windowed fit cuts the recording into windows short enough that every gradient it takes is
trustworthy:

- **multiple shooting** (`shooting="multiple"`; Bock and Plitt 1984): window 0 starts from the experiment's
  initial state (theta), each later window from a *free* start state (particle positions and velocities,
  fitted together with the quantities). Every window is simulated for `length` frames from its own start
  (`lax.map` over the windows), its frames are compared with the target's, and a continuity penalty ties
  each window's simulated state at the next window's first frame to that window's start state. At the
  solution the penalty is zero and the windows join into one trajectory; on the way there no gradient
  crosses more than one window.
- **truncated backpropagation** (`shooting="truncated"`): one forward run over the whole recording (the
  loss value is the full-horizon loss), with `jax.lax.stop_gradient` on the state carried into every
  window, so that the gradient of a frame reaches back only to the start of its window. No extra
  unknowns, but late windows start wherever the current parameters' run ends up, so it needs a start
  close enough that the run stays in phase with the video.

Windows (`Windows`): `length` frames each, consecutive windows sharing `overlap` frames: window w starts at
frame `w * (length - overlap)`, the last one at `frames - length` (it may overlap its predecessor more), so
every window has the same length and frames 1..frames are each covered at least once. Truncated
backpropagation cuts one run at frames length, 2 length, ... (no overlap; the last window may be shorter).

The window length is chosen from the gradient horizon (`fit.windows`: `Windows`, `window_length_for`).

Scope: particle scenes (cloth, springs, FEM tetrahedra); rigid bodies' start states (quaternions) are not
free variables, so multiple shooting refuses an experiment with rigid bodies (truncated backpropagation
accepts it).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradsim_jax.fit.fit import FitResult, cosine_schedule, fit
from gradsim_jax.fit.least_squares import forward_jacobian, levenberg_marquardt
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.fit.windows import Scaled, Windows, window_length_for  # noqa: F401  (re-exported)
from gradsim_jax.physics import State
from gradsim_jax.physics.checkpointing import PerFrame
from gradsim_jax.physics.rollout import push_control
from gradsim_jax.render.mesh import trajectory_vertices
from gradsim_jax.sysid.experiment import (Experiment, _as_theta, _split_data, _with_data, compiled, frames_for,
                                          traced_checks, trajectory)
from gradsim_jax.sysid.bounds import stable_bounds
from gradsim_jax.sysid.losses import image_loss
from gradsim_jax.sysid.quantities import QUANTITIES, assemble, canonical, focused, transforms_for

Array = Any

#: theta entries of multiple shooting's free window start states: positions [n_windows - 1, n, 3] m and
#: velocities [n_windows - 1, n, 3] m/s of every particle at the first frame of windows 1, 2, ...
START_X = "_window_x"
START_V = "_window_v"
SHOOTING = ("multiple", "truncated")


def _check_experiment(exp: Experiment, windows: Windows, shooting: str) -> None:
    if shooting not in SHOOTING:
        raise ValueError(f"unknown shooting {shooting!r}; choose from {SHOOTING}")
    if windows.frames != exp.frames:
        raise ValueError(f"the windows cut {windows.frames} frames but the experiment has {exp.frames}")
    if shooting == "multiple" and np.shape(exp.state0.rigid.x)[0]:
        raise ValueError("multiple shooting estimates particle start states only; this experiment has rigid "
                         "bodies: use shooting='truncated'")
    if shooting == "truncated" and windows.overlap:
        raise ValueError("truncated backpropagation cuts one forward run and takes no overlap (overlap=0)")


def _advance(exp: Experiment, params, state: State, frame, push) -> State:
    """The state one frame later: `exp.substeps` semi-implicit Euler steps from frame index `frame` (absolute,
    traced), the known push acting during the first `exp.push_frames` frames, as `sysid.rollout` does."""
    dt = exp.frame_dt / exp.substeps
    ctrl = push_control(push, exp.push_frames, frame)
    t0 = frame * exp.frame_dt
    integrator = exp.integrator

    def substep(s, k):
        return integrator.step(exp.topology, params, s, ctrl, t0 + k * dt, dt), None

    return jax.lax.scan(PerFrame().substep(substep), state, jnp.arange(exp.substeps))[0]


def _run(exp: Experiment, params, state0: State, first: Array, frames: int, push,
         cut: Optional[Array] = None) -> State:
    """States [frames + 1, ...] from `state0` at absolute frame `first`; `cut` [frames] bool: stop the gradient
    of the state carried into those frames. One `jax.checkpoint` per frame, as `simulate`."""

    @jax.checkpoint
    def one_frame(state, k):
        if cut is not None:
            state = jax.tree.map(lambda a: jnp.where(cut[k], jax.lax.stop_gradient(a), a), state)
        state = _advance(exp, params, state, first + k, push)
        return state, state

    _, traj = jax.lax.scan(one_frame, state0, jnp.arange(frames))
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], axis=0), state0, traj)


def _push(exp: Experiment, theta: dict):
    push = theta["push"] if "push" in theta else exp.theta.get("push")
    return None if push is None else jnp.asarray(push, exp.dtype)


def _frame_losses(exp: Experiment, theta: dict, params, traj: State, target: Array, kind: str) -> Array:
    """Image loss of each state of `traj` (leaves [T, ...]) against `target` [T, H, W, 4]: [T]."""
    pred = frames_for(exp, trajectory_vertices(exp.topology, params, traj), theta)
    return jax.vmap(lambda p, t: image_loss(kind, p[None], t[None]))(pred, target)


def _movable(exp: Experiment) -> Array:
    """[n, 1] bool: particles a start state may move (not pinned, positive mass); traceable."""
    return (~exp.topology.particles.pinned & (exp.params.particles.mass > 0))[:, None]


def window_states(exp: Experiment, theta: dict, windows: Windows) -> dict:
    """The window start states of a run of theta: {START_X: [count - 1, n, 3] m, START_V: [count - 1, n, 3] m/s}
    at frames `windows.starts[1:]` (the initial guess of multiple shooting: its joins then match exactly)."""
    theta = _as_theta(exp, {k: v for k, v in theta.items() if not k.startswith("_")})
    traj = compiled(exp, trajectory, "trajectory")(theta)
    idx = np.asarray(windows.starts[1:], np.int64)
    return {START_X: jnp.asarray(traj.particles.x)[idx], START_V: jnp.asarray(traj.particles.v)[idx]}


def windowed_terms(exp: Experiment, target: Array, theta: dict, windows: Windows, *, shooting: str = "multiple",
                   kind: str = "rgba", position_scale: float = 0.01, velocity_scale: float = 0.6) -> dict:
    """The parts of the windowed loss (plain function, traceable; jit at the call site).

    Args:
      exp: the experiment (particle scene for multiple shooting).
      target: video [frames + 1, H, W, 4] (frame 0, the given initial state, is not compared).
      theta: quantities as for `sysid.make_loss`; for multiple shooting also START_X and START_V (see
        `window_states`).
      windows: how the recording is cut; `windows.frames` must be `exp.frames`.
      shooting: "multiple" or "truncated" (module docstring).
      kind: image loss ("rgba", "rgb", "silhouette").
      position_scale (m), velocity_scale (m/s): a join mismatch of this size costs 1 (before `continuity`).
    Returns:
      {"image": mean image loss over every window's frames, "continuity": mean over joins of
      mean((dx / position_scale)^2) + mean((dv / velocity_scale)^2) (0 for truncated backpropagation or one
      window), "join_x": [count - 1] RMS position mismatch per join (m), "join_v": [count - 1] (m/s)}.
    """
    _check_experiment(exp, windows, shooting)
    target = jnp.asarray(target)
    params, state0 = assemble(exp, theta)
    push = _push(exp, theta)
    dtype = exp.dtype
    if shooting == "truncated":
        cut = np.zeros(windows.frames, bool)
        cut[list(windows.cuts())] = True
        traj = _run(exp, params, state0, jnp.asarray(0), windows.frames, push, jnp.asarray(cut))
        idx = np.arange(1, windows.frames + 1, windows.stride)
        compared = jax.tree.map(lambda a: a[idx], traj)
        image = jnp.mean(_frame_losses(exp, theta, params, compared, target[idx], kind))
        empty = jnp.zeros((0,), dtype)
        return {"image": image, "continuity": jnp.zeros((), dtype), "join_x": empty, "join_v": empty}

    count, length = windows.count, windows.length
    starts = np.asarray(windows.starts)
    free_x = theta.get(START_X, jnp.zeros((0,) + state0.particles.x.shape, dtype))
    free_v = theta.get(START_V, jnp.zeros((0,) + state0.particles.v.shape, dtype))
    expected = (count - 1,) + tuple(state0.particles.x.shape)
    for name, value in ((START_X, free_x), (START_V, free_v)):
        if tuple(jnp.shape(value)) != expected:
            raise ValueError(f"theta[{name!r}] must have shape {expected} (one state per window after the first, "
                             f"see window_states); got {tuple(jnp.shape(value))}")
    movable = _movable(exp)
    # Pinned particles keep their initial state in every window (they do not move).
    xs = jnp.concatenate([state0.particles.x[None], jnp.where(movable, free_x, state0.particles.x)])
    vs = jnp.concatenate([state0.particles.v[None], jnp.where(movable, free_v, state0.particles.v)])
    starts_state = jax.tree.map(lambda a: jnp.broadcast_to(a, (count,) + a.shape), state0)
    starts_state = dataclasses.replace(
        starts_state, particles=dataclasses.replace(starts_state.particles, x=xs, v=vs))
    trajs = jax.lax.map(lambda sf: _run(exp, params, sf[0], sf[1], length, push), (starts_state, jnp.asarray(starts)))
    offsets = windows.offsets()
    frames = jax.tree.map(lambda a: a[:, offsets].reshape((count * len(offsets),) + a.shape[2:]), trajs)
    tgt = target[windows.frame_index().reshape(-1)]
    image = jnp.mean(_frame_losses(exp, theta, params, frames, tgt, kind))
    if count == 1:
        empty = jnp.zeros((0,), dtype)
        return {"image": image, "continuity": jnp.zeros((), dtype), "join_x": empty, "join_v": empty}
    # Window w's simulated state at the first frame of window w + 1.
    offset = starts[1:] - starts[:-1]
    end_x = trajs.particles.x[np.arange(count - 1), offset]
    end_v = trajs.particles.v[np.arange(count - 1), offset]
    dx, dv = end_x - xs[1:], end_v - vs[1:]
    continuity = jnp.mean(jnp.mean(jnp.square(dx / position_scale), axis=(1, 2))
                          + jnp.mean(jnp.square(dv / velocity_scale), axis=(1, 2)))
    return {"image": image, "continuity": continuity,
            "join_x": jnp.sqrt(jnp.mean(jnp.sum(jnp.square(dx), -1), -1)),
            "join_v": jnp.sqrt(jnp.mean(jnp.sum(jnp.square(dv), -1), -1))}


def windowed_loss(exp: Experiment, target: Array, windows: Windows, *, shooting: str = "multiple",
                  kind: str = "rgba", continuity: float = 1.0, position_scale: float = 0.01,
                  velocity_scale: float = 0.6) -> Callable[[dict], Array]:
    """`loss(theta)`: the windowed image loss plus `continuity` times the join penalty (`windowed_terms`).
    With one window (length = frames) it is the full-horizon loss of `sysid.make_loss`."""
    _check_experiment(exp, windows, shooting)
    if not (math.isfinite(continuity) and continuity >= 0):
        raise ValueError(f"continuity must be a finite number >= 0, got {continuity!r}")
    for name, value in (("position_scale", position_scale), ("velocity_scale", velocity_scale)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")

    def loss(theta):
        terms = windowed_terms(exp, target, theta, windows, shooting=shooting, kind=kind,
                               position_scale=position_scale, velocity_scale=velocity_scale)
        return terms["image"] + continuity * terms["continuity"]

    return loss


def truncated_residual(exp: Experiment, windows: Windows, kind: str = "rgba") -> Callable:
    """`residual(theta, target)`: pixel residuals (pred - target) / sqrt(N) of the compared frames of the
    truncated run, flattened (|r|^2 is the rgba loss), rendered by the dense reference renderer so that it
    has a forward-mode derivative. `jax.lax.stop_gradient` stops tangents as well: its Jacobian is the
    truncated one, each frame differentiated only back to the start of its window."""
    _check_experiment(exp, windows, "truncated")
    channels = {"rgba": slice(None), "rgb": slice(0, 3), "silhouette": slice(3, 4)}[kind]

    def residual(theta, target):
        params, state0 = assemble(exp, theta)
        cut = np.zeros(windows.frames, bool)
        cut[list(windows.cuts())] = True
        traj = _run(exp, params, state0, jnp.asarray(0), windows.frames, _push(exp, theta), jnp.asarray(cut))
        idx = np.arange(1, windows.frames + 1, windows.stride)
        x = trajectory_vertices(exp.topology, params, jax.tree.map(lambda a: a[idx], traj))
        pred = frames_for(exp, x, theta, dense=True)
        tgt = target[idx][..., channels]
        return jnp.ravel((pred[..., channels] - tgt) / math.sqrt(tgt.size))

    return residual


def polish_truncated(exp: Experiment, target: Array, theta: dict, free, windows: Windows, *, steps: int = 10,
                     kind: str = "rgba", progress: bool = False) -> tuple[dict, list]:
    """Levenberg-Marquardt steps on `truncated_residual` over the scalar quantities `free` (in their fit
    transforms, log for positive ones), with the truncated Jacobian (one forward-mode column per quantity).
    Adam crawls along a valley such as mass x stiffness (a ratio well seen, the scale less); Gauss-Newton
    crosses it. Returns (theta, [(loss, {name: value}) per accepted step])."""
    free = tuple(canonical(n) for n in free)
    theta = _as_theta(exp, {k: v for k, v in theta.items() if not k.startswith("_")})
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


def default_scales(exp: Experiment) -> tuple[float, float]:
    """(position_scale m, velocity_scale m/s) of the join penalty: 1 % of the initial state's bounding-box
    diagonal, and that distance per frame."""
    x = np.asarray(exp.state0.particles.x, np.float64)
    extent = float(np.linalg.norm(x.max(0) - x.min(0))) if len(x) else 1.0
    position = 0.01 * max(extent, 1e-6)
    return position, position / exp.frame_dt


@dataclasses.dataclass
class WindowedFitResult:
    """theta: fitted quantities {name: array}; starts: {START_X, START_V} fitted window start states (empty
    dict for truncated backpropagation); loss: the final windowed loss; terms: {"image", "continuity",
    "join_x_max" m, "join_v_max" m/s} at the end; history: `fit`'s history (per iteration loss, grad_norm
    and the quantities; with polish also "polish": {"loss": [...], name: [...]} per accepted step); windows; shooting; wall_time (s); fit: the underlying `FitResult`."""

    theta: dict
    starts: dict
    loss: float
    terms: dict
    history: dict
    windows: Windows
    shooting: str
    wall_time: float
    fit: FitResult


def fit_windowed(exp: Experiment, target: Array, initial: dict, free, *, window: int, overlap: Optional[int] = None,
                 shooting: str = "multiple", iterations: int = 100, learning_rate: float = 0.05,
                 state_learning_rate: Optional[float] = None, continuity: float = 1.0, kind: str = "rgba",
                 frame_stride: int = 1, position_scale: Optional[float] = None, velocity_scale: Optional[float] = None,
                 polish: int = 0, progress: bool = True, checkpoint_dir: Optional[str] = None,
                 checkpoint_every: int = 25, resume: bool = False,
                 callback: Optional[Callable] = None) -> WindowedFitResult:
    """Fit the quantities `free` to the target video with a windowed loss (Adam, cosine-decayed learning rate,
    through `gradsim_jax.fit.fit`: history, NaN guard, traced parameter checks, checkpoints and resume).

    Args:
      exp, target: the experiment and its video [frames + 1, H, W, 4].
      initial: starting theta (e.g. 40 % off); free: quantities to estimate ("mass", "stiffness", ...).
        For multiple shooting it may hold START_X and START_V, the windows' start states (e.g. `window_states`
        of a truncated fit's result); without them they come from a run of `initial`.
      window: window length in frames (see `window_length_for`); overlap: frames shared by consecutive
        windows (multiple shooting; default window // 4; truncated backpropagation takes 0).
      shooting: "multiple" (free start states, initialized by a run of `initial`) or "truncated".
      iterations, learning_rate: Adam iterations and learning rate of the quantities (log space).
      state_learning_rate: learning rate of the start states in units of their scales (default learning_rate).
      kind, frame_stride: image loss and the stride of compared frames in each window (`Windows`).
      continuity, position_scale, velocity_scale: the join penalty (`windowed_terms`; default scales:
        `default_scales`).
      polish: Levenberg-Marquardt steps after Adam on the truncated residuals (`polish_truncated`; truncated
        backpropagation and scalar quantities only).
      progress, checkpoint_dir, checkpoint_every, resume: as for `fit`.
      callback: `callback(iteration, theta, loss)` after each iteration; True stops the fit.
    Returns:
      WindowedFitResult.
    """
    started = time.perf_counter()
    free = tuple(canonical(n) for n in free)
    if overlap is None:
        overlap = window // 4 if shooting == "multiple" and isinstance(window, (int, np.integer)) else 0
    windows = Windows(exp.frames, window, overlap, frame_stride)
    _check_experiment(exp, windows, shooting)
    if polish and shooting != "truncated":
        raise ValueError("polish (Levenberg-Marquardt) applies to truncated backpropagation; multiple shooting's "
                         "start states are too many unknowns for it")
    default_pos, default_vel = default_scales(exp)
    position_scale = default_pos if position_scale is None else position_scale
    velocity_scale = default_vel if velocity_scale is None else velocity_scale
    exp, theta0 = focused(exp, _as_theta(exp, {k: v for k, v in initial.items() if not k.startswith("_")}),
                          [canonical(n) for n in free])
    given = {k: jnp.asarray(initial[k], exp.dtype) for k in (START_X, START_V) if k in initial}
    target = jnp.asarray(target, theta0["push"].dtype)
    transforms: dict = dict(transforms_for(free))
    fields = free
    if shooting == "multiple" and windows.count > 1:
        ratio = (state_learning_rate or learning_rate) / learning_rate
        theta0.update(window_states(exp, theta0, windows) if len(given) < 2 else given)
        transforms[START_X] = Scaled(position_scale * ratio)
        transforms[START_V] = Scaled(velocity_scale * ratio)
        fields = free + (START_X, START_V)
    loss_of = dict(shooting=shooting, kind=kind, continuity=continuity, position_scale=position_scale,
                   velocity_scale=velocity_scale)

    def loss_fn(theta):
        theta, e, tgt = _split_data(exp, theta)
        return windowed_loss(e, tgt, windows, **loss_of)(theta)

    fit_callback = None
    if callback is not None:
        def fit_callback(it, params, loss, aux):
            return callback(it, _split_data(exp, params)[0], loss)

    theta0, bounds = stable_bounds(exp, theta0, free)
    result = fit(loss_fn, _with_data(theta0, exp, target), free=fields, transforms=transforms, bounds=bounds,
                 optimizer=optax.adam(learning_rate), schedule=cosine_schedule(max(iterations, 1), alpha=0.02),
                 steps=iterations, progress=progress, callback=fit_callback,
                 checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume,
                 checks=traced_checks(exp),
                 metadata={"windowed": {"window": window, "overlap": overlap, "frame_stride": frame_stride, **loss_of},
                           "free": list(free), "iterations": iterations, "learning_rate": learning_rate})
    theta = _split_data(exp, result.params)[0]
    history = dict(result.history)
    if polish:
        polished, records = polish_truncated(exp, target, theta, free, windows, steps=polish, kind=kind,
                                             progress=progress)
        theta.update({n: jnp.asarray(polished[n]) for n in free})
        history["polish"] = {"loss": [c for c, _ in records], **{n: [v[n] for _, v in records] for n in free}}

    def final_terms(e, th, tgt):
        return windowed_terms(e, tgt, th, windows, shooting=shooting, kind=kind, position_scale=position_scale,
                              velocity_scale=velocity_scale)

    key = ("windowed_terms", shooting, kind, windows, position_scale, velocity_scale, tuple(sorted(theta)))
    terms = jax.device_get(compiled(exp, final_terms, key)(theta, target))
    starts = {k: np.asarray(theta.pop(k)) for k in (START_X, START_V) if k in theta}
    loss = float(terms["image"] + continuity * terms["continuity"])
    return WindowedFitResult(
        theta={k: np.asarray(v) for k, v in theta.items()}, starts=starts, loss=loss,
        terms={"image": float(terms["image"]), "continuity": float(terms["continuity"]),
               "join_x_max": float(np.max(terms["join_x"], initial=0.0)),
               "join_v_max": float(np.max(terms["join_v"], initial=0.0))},
        history=history, windows=windows, shooting=shooting, wall_time=time.perf_counter() - started,
        fit=result)
