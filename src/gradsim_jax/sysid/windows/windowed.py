"""Windowed fits for long recordings: multiple shooting and truncated backpropagation through time.

Over a long horizon a stiff, swinging cloth is chaotic: the gradient of a loss on late frames with respect
to the parameters grows exponentially with the horizon and, past some horizon, float32 and float64
gradients no longer agree (`gradsim-jax horizon` measures it). A gradient over the full horizon then
follows noise. A windowed fit cuts the recording into windows short enough that every gradient it takes is
trustworthy:

- **multiple shooting** (`shooting="multiple"`; Bock and Plitt 1984): window 0 starts from the experiment's
  initial state (theta), each later window from a *free* start state (particle positions and velocities, an
  ODE body's pose and rate), fitted together with the quantities. Every window is simulated for `length`
  frames from its own start (`lax.map` over the windows), its frames are compared with the target's, and a
  continuity penalty ties each window's simulated state at the next window's first frame to that window's
  start state. At the solution the penalty is zero and the windows join into one trajectory; on the way
  there no gradient crosses more than one window. The start states begin read off the video
  (`window_starts.estimate_window_states`: each window's first frames fitted for the pose, rates from the
  neighbouring frames), the join weight is tightened over the Adam iterations (`continuity=(0.1, 10)`), and
  `polish=N` then takes Gauss-Newton steps on every unknown at once (`shooting.polish_multiple`, for start
  states of at most 32 numbers: an ODE body's).
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

Scope: particle scenes (cloth, springs, FEM tetrahedra) and ODE bodies (`physics.ode`, with their
`coordinates`); rigid bodies' start states (quaternions) are not free variables, so multiple shooting refuses
an experiment with rigid bodies (truncated backpropagation accepts it).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradsim_jax.fit.fit import FitResult, cosine_schedule, fit
from gradsim_jax.fit.windows import Scaled, Windows
from gradsim_jax.physics import State
from gradsim_jax.render.mesh import trajectory_vertices
from gradsim_jax.sysid.bounds import stable_bounds
from gradsim_jax.sysid.experiment import Experiment, as_theta, split_data, with_data, compiled, frames_for, traced_checks
from gradsim_jax.sysid.losses import image_loss
from gradsim_jax.sysid.quantities import assemble, canonical, focused, transforms_for
from gradsim_jax.sysid.windows.shooting import STATE_LIMIT, polish_multiple, state_size
from gradsim_jax.sysid.windows.truncated import polish_truncated
from gradsim_jax.sysid.windows.runs import check_windowed
from gradsim_jax.sysid.windows.starts import (
    PARTS, default_pose_scales, estimate_window_states, pose_periods, pose_rate, push_of, run_from, start_names,
    state_parts
)
from gradsim_jax.sysid.windows.runs import join_gap, run_windows, window_states

Array = Any

#: How multiple shooting's window start states begin: read off the video, or a run of the initial guess.
START_FROM = ("video", "run")


def _frame_losses(exp: Experiment, theta: dict, params, traj: State, target: Array, kind: str) -> Array:
    """Image loss of each state of `traj` (leaves [T, ...]) against `target` [T, H, W, 4]: [T]."""
    pred = frames_for(exp, trajectory_vertices(exp.topology, params, traj), theta)
    return jax.vmap(lambda p, t: image_loss(kind, p[None], t[None]))(pred, target)


def _join_scales(exp: Experiment, position_scale, velocity_scale, pose_scale, rate_scale) -> dict:
    """{part: (pose scale, rate scale)} of the join penalty, defaults filled in (`default_pose_scales`)."""
    parts = state_parts(exp)
    pose = default_pose_scales(exp) if ("x" in parts and position_scale is None) or (
        "q" in parts and pose_scale is None) else {}
    scales = {}
    if "x" in parts:
        position = pose["x"] if position_scale is None else position_scale
        scales["x"] = (position, position / exp.frame_dt if velocity_scale is None else velocity_scale)
    if "q" in parts:
        q = pose["q"] if pose_scale is None else pose_scale
        scales["q"] = (q, q / exp.frame_dt if rate_scale is None else rate_scale)
    for part, pair in scales.items():
        for value in pair:
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"the join scales must be positive numbers, got {value!r}")
    return scales


def windowed_terms(exp: Experiment, target: Array, theta: dict, windows: Windows, *, shooting: str = "multiple",
                   kind: str = "rgba", position_scale: Optional[float] = None, velocity_scale: Optional[float] = None,
                   pose_scale: Optional[float] = None, rate_scale: Optional[float] = None) -> dict:
    """The parts of the windowed loss (plain function, traceable; jit at the call site).

    Args:
      exp: the experiment (particles and / or an ODE body for multiple shooting).
      target: video [frames + 1, H, W, 4] (frame 0, the given initial state, is not compared).
      theta: quantities as for `sysid.make_loss`; for multiple shooting also the window start states
        (`start_names(exp)`: START_X, START_V for particles, START_Q, START_QD for an ODE body; see
        `window_states`, `estimate_window_states`).
      windows: how the recording is cut; `windows.frames` must be `exp.frames`.
      shooting: "multiple" or "truncated" (module docstring).
      kind: image loss ("rgba", "rgb", "silhouette").
      position_scale: m, a particle position mismatch at a join of this size costs 1 (before `continuity`);
        default `default_pose_scales`.
      velocity_scale: m/s, the same for a particle velocity mismatch; default position_scale per frame.
      pose_scale: the same for an ODE body's pose (its units: rad, m); default `default_pose_scales`.
      rate_scale: the same for an ODE body's rate (per s); default pose_scale per frame.
    Returns:
      {"image": mean image loss over every window's frames, "continuity": mean over joins of the sum over the
      state's parts of mean((d pose / its scale)^2) + mean((d rate / its scale)^2) (0 for truncated
      backpropagation or one window), "join_x", "join_v": [count - 1] RMS particle position (m) and velocity
      (m/s) mismatch per join, "join_q", "join_qd": the ODE body's RMS pose and rate mismatch (each empty when
      the scene has no such part)}.
    """
    check_windowed(exp, windows, shooting)
    target = jnp.asarray(target)
    params, state0 = assemble(exp, theta)
    push = push_of(exp, theta)
    dtype = exp.dtype
    empty = {name: jnp.zeros((0,), dtype) for name in ("join_x", "join_v", "join_q", "join_qd")}
    if shooting == "truncated":
        traj = run_from(exp, params, state0, jnp.asarray(0), windows.frames, push, cuts=windows.cuts())
        idx = np.arange(1, windows.frames + 1, windows.stride)
        compared = jax.tree.map(lambda a: a[idx], traj)
        image = jnp.mean(_frame_losses(exp, theta, params, compared, target[idx], kind))
        return {"image": image, "continuity": jnp.zeros((), dtype), **empty}

    count = windows.count
    pose0, rate0 = pose_rate(exp, state0)
    poses, rates = {}, {}
    for part in pose0:
        for name, first, out in zip(PARTS[part], (pose0[part], rate0[part]), (poses, rates)):
            expected = (count - 1,) + tuple(jnp.shape(first))
            free = theta.get(name, jnp.zeros((0,) + tuple(jnp.shape(first)), dtype))
            if tuple(jnp.shape(free)) != expected:
                raise ValueError(f"theta[{name!r}] must have shape {expected} (one state per window after the "
                                 f"first, see window_states); got {tuple(jnp.shape(free))}")
            out[part] = jnp.concatenate([jnp.asarray(first, dtype)[None], jnp.asarray(free, dtype)])
    frames, ends = run_windows(exp, params, state0, poses, rates, windows, push)
    tgt = target[windows.frame_index().reshape(-1)]
    image = jnp.mean(_frame_losses(exp, theta, params, frames, tgt, kind))
    if count == 1:
        return {"image": image, "continuity": jnp.zeros((), dtype), **empty}
    end_pose, end_rate = pose_rate(exp, ends)
    scales = _join_scales(exp, position_scale, velocity_scale, pose_scale, rate_scale)
    # Concrete numbers: the loss is traced with the experiment's arrays as arguments.
    position_scale, velocity_scale = scales.get("x", (None, None))
    pose_scale, rate_scale = scales.get("q", (None, None))
    per_join = jnp.zeros((count - 1,), dtype)
    joins = dict(empty)
    periods = pose_periods(exp)
    for part in poses:
        dp, dr = join_gap(end_pose[part], poses[part][1:], periods[part]), end_rate[part] - rates[part][1:]
        axes = tuple(range(1, dp.ndim))
        sp, sr = scales[part]
        per_join = per_join + jnp.mean(jnp.square(dp / sp), axis=axes) + jnp.mean(jnp.square(dr / sr), axis=axes)
        if part == "x":
            joins["join_x"] = jnp.sqrt(jnp.mean(jnp.sum(jnp.square(dp), -1), -1))
            joins["join_v"] = jnp.sqrt(jnp.mean(jnp.sum(jnp.square(dr), -1), -1))
        else:
            joins["join_q"] = jnp.sqrt(jnp.mean(jnp.square(dp), axis=axes))
            joins["join_qd"] = jnp.sqrt(jnp.mean(jnp.square(dr), axis=axes))
    return {"image": image, "continuity": jnp.mean(per_join), **joins}


def _check_continuity(continuity) -> tuple[float, float]:
    """(first, last) weight of the join penalty: a number, or a pair tightened geometrically over a fit."""
    pair = tuple(continuity) if isinstance(continuity, (tuple, list)) else (continuity, continuity)
    if len(pair) != 2 or not all(isinstance(c, (int, float, np.floating, np.integer)) and math.isfinite(c) and c >= 0
                                 for c in pair):
        raise ValueError(f"continuity must be a finite number >= 0 or a pair of them (first, last), got {continuity!r}")
    if (pair[0] == 0) != (pair[1] == 0):
        raise ValueError(f"a tightened continuity (first, last) needs both weights positive, got {continuity!r}")
    return float(pair[0]), float(pair[1])


def continuity_weight(continuity, iteration, iterations: int):
    """The join penalty's weight at `iteration` (traceable) of `iterations`: `continuity` itself when it is a
    number; for a pair (first, last), first (last / first)^(iteration / (iterations - 1)), from first at
    iteration 0 to last at the end (a geometric tightening).

    Args:
      continuity: a number >= 0, or a pair (first, last) of them.
      iteration: the iteration (may be traced), or None for the last weight.
      iterations: the fit's iterations.

    Returns:
      the weight (a float, or a traced scalar for a traced iteration of a pair).
    """
    first, last = _check_continuity(continuity)
    if first == last or iteration is None:
        return last if iteration is None else first
    fraction = jnp.clip(jnp.asarray(iteration, jnp.float32) / max(iterations - 1, 1), 0.0, 1.0)
    return first * jnp.power(last / first, fraction)


def windowed_loss(exp: Experiment, target: Array, windows: Windows, *, shooting: str = "multiple",
                  kind: str = "rgba", continuity=1.0, iterations: int = 1, position_scale: Optional[float] = None,
                  velocity_scale: Optional[float] = None, pose_scale: Optional[float] = None,
                  rate_scale: Optional[float] = None) -> Callable:
    """`loss(theta, iteration=None)`: the windowed image loss plus the join penalty (`windowed_terms`) times its
    weight (`continuity_weight(continuity, iteration, iterations)`; with no iteration, the last weight). With one
    window (length = frames) it is the full-horizon loss of `sysid.make_loss`.

    Args:
      exp: the experiment.
      target: [frames + 1, H, W, 4] its video.
      windows: how the recording is cut.
      shooting: "multiple" or "truncated".
      kind: the image loss.
      continuity: the join weight: a number or (first, last) (`continuity_weight`).
      iterations: the fit's iterations (for a tightened weight).
      position_scale: m, see `windowed_terms`.
      velocity_scale: m/s, see `windowed_terms`.
      pose_scale: see `windowed_terms`.
      rate_scale: see `windowed_terms`.

    Returns:
      `loss(theta, iteration=None)`, a scalar.
    """
    check_windowed(exp, windows, shooting)
    _check_continuity(continuity)
    if shooting == "multiple" and windows.count > 1:
        _join_scales(exp, position_scale, velocity_scale, pose_scale, rate_scale)

    def loss(theta, iteration=None):
        terms = windowed_terms(exp, target, theta, windows, shooting=shooting, kind=kind,
                               position_scale=position_scale, velocity_scale=velocity_scale,
                               pose_scale=pose_scale, rate_scale=rate_scale)
        return terms["image"] + continuity_weight(continuity, iteration, iterations) * terms["continuity"]

    return loss


@dataclasses.dataclass(frozen=True)
class WindowedFitResult:
    """theta: fitted quantities {name: array}; starts: the fitted window start states ({START_X, START_V,
    START_Q, START_QD} as the scene has them; empty for truncated backpropagation); loss: the final windowed
    loss (the last join weight); terms: {"image", "continuity", "join_x_max" m, "join_v_max" m/s, "join_q_max",
    "join_qd_max" (an ODE body's units)} at the end; history: `fit`'s history (per iteration loss, grad_norm
    and the quantities; with polish also "polish": {"loss": [...], name: [...]} per accepted step); windows;
    shooting; start_from: how the start states began ("video", "run", "given"; None for truncated);
    start_fit: with start_from "video", the image loss of each window's start pose as predicted and as fitted
    ({"predicted": [...], "fitted": [...]}) and the seconds it took; wall_time (s); fit: the `FitResult`."""

    theta: dict
    starts: dict
    loss: float
    terms: dict
    history: dict
    windows: Windows
    shooting: str
    wall_time: float
    fit: FitResult
    start_from: Optional[str] = None
    start_fit: Optional[dict] = None


#: Multiple shooting's default join weight: tightened from the first to the last over the iterations, so that
#: the windows first follow their own frames and are then pulled into one motion.
TIGHTENED = (0.1, 10.0)


def _loss_options(scales: dict, shooting: str, kind: str) -> dict:
    """The keyword arguments of `windowed_terms` and `windowed_loss` but the windows: shooting, kind and the join
    scales as concrete numbers (`_join_scales`; the loss is traced with the experiment's arrays as arguments)."""
    position_scale, velocity_scale = scales.get("x", (None, None))
    pose_scale, rate_scale = scales.get("q", (None, None))
    return dict(shooting=shooting, kind=kind, position_scale=position_scale, velocity_scale=velocity_scale,
                pose_scale=pose_scale, rate_scale=rate_scale)


def _checked_continuity(exp: Experiment, windows: Windows, shooting: str, start_from: str, continuity,
                        polish: int):
    """The join weight (`continuity`, `TIGHTENED` or 1.0 when None), after checking the fit's options."""
    check_windowed(exp, windows, shooting)
    if start_from not in START_FROM:
        raise ValueError(f"start_from must be one of {START_FROM}, got {start_from!r}")
    if continuity is None:
        continuity = TIGHTENED if shooting == "multiple" else 1.0
    _check_continuity(continuity)
    if polish and shooting == "multiple" and windows.count > 1 and state_size(exp) > STATE_LIMIT:
        raise ValueError(f"polish after multiple shooting solves for every window's start state: at most "
                         f"{STATE_LIMIT} numbers per window (an ODE body's); this scene's have {state_size(exp)}")
    return continuity


@dataclasses.dataclass(frozen=True)
class _Starts:
    """How multiple shooting's window start states begin.

    Attributes:
      states: {start-state name: [windows - 1, ...] value} (empty for truncated backpropagation or one window).
      transforms: {start-state name: its fit transform (`Scaled` by its join scale)}.
      used: "given", "run" or "video"; None when there are no free start states.
      start_fit: with "video", the start-pose fit's image losses and wall time (`WindowedFitResult.start_fit`).
    """
    states: dict
    transforms: dict
    used: Optional[str] = None
    start_fit: Optional[dict] = None


def _begin_starts(exp: Experiment, target: Array, theta0: dict, initial: dict, windows: Windows, free: tuple,
                  scales: dict, *, shooting: str, start_from: str, kind: str, progress: bool,
                  start_options: Optional[dict], state_learning_rate: Optional[float],
                  learning_rate: float) -> _Starts:
    """The window start states (given in `initial`, a run of theta0 or read off the video) and their transforms
    (the join scales times the start states' learning rate relative to the quantities')."""
    if not (shooting == "multiple" and windows.count > 1):
        return _Starts({}, {})
    names = start_names(exp)
    given = {k: jnp.asarray(initial[k], exp.dtype) for k in names if k in initial}
    ratio = (state_learning_rate or learning_rate) / learning_rate
    start_fit = None
    if len(given) == len(names):
        used, states = "given", given
    elif start_from == "run":
        used, states = "run", window_states(exp, theta0, windows)
    else:
        used = "video"
        began = time.perf_counter()
        states = estimate_window_states(exp, target, theta0, windows, kind=kind, free=free,
                                        progress=progress, **(start_options or {}))
        start_fit = {**{k: v.tolist() for k, v in states.pop("_pose_fit").items()},
                     "wall_time": time.perf_counter() - began}
    transforms = {}
    for part in state_parts(exp):
        for name, scale in zip(PARTS[part], scales[part]):
            transforms[name] = Scaled(scale * ratio)
    return _Starts(states, transforms, used, start_fit)


def _adam_fit(exp: Experiment, target: Array, theta0: dict, windows: Windows, free: tuple, starts: _Starts, *,
              continuity, loss_of: dict, iterations: int, learning_rate: float, progress: bool,
              callback: Optional[Callable], checkpoints: tuple, metadata: dict) -> FitResult:
    """`fit` with Adam on the windowed loss; checkpoints: (checkpoint_dir, checkpoint_every, resume)."""

    def loss_fn(theta, iteration):
        theta, e, tgt = split_data(exp, theta)
        return windowed_loss(e, tgt, windows, continuity=continuity, iterations=iterations, **loss_of)(theta,
                                                                                                        iteration)

    fit_callback = None
    if callback is not None:
        def fit_callback(it, params, loss, aux):
            return callback(it, split_data(exp, params)[0], loss)

    fields = free + start_names(exp) if starts.used is not None else free
    transforms = {**dict(transforms_for(free)), **starts.transforms}
    theta0, bounds = stable_bounds(exp, theta0, free)
    checkpoint_dir, checkpoint_every, resume = checkpoints
    return fit(loss_fn, with_data(theta0, exp, target), free=fields, transforms=transforms, bounds=bounds,
               optimizer=optax.adam(learning_rate), schedule=cosine_schedule(max(iterations, 1), alpha=0.02),
               steps=iterations, progress=progress, callback=fit_callback, uses_iteration=True,
               checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume,
               checks=traced_checks(exp), metadata=metadata)


def _polished(exp: Experiment, target: Array, theta: dict, free: tuple, windows: Windows, scales: dict,
              history: dict, *, polish: int, shooting: str, weight: float, kind: str, progress: bool) -> tuple:
    """(theta, history) after `polish` Levenberg-Marquardt steps (none when polish is 0): multiple shooting's
    on every unknown, else truncated backpropagation's on the quantities; history gains "polish"."""
    theta, history = dict(theta), dict(history)
    if polish and shooting == "multiple" and windows.count > 1:
        polished, records = polish_multiple(exp, target, theta, free, windows, scales, weight=weight, steps=polish,
                                            kind=kind, progress=progress)
        theta.update({n: jnp.asarray(polished[n]) for n in free + start_names(exp)})
    elif polish:
        polished, records = polish_truncated(exp, target, theta, free, windows, steps=polish, kind=kind,
                                             progress=progress)
        theta.update({n: jnp.asarray(polished[n]) for n in free})
    else:
        return theta, history
    history["polish"] = {"loss": [c for c, _ in records], **{n: [v[n] for _, v in records] for n in free}}
    return theta, history


def _final_terms(windows: Windows, loss_of: dict, e, th, tgt):
    """`windowed_terms` of theta `th` on the target `tgt` (compiled by `_final_result`)."""
    return windowed_terms(e, tgt, th, windows, **loss_of)


def _final_result(exp: Experiment, target: Array, theta: dict, windows: Windows, loss_of: dict, weight: float,
                  started: float, **fields) -> WindowedFitResult:
    """The `WindowedFitResult` of the fitted theta (start states split off), its terms measured at the last join
    weight `weight`, its wall time counted from `started` (`time.perf_counter()`); `fields`: the result's other
    fields (history, shooting, fit, start_from, start_fit)."""
    key = ("windowed_terms", windows, tuple(sorted(loss_of.items())), tuple(sorted(theta)))
    terms = jax.device_get(compiled(exp, functools.partial(_final_terms, windows, loss_of), key)(theta, target))
    theta = dict(theta)
    starts = {k: np.asarray(theta.pop(k)) for k in start_names(exp) if k in theta}
    loss = float(terms["image"] + weight * terms["continuity"])
    return WindowedFitResult(
        theta={k: np.asarray(v) for k, v in theta.items()}, starts=starts, loss=loss,
        terms={"image": float(terms["image"]), "continuity": float(terms["continuity"]),
               **{f"{k}_max": float(np.max(terms[k], initial=0.0)) for k in ("join_x", "join_v", "join_q", "join_qd")}},
        windows=windows, wall_time=time.perf_counter() - started, **fields)


def fit_windowed(exp: Experiment, target: Array, initial: dict, free, *, window: int, overlap: Optional[int] = None,
                 shooting: str = "multiple", iterations: int = 100, learning_rate: float = 0.05,
                 state_learning_rate: Optional[float] = None, continuity=None, kind: str = "rgba",
                 frame_stride: int = 1, start_from: str = "video", start_options: Optional[dict] = None,
                 position_scale: Optional[float] = None, velocity_scale: Optional[float] = None,
                 pose_scale: Optional[float] = None, rate_scale: Optional[float] = None,
                 polish: int = 0, progress: bool = True, checkpoint_dir: Optional[str] = None,
                 checkpoint_every: int = 25, resume: bool = False,
                 callback: Optional[Callable] = None) -> WindowedFitResult:
    """Fit the quantities `free` to the target video with a windowed loss (Adam, cosine-decayed learning rate,
    through `gradsim_jax.fit.fit`: history, NaN guard, traced parameter checks, checkpoints and resume).

    Args:
      exp: the experiment.
      target: [frames + 1, H, W, 4] its video.
      initial: starting theta (e.g. 5 % off). For multiple shooting it may hold the windows' start states
        (`start_names(exp)`, e.g. `window_states` of a truncated fit's result); they are then used as given.
      free: quantities to estimate ("mass", "pendulum_length", ...).
      window: window length in frames (see `window_length_for`).
      overlap: frames shared by consecutive windows (multiple shooting; default window // 4; truncated
        backpropagation takes 0).
      shooting: "multiple" (free start states) or "truncated".
      iterations: Adam iterations.
      learning_rate: Adam's learning rate of the quantities (in their fit transforms: log space).
      state_learning_rate: learning rate of the start states in units of their scales (default learning_rate).
      continuity: the join penalty's weight: a number, or (first, last) tightened geometrically over the
        iterations (`continuity_weight`); default `TIGHTENED` for multiple shooting.
      kind: the image loss ("rgba", "rgb", "silhouette").
      frame_stride: the stride of compared frames in each window (`Windows`).
      start_from: where multiple shooting's start states begin: "video" (`estimate_window_states`: each
        window's first frames fitted for the pose, rates from the neighbouring frames) or "run" (a run of
        `initial`, `window_states`).
      start_options: keyword arguments of `estimate_window_states`.
      position_scale: m, the join penalty's unit of particle positions (`windowed_terms`).
      velocity_scale: m/s, of particle velocities.
      pose_scale: of an ODE body's pose (its units).
      rate_scale: of an ODE body's rate (its units per s).
      polish: Levenberg-Marquardt steps after Adam: truncated backpropagation on the truncated residuals
        (`polish_truncated`, scalar quantities); multiple shooting on every unknown, the quantities and the start
        states (`shooting.polish_multiple`: Gauss-Newton multiple shooting, start states of at most
        STATE_LIMIT numbers per window, an ODE body's).
      progress: progress bar and lines, as for `fit`.
      checkpoint_dir: folder of the fit's checkpoints (None: none), as for `fit`.
      checkpoint_every: iterations between checkpoints, as for `fit`.
      resume: continue from the checkpoint in checkpoint_dir, as for `fit`.
      callback: `callback(iteration, theta, loss)` after each iteration; True stops the fit.
    Returns:
      WindowedFitResult.
    """
    started = time.perf_counter()
    free = tuple(canonical(n) for n in free)
    if overlap is None:
        overlap = window // 4 if shooting == "multiple" and isinstance(window, (int, np.integer)) else 0
    windows = Windows(exp.frames, window, overlap, frame_stride)
    continuity = _checked_continuity(exp, windows, shooting, start_from, continuity, polish)
    scales = _join_scales(exp, position_scale, velocity_scale, pose_scale, rate_scale)
    loss_of = _loss_options(scales, shooting, kind)
    exp, theta0 = focused(exp, as_theta(exp, {k: v for k, v in initial.items() if not k.startswith("_")}),
                          [canonical(n) for n in free])
    target = jnp.asarray(target, theta0["push"].dtype)
    starts = _begin_starts(exp, target, theta0, initial, windows, free, scales, shooting=shooting,
                           start_from=start_from, kind=kind, progress=progress, start_options=start_options,
                           state_learning_rate=state_learning_rate, learning_rate=learning_rate)
    theta0.update(starts.states)
    first, last = _check_continuity(continuity)
    metadata = {"windowed": {"window": window, "overlap": overlap, "frame_stride": frame_stride,
                             "continuity": [first, last], "start_from": starts.used,
                             **{k: v for k, v in loss_of.items() if v is not None}},
                "free": list(free), "iterations": iterations, "learning_rate": learning_rate}
    result = _adam_fit(exp, target, theta0, windows, free, starts, continuity=continuity, loss_of=loss_of,
                       iterations=iterations, learning_rate=learning_rate, progress=progress, callback=callback,
                       checkpoints=(checkpoint_dir, checkpoint_every, resume), metadata=metadata)
    theta, history = _polished(exp, target, split_data(exp, result.params)[0], free, windows, scales,
                               dict(result.history), polish=polish, shooting=shooting, weight=last, kind=kind,
                               progress=progress)
    return _final_result(exp, target, theta, windows, loss_of, last, started, history=history, shooting=shooting,
                         fit=result, start_from=starts.used, start_fit=starts.start_fit)
