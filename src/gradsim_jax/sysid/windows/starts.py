"""Where the windows of a multiple-shooting fit start (`sysid.windows.windowed`); the start states' parts, the runs that
start there and the joins: `sysid.windows.runs` (its names are re-exported here).

Multiple shooting simulates every window from its own start state, a free unknown fitted along with the
quantities. The fit converges only when those states begin near the recorded motion. Two ways to begin:

- **from the video** (`estimate_window_states`, the default of `fit_windowed(shooting="multiple")`): window by
  window, the state at the window's first frame s is read off the video itself. The previous window's start
  (window 0: the experiment's initial state) is run forward with the current guess of the quantities to
  predict the poses at frames s - k .. s + k (k = `neighbours`, default 2). Each of those 2k + 1 frames is
  then fitted for the pose alone (positions of the particles, the ODE body's pose), starting from the
  prediction: Adam on the image loss of that one frame plus a small pull towards the prediction (`prior`,
  which holds what the image cannot see, such as a cloth's in-plane motion). The start pose is the fitted
  pose at s; the start rate (velocities, the ODE body's rate) is the derivative at s of the polynomial
  through the 2k + 1 fitted poses (degree 2k: the 5-point central difference for k = 2, error O(dt^4)).
  The prediction runs over one window only, so a guess whose long-run motion has parted from the video
  (a chaotic motion, 5 % off) still predicts each next window's first frames well. When it does not (the
  image loss is flat once a bob misses its image), an ODE body whose poses are angles
  (`OdeSystem.pose_period`: the pendulums) has each frame also fitted from the best pose of a search over
  whole turns around the prediction (`search_offsets`: a 16 x 16 grid over both angles of a double pendulum,
  then 5 x 5 around the best, compared at 32 px), kept when its image loss is under half the prediction's
  fit's: a lost start is found again. Angles are unwrapped onto
  the prediction's turn, and a join between windows measures an angle's mismatch on the circle
  (`join_gap`): a start a whole turn away is the same physical state.
- **from a run of the initial guess** (`window_states`): the states of one simulation with the initial
  quantities at the windows' first frames. Its joins match exactly, but in a chaotic or long motion the
  run parts from the video after a few windows, and the fit then starts far from it (issue 12's runs stalled
  there).

The start states are theta entries: START_X, START_V (particles, [count - 1, n, 3] m and m/s) and START_Q,
START_QD (an ODE body's pose and rate, `physics.ode.ode_coordinates`, [count - 1, ...] in its own units).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any, Callable

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from gradsim_jax.fit.least_squares import forward_jacobian
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.fit.windows import Windows
from gradsim_jax.physics import State
from gradsim_jax.render.mesh import scene_vertices
from gradsim_jax.render.camera import with_image_size
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, frames_for, render_frames, trajectory
from gradsim_jax.sysid.losses import image_loss, residual_channels
from gradsim_jax.sysid.quantities import QUANTITIES, assemble, blur_for, camera_for, canonical
from gradsim_jax.sysid.windows.kinds import START_PARTS
from gradsim_jax.sysid.windows.runs import (
    PARTS, movable, pose_periods, pose_rate, push_of, run_from, start_names, state_parts, unwrap,
    with_pose_rate
)

Array = Any

def derivative_weights(offsets, dt: float) -> np.ndarray:
    """Weights w [m] with sum_i w_i p(offsets_i dt) = p'(0) for every polynomial of degree min(m - 1, 4) (least
    squares beyond): the central difference of the poses at frames `offsets` around the start (0).

    Args:
      offsets: [m] int, frames around the start (at least two distinct).
      dt: s, the time between frames.

    Returns:
      [m] float64, 1/s.
    """
    t = np.asarray(offsets, np.float64) * dt
    degree = min(len(t) - 1, 4)
    if degree < 1:
        raise ValueError("a rate needs the poses of at least two frames")
    return np.linalg.pinv(np.vander(t, degree + 1, increasing=True))[1]


#: Up to this many pose unknowns (an ODE body's angles, a few particles) a pose is fitted by Levenberg-Marquardt
#: with a forward-mode Jacobian (`render(autodiff=True)`); beyond it (a cloth's particles) by Adam.
GAUSS_NEWTON_LIMIT = 32
#: The unit of a free quantity in a pose fit: 0.05 in its fit transform (5 % of a quantity fitted in log space).
QUANTITY_SCALE = 0.05
#: An ODE body whose pose coordinates are angles (`OdeSystem.pose_period`) has each pose fit start from the best
#: of a search over whole turns: about this many poses on a grid over every coordinate's period (the prediction
#: among them), then FINE_POINTS per coordinate within one grid spacing of the best. Up to SEARCH_MAX_COORDINATES
#: coordinates (a double pendulum's 2: a 16 x 16 grid, then 5 x 5); a pose with more is fitted from its prediction.
SEARCH_CANDIDATES = 256
FINE_POINTS = 5
SEARCH_MAX_COORDINATES = 3
#: The search compares its candidates at about this many pixels on the image's short side (the frame averaged
#: down by a whole factor, the camera's intrinsics scaled alike): it only has to find the basin the fit refines.
SEARCH_PIXELS = 32
#: The fit from the search's pose replaces the fit from the prediction when its image loss is below this
#: fraction of the prediction's (`_pose_fit`).
SEARCH_WINS = 0.5


def search_offsets(n: int, period: float) -> tuple[np.ndarray, np.ndarray]:
    """(coarse [c, n], fine [f, n]) offsets of a pose search over n periodic coordinates: a grid of g points per
    coordinate over one period, g^n <= SEARCH_CANDIDATES, offset 0 (the prediction) included; then FINE_POINTS
    per coordinate spanning one coarse spacing around the best.

    Args:
      n: the number of periodic coordinates.
      period: their period (rad for angles).

    Returns:
      (coarse [c, n], fine [f, n]) offsets in the coordinates' units.
    """
    g = 2
    while (g + 1) ** n <= SEARCH_CANDIDATES:
        g += 1
    spacing = period / g
    axes = (np.arange(g) - g // 2) * spacing
    fine = np.linspace(-0.5, 0.5, FINE_POINTS) * spacing
    grid = lambda a: np.stack(np.meshgrid(*([a] * n), indexing="ij"), -1).reshape(-1, n)  # noqa: E731
    return grid(axes), grid(fine)


def pose_search_period(exp: Experiment):
    """The period of the ODE body's pose coordinates when its start poses are searched (`OdeSystem.pose_period`,
    at most SEARCH_MAX_COORDINATES of them), else None.

    Args:
      exp: the experiment.

    Returns:
      the period (rad), or None.
    """
    period = pose_periods(exp).get("q")
    if period is None:
        return None
    pose, _ = START_PARTS["q"].pose_rate(exp, exp.state0)
    return period if 0 < np.size(pose) <= SEARCH_MAX_COORDINATES else None


@dataclasses.dataclass(frozen=True)
class _PoseFit:
    """What every frame's pose fit shares (`_pose_fit`; built inside the compiled function, so arrays may be
    traced).

    Attributes:
      exp: the experiment.
      theta: quantities.
      base: the state whose pose is replaced (the window's start in the prediction).
      scales: {part: scale} of one pose unit (`default_pose_scales`).
      kind: the image loss.
      steps: Levenberg-Marquardt trial steps or Adam iterations per fit.
      learning_rate: Adam's step size in units of the scales.
      prior: weight of the pull towards the prediction.
      free: quantities fitted with each pose, in units of QUANTITY_SCALE of their fit transforms.
      period: the ODE pose coordinates' period when they are searched over whole turns, else None.
      tf: {name: fit transform} of the free quantities.
      keep: [n] bool, the particles a pose fit may move (None without particles).
      size: unknowns per frame.
    """
    exp: Experiment
    theta: dict
    base: State
    scales: dict
    kind: str
    steps: int
    learning_rate: float
    prior: float
    free: tuple
    period: Any
    tf: dict
    keep: Any
    size: int


def _pose_image(f: _PoseFit, pose: dict, dense: bool = False):
    """[1, H, W, 4] the frame of pose {part: value, "_" + quantity: offset in QUANTITY_SCALE units}."""
    theta, free, tf = f.theta, f.free, f.tf
    th = {**theta, **{n: tf[n].inverse(tf[n].forward(theta[n]) + QUANTITY_SCALE * pose["_" + n]) for n in free}}
    params, _ = assemble(f.exp, th)
    zero = {k: jnp.zeros_like(v) for k, v in pose.items() if k in PARTS}
    vertices = scene_vertices(f.exp.topology, params, with_pose_rate(f.exp, f.base, {k: pose[k] for k in zero}, zero))
    return frames_for(f.exp, vertices[None], th, dense=dense)


def _searched(f: _PoseFit, pred: dict, tgt):
    """pred with its ODE pose the best of the search around it (coarse grid, then fine), compared at a
    reduced size (SEARCH_PIXELS)."""
    exp, theta = f.exp, f.theta
    q = pred["q"]
    coarse, fine = search_offsets(int(np.size(q)), f.period)
    camera = camera_for(exp, theta)
    factor = max(1, min(camera.height, camera.width) // SEARCH_PIXELS)
    h, w = camera.height // factor, camera.width // factor
    small = with_image_size(camera, w, h) if factor > 1 else camera
    pooled = tgt[:h * factor, :w * factor].reshape(h, factor, w, factor, tgt.shape[-1]).mean(axis=(1, 3))
    blur = blur_for(theta)
    params, _ = assemble(exp, theta)
    zero = {k: jnp.zeros_like(v) for k, v in pred.items() if k in PARTS}

    def loss_at(c):
        state = with_pose_rate(exp, f.base, {**{k: pred[k] for k in zero}, "q": c}, zero)
        frame = render_frames(exp, scene_vertices(exp.topology, params, state)[None], camera=small,
                              blur=None if blur is None else blur / factor)
        return image_loss(f.kind, frame, pooled[None])

    def best(centre, offsets):
        cands = centre[None] + jnp.asarray(offsets, q.dtype).reshape((-1,) + q.shape)
        losses = jax.lax.map(loss_at, cands, batch_size=16)
        return cands[jnp.argmin(jnp.where(jnp.isfinite(losses), losses, jnp.inf))]

    return {**pred, "q": best(best(q, coarse), fine)}


def _gauss_newton_pose(f: _PoseFit, pose_of: Callable, flat, tgt):
    """The unknowns [size] after at most `f.steps` Levenberg-Marquardt trial steps from `flat` on the frame's
    residuals (forward-mode Jacobian); `pose_of(u)`: the pose of unknowns u."""
    kind, prior, size = f.kind, f.prior, f.size

    def residual(u):
        diff = residual_channels(kind, _pose_image(f, pose_of(u), dense=True)[0] - tgt)
        return jnp.concatenate([jnp.ravel(diff) / np.sqrt(diff.size), np.sqrt(prior / size) * u])

    def step(carry):
        k, u, lam, cost, _ = carry
        r, cols = forward_jacobian(residual, u)
        jtj, jtr = cols @ cols.T, cols @ r
        damped = jtj + lam * (jnp.diag(jnp.diag(jtj)) + 1e-12 * jnp.eye(u.size, dtype=u.dtype))
        trial = u - jnp.linalg.solve(damped, jtr)
        new = jnp.sum(jnp.square(residual(trial)))
        better = new < cost
        done = (better & (cost - new < 1e-4 * cost)) | (lam > 1e6)
        return (k + 1, jnp.where(better, trial, u), jnp.where(better, lam * 0.3, lam * 10.0),
                jnp.where(better, new, cost), done)

    start = (0, flat, jnp.asarray(1e-3, flat.dtype), jnp.sum(jnp.square(residual(flat))), False)
    return jax.lax.while_loop(lambda c: (c[0] < f.steps) & ~c[4], step, start)[1]


def _adam_pose(f: _PoseFit, pose_of: Callable, flat, tgt):
    """The unknowns [size] after `f.steps` Adam iterations (cosine-decayed `f.learning_rate`) from `flat`."""
    optimizer = optax.adam(optax.cosine_decay_schedule(f.learning_rate, max(f.steps, 1), alpha=0.05))

    def loss(u):
        return image_loss(f.kind, _pose_image(f, pose_of(u)), tgt[None]) + f.prior * jnp.mean(jnp.square(u))

    def step(carry, _):
        u, state = carry
        updates, state = optimizer.update(jax.grad(loss)(u), state, u)
        return (optax.apply_updates(u, updates), state), None

    (u, _), _ = jax.lax.scan(step, (flat, optimizer.init(flat)), None, length=f.steps)
    return u


def _fit_from(f: _PoseFit, pred: dict, tgt):
    """(the pose fitted from pred (its free quantities too), its image loss)."""
    unknowns = {**jax.tree.map(jnp.zeros_like, pred), **{"_" + n: jnp.zeros_like(f.theta[n]) for n in f.free}}
    flat, unravel = jax.flatten_util.ravel_pytree(unknowns)

    def pose_of(u):
        u = unravel(u)
        pose = {k: pred[k] + f.scales[k] * (jnp.where(f.keep, u[k], 0.0) if k == "x" else u[k]) for k in pred}
        return {**pose, **{k: v for k, v in u.items() if k not in PARTS}}

    if f.size <= GAUSS_NEWTON_LIMIT:
        u = _gauss_newton_pose(f, pose_of, flat, tgt)
    else:
        u = _adam_pose(f, pose_of, flat, tgt)
    fitted = pose_of(u)
    return fitted, image_loss(f.kind, _pose_image(f, fitted), tgt[None])


def _fit_one(f: _PoseFit, pred: dict, tgt):
    """(fitted pose {part: value}, image loss at the prediction, at the fit) of one frame."""
    fitted, loss = _fit_from(f, pred, tgt)
    # Also from the search's best pose, kept when its fit's image loss is under SEARCH_WINS x the prediction's:
    # a lost pose's fit ends orders of magnitude higher (a bob off its image: about 0.03 against 1e-4 to 3e-3 on
    # the 600-frame double pendulum); one that is not lost ends about as low from either start, and then the
    # prediction's is kept (on a 16 px pendulum the grid point's fit came out 14 % off in the length).
    if f.period is not None:
        other, other_loss = _fit_from(f, _searched(f, pred, tgt), tgt)
        better = other_loss < SEARCH_WINS * loss
        fitted = jax.tree.map(lambda a, b: jnp.where(better, b, a), fitted, other)
        loss = jnp.minimum(loss, other_loss)
    zero = {**{"_" + n: jnp.zeros_like(f.theta[n]) for n in f.free}, **pred}  # the prediction, quantities as given
    return {k: fitted[k] for k in pred}, image_loss(f.kind, _pose_image(f, zero), tgt[None]), loss


def _pose_fit(exp: Experiment, theta: dict, predicted: dict, base: State, target: Array, scales: dict, kind: str,
              steps: int, learning_rate: float, prior: float, free: tuple = (), period=None):
    """Poses fitted to the frames target [m, H, W, 4], one per frame, each from its predicted pose ({part:
    [m, ...]}), in units of `scales`, minimizing the frame's image loss + prior * mean(offset^2):
    Levenberg-Marquardt (at most `steps` trial steps; forward-mode Jacobian) for at most GAUSS_NEWTON_LIMIT
    unknowns, else Adam (`steps` iterations of size `learning_rate`). The quantities `free` are fitted with each
    frame too, in their fit transforms in units of QUANTITY_SCALE (a length that is off would otherwise bend the
    fitted pose to make up for it; a quantity the picture does not show keeps its value). `period`: the ODE
    body's pose coordinates are angles of this period: each frame is also fitted from the best pose of a search
    over whole turns around the prediction (`search_offsets`), and the fit of lower image loss is kept. Returns
    (poses {part: [m, ...]}, image losses [m] at the predicted poses, [m] at the fitted ones)."""
    keep = movable(exp) if "x" in predicted else None
    tf = {n: resolve_transform(QUANTITIES[n].transform) for n in free}
    size = sum(int(np.prod(np.shape(v)[1:])) for v in predicted.values()) + sum(int(np.size(theta[n])) for n in free)
    fit = _PoseFit(exp, theta, base, scales, kind, steps, learning_rate, prior, free, period, tf, keep, size)
    return jax.vmap(functools.partial(_fit_one, fit))(predicted, target)


def default_pose_scales(exp: Experiment) -> dict:
    """{part: scale}: the size of one unit of the pose fit and of the join penalty (`windowed_terms`): particles
    1 % of the initial state's bounding-box diagonal (m), an ODE body's pose 0.01 of its own unit (rad, m).

    Args:
      exp: the experiment.

    Returns:
      {part: scale}.
    """
    return {part: START_PARTS[part].scale(exp) for part in state_parts(exp)}


def _checked_target(exp: Experiment, target: Array, windows: Windows, neighbours, steps):
    """The target video as an array of the experiment's dtype, after checking the start reading's options."""
    if not isinstance(neighbours, (int, np.integer)) or neighbours < 1:
        raise ValueError(f"neighbours must be an integer >= 1, got {neighbours!r}")
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if windows.frames != exp.frames:
        raise ValueError(f"the windows cut {windows.frames} frames but the experiment has {exp.frames}")
    target = jnp.asarray(target, exp.dtype)
    if target.shape[0] != exp.frames + 1:
        raise ValueError(f"the target has {target.shape[0]} frames; the experiment needs {exp.frames + 1}")
    return target


def _predict_run(span: int, e: Experiment, th: dict, state: State, first):
    """The run of `span` frames from `state` at frame `first` (compiled by `estimate_window_states`)."""
    params, _ = assemble(e, th)
    return run_from(e, params, state, first, span, push_of(e, th))


def _fit_poses(options: tuple, e: Experiment, th: dict, predicted: dict, base: State, tgt):
    """`_pose_fit` with options (scales, kind, steps, learning_rate, prior, free, period)."""
    return _pose_fit(e, th, predicted, base, tgt, *options)


@dataclasses.dataclass(frozen=True)
class _Reading:
    """What reading every window's start off the video shares (`estimate_window_states`).

    Attributes:
      exp: the experiment.
      theta: quantities (the fit's initial guess).
      starts: [count] int, each window's first frame.
      offsets: [2 k + 1] int, the frames around a start whose poses give its rate.
      period: the ODE pose coordinates' period when they are searched over whole turns, else None.
      predict: compiled `_predict_run(theta, state, first)`.
      fit: compiled `_fit_poses(theta, predicted, base, target)`.
    """
    exp: Experiment
    theta: dict
    starts: np.ndarray
    offsets: np.ndarray
    period: Any
    predict: Callable
    fit: Callable


def _fall_back(r: _Reading, w: int, guess_run, out: dict, record: dict) -> tuple:
    """Window w's start from a run of the guess (the old default), written into `out` and noted in `record`:
    (its state, the run)."""
    if guess_run is None:
        guess_run = compiled(r.exp, trajectory, "trajectory")(r.theta)
    state = jax.tree.map(lambda a: a[int(r.starts[w])], guess_run)
    pose, rate = pose_rate(r.exp, state)
    for part in pose:
        out[PARTS[part][0]][w - 1] = pose[part]
        out[PARTS[part][1]][w - 1] = rate[part]
    record["fallback"].append(w)
    return state, guess_run


def _window_run(r: _Reading, w: int, state: State, guess_run, out: dict, record: dict) -> tuple:
    """(the prediction run from window w - 1's start `state`, that start, the guess's run): when the run from
    the last estimate blows up, window w - 1 falls back to the guess's run (`_fall_back`)."""
    previous = int(r.starts[w - 1])
    run = r.predict(r.theta, state, jnp.asarray(previous))
    if w > 1 and not _finite(run):  # the last estimate blows up within its window: the guess's run instead
        state, guess_run = _fall_back(r, w - 1, guess_run, out, record)
        run = r.predict(r.theta, state, jnp.asarray(previous))
    return run, state, guess_run


def _read_start(r: _Reading, w: int, run: State, target) -> tuple:
    """(pose {part: value}, rate {part: value}, state, image loss of the predicted pose, of the fitted one) of
    window w's start, its poses fitted around the start's frame in the prediction `run`."""
    exp, period = r.exp, r.period
    s, previous = int(r.starts[w]), int(r.starts[w - 1])
    frames = np.clip(s + r.offsets, 0, exp.frames)
    predicted, _ = pose_rate(exp, jax.tree.map(lambda a: a[frames - previous], run))
    base = jax.tree.map(lambda a: a[s - previous], run)
    poses, before, after = r.fit(r.theta, predicted, base, target[frames])
    if period is not None:  # the start onto the prediction's turn (the run that joins this window), and its
        at_start = int(np.nonzero(frames == s)[0][0])  # neighbours onto the start's
        centre = unwrap(poses["q"][at_start], predicted["q"][at_start], period)
        poses = {**poses, "q": unwrap(poses["q"], centre[None], period)}
    distinct, first = _distinct(frames - s)
    weights = derivative_weights(distinct, exp.frame_dt)
    at = int(np.nonzero(frames == s)[0][0])
    pose = {k: v[at] for k, v in poses.items()}
    rate = {k: jnp.tensordot(jnp.asarray(weights, v.dtype), v[first], axes=1) for k, v in poses.items()}
    return pose, rate, with_pose_rate(exp, base, pose, rate), float(before[at]), float(after[at])


def estimate_window_states(exp: Experiment, target: Array, theta: dict, windows: Windows, *, kind: str = "rgba",
                           free=(), neighbours: int = 1, steps: int = 30, learning_rate: float = 0.5,
                           prior: float = 1e-4, progress: bool = False) -> dict:
    """The window start states read off the video (module docstring), with the quantities of `theta` (the
    fit's initial guess) predicting each window's first frames from the previous window's start.

    Args:
      exp: the experiment.
      target: [frames + 1, H, W, 4] its video.
      theta: quantities (missing ones: the experiment's).
      windows: how the recording is cut (`windows.frames` = `exp.frames`).
      kind: the image loss of the pose fits.
      free: the fit's quantities, fitted with each pose (`_pose_fit`; their guesses are not changed).
      neighbours: k, the frames on each side of a start whose poses give its rate.
      steps: Levenberg-Marquardt trial steps or Adam iterations per pose fit.
      learning_rate: Adam's step size, in units of the pose scales (`default_pose_scales`).
      prior: weight of the pull towards the prediction.
      progress: a bar over the windows.
    Returns:
      {name: [count - 1, ...]} for `start_names(exp)`, plus "_pose_fit": {"predicted": [count - 1] image loss
      of the predicted start poses, "fitted": [count - 1] after the fit, "fallback": the windows whose start
      could not be read off the video (a non-finite prediction, fit, or run of the window's own motion from its
      estimate) and came from a run of the guess, with a RuntimeWarning} (a record, not a theta entry).
    """
    target = _checked_target(exp, target, windows, neighbours, steps)
    theta = as_theta(exp, {k: v for k, v in theta.items() if not k.startswith("_")})
    starts = np.asarray(windows.starts)
    if len(starts) < 2:
        return {"_pose_fit": {"predicted": np.zeros(0), "fitted": np.zeros(0)}}
    # Each prediction covers the next start's neighbours and the whole window it starts from (its check).
    span = max(int(np.max(np.diff(starts))) + neighbours, windows.length)
    scales = default_pose_scales(exp)
    offsets = np.arange(-neighbours, neighbours + 1)
    free = tuple(canonical(n) for n in free if canonical(n) != "push")
    period = pose_search_period(exp)
    options = (scales, kind, steps, learning_rate, prior, free, period)
    predict_c = compiled(exp, functools.partial(_predict_run, span), ("window_starts_predict", span))
    fit_c = compiled(exp, functools.partial(_fit_poses, options),
                     ("window_starts_pose_fit", kind, steps, learning_rate, prior, tuple(sorted(scales.items())),
                      len(offsets), free, period))
    _, state = compiled(exp, lambda e, th: assemble(e, th), "assemble")(theta)
    r = _Reading(exp, theta, starts, offsets, period, predict_c, fit_c)
    out: dict = {name: [] for name in start_names(exp)}
    record = {"predicted": [], "fitted": [], "fallback": []}
    guess_run = None
    for w in tqdm(range(1, len(starts)), disable=not progress, desc="window starts", unit="window",
                  dynamic_ncols=True):
        run, state, guess_run = _window_run(r, w, state, guess_run, out, record)
        pose, rate, state, before, after = _read_start(r, w, run, target)
        for part in pose:
            out[PARTS[part][0]].append(pose[part])
            out[PARTS[part][1]].append(rate[part])
        record["predicted"].append(before)
        record["fitted"].append(after)
        if not (np.isfinite(after) and _finite((pose, rate))):
            # The prediction from the window before, or this fit, blew up: the guess's own run instead.
            state, guess_run = _fall_back(r, w, guess_run, out, record)
    if w not in record["fallback"] and not _finite(predict_c(theta, state, jnp.asarray(int(starts[w])))):
        _fall_back(r, w, guess_run, out, record)  # the last window's own motion blows up
    if record["fallback"]:
        warnings.warn(f"window start(s) {sorted(record['fallback'])} could not be read off the video (the pose fit, "
                      "or the motion the initial guess makes from it, was not finite); they start from a run of the "
                      "guess instead", RuntimeWarning, stacklevel=2)
    result = {name: jnp.stack(values) for name, values in out.items()}
    result["_pose_fit"] = {k: np.asarray(v) for k, v in record.items()}
    return result


def _finite(tree) -> bool:
    return all(bool(np.all(np.isfinite(np.asarray(leaf)))) for leaf in jax.tree.leaves(tree))


def _distinct(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct offsets, the index of each one's first occurrence): clipped frames repeat at the ends."""
    values, first = np.unique(offsets, return_index=True)
    return values, first
