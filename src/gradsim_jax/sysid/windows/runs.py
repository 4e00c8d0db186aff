"""The window start states of multiple shooting (`sysid.windows.windowed`): which parts of the state a window start frees
(particles, an ODE body: `sysid.windows.kinds.START_PARTS`) and their theta entries, the runs from them (`run_from`, `run_windows`,
`window_states`), and the joins between windows (`join_gap`: an angle's on the circle). Reading the start
states off the video: `sysid.windows.starts`.

The start states are theta entries: START_X, START_V (particles, [count - 1, n, 3] m and m/s) and START_Q,
START_QD (an ODE body's pose and rate, `physics.ode.ode_coordinates`, [count - 1, ...] in its own units).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.windows import Windows
from gradsim_jax.physics import State
from gradsim_jax.physics.checkpointing import PerFrame
from gradsim_jax.physics.component import OwnStepKind, RolloutOptions
from gradsim_jax.physics.components import COMPONENTS
from gradsim_jax.physics.rollout import push_control
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, trajectory
from gradsim_jax.sysid.windows.kinds import (  # noqa: F401  (movable: re-exported for sysid.windows.starts)
    PARTS, START_PARTS, START_Q, START_QD, START_V, START_X, movable, refusal)

Array = Any

#: How a windowed fit treats the windows (`sysid.windows.windowed`): free start states, or one run cut by stop_gradient.
SHOOTING = ("multiple", "truncated")

#: theta entries of the built-in free window start states (`sysid.windows.kinds`: START_X, START_V, START_Q,
#: START_QD); PARTS: (pose, rate) entries per part of the state ("x" the particles, "q" the ODE body).
STARTS = (START_X, START_V, START_Q, START_QD)


def has_ode(exp: Experiment) -> bool:
    """Whether the experiment has an ODE body (its topology and its initial state both hold one).

    Args:
      exp: the experiment.

    Returns:
      True when window starts have an ODE part "q".
    """
    return START_PARTS["q"].present(exp)


def state_parts(exp: Experiment) -> tuple[str, ...]:
    """The parts of the state that a window start frees (`START_PARTS` the experiment has): "x" (particles, when
    there are any), "q" (an ODE body).

    Args:
      exp: the experiment.

    Returns:
      ("x", "q"), ("x",), ("q",) or ().
    """
    return tuple(key for key, part in START_PARTS.items() if part.present(exp))


def start_names(exp: Experiment) -> tuple[str, ...]:
    """The theta entries of this experiment's free window start states.

    Args:
      exp: the experiment.

    Returns:
      the names (`PARTS` of each of `state_parts(exp)`: pose then rate).
    """
    return tuple(name for part in state_parts(exp) for name in PARTS[part])


def pose_rate(exp: Experiment, state: State) -> tuple[dict, dict]:
    """({part: pose}, {part: rate}) of a state: "x" particle positions / velocities, "q" the ODE body's pose /
    rate (`physics.ode.ode_coordinates`); works on states with leading axes.

    Args:
      exp: the experiment (which parts there are).
      state: the state, leaves [..., ...] with any leading axes.

    Returns:
      ({part: pose}, {part: rate}): "x" [..., n, 3] m and m/s; "q" in the ODE body's own units (rad, m; per s).
    """
    pose, rate = {}, {}
    for part in state_parts(exp):
        pose[part], rate[part] = START_PARTS[part].pose_rate(exp, state)
    return pose, rate


def with_pose_rate(exp: Experiment, state: State, pose: dict, rate: dict) -> State:
    """`state` (no leading axis) with the parts in pose / rate replaced; pinned particles keep theirs.

    Args:
      exp: the experiment.
      state: the state to modify (no leading axis).
      pose: {part: pose} ("x" [n, 3] m; "q" the ODE body's coordinates).
      rate: {part: rate}, the same parts as pose ("x" [n, 3] m/s; "q" per s).

    Returns:
      the state with those parts replaced.
    """
    for key, part in START_PARTS.items():
        if key in pose:
            state = part.with_pose_rate(exp, state, pose[key], rate[key])
    return state


def push_of(exp: Experiment, theta: dict):
    """theta's known push (the experiment's when theta has none), or None.

    Args:
      exp: the experiment.
      theta: quantities.

    Returns:
      the push in the experiment's dtype, or None.
    """
    push = theta["push"] if "push" in theta else exp.theta.get("push")
    return None if push is None else jnp.asarray(push, exp.dtype)


def _advance(exp: Experiment, params, state: State, frame, push) -> State:
    """The particles and bodies one frame later: `exp.substeps` steps of the experiment's integrator from frame
    index `frame` (absolute, traced), the known push acting during the first `exp.push_frames` frames."""
    dt = exp.frame_dt / exp.substeps
    ctrl = push_control(push, exp.push_frames, frame)
    t0 = frame * exp.frame_dt
    integrator = exp.integrator

    def substep(s, k):
        return integrator.step(exp.topology, params, s, ctrl, t0 + k * dt, dt), None

    return jax.lax.scan(PerFrame().substep(substep), state, jnp.arange(exp.substeps))[0]


def run_from(exp: Experiment, params, state0: State, first, frames: int, push, cuts: tuple = ()) -> State:
    """States [frames + 1, ...] from `state0` at absolute frame `first` (traced); `cuts`: frames (from `first`,
    host ints) where the gradient of the carried state is stopped (truncated backpropagation). One
    `jax.checkpoint` per frame, as `simulate`; a kind that moves by its own rollout (`physics.component.OwnStepKind`:
    an ODE body) is rolled out apart over the same frames (`own_rollout`), one rollout per stretch between cuts.

    Args:
      exp: the experiment (topology, integrator, frame_dt, substeps, push frames).
      params: the assembled parameters.
      state0: the state at frame `first`.
      first: int (may be traced), the absolute frame index of state0 (for the push and the time).
      frames: frames to run (host int).
      push: the known push, or None.
      cuts: frames, counted from `first`, where the carried state's gradient is stopped.

    Returns:
      the states, leaves [frames + 1, ...] (state0 first).
    """
    own = [(kind, kind.branch(state0)) for kind in COMPONENTS
           if isinstance(kind, OwnStepKind) and kind.branch(state0) is not None]
    for kind, _ in own:
        state0 = kind.with_branch(state0, None)
    cut = np.zeros(frames, bool)
    cut[[c for c in cuts if 0 < c < frames]] = True
    cut = jnp.asarray(cut)

    @jax.checkpoint
    def one_frame(state, k):
        if cuts:
            state = jax.tree.map(lambda a: jnp.where(cut[k], jax.lax.stop_gradient(a), a), state)
        state = _advance(exp, params, state, first + k, push)
        return state, state

    _, traj = jax.lax.scan(one_frame, state0, jnp.arange(frames))
    traj = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], axis=0), state0, traj)
    bounds = [0] + sorted(c for c in set(cuts) if 0 < c < frames) + [frames]
    for kind, y0 in own:
        traj = kind.with_branch(traj, own_rollout(exp, params, kind, y0, first, bounds))
    return traj


def own_rollout(exp: Experiment, params, kind: OwnStepKind, y0, first, bounds: list):
    """An own-step kind's branch over a run's frames, rolled out by the kind (`OwnStepKind.rollout`) stretch by
    stretch between `bounds`, its gradient stopped at each stretch's start but the first.

    Args:
      exp: the experiment (topology, frame_dt, substeps, the kinds' options `kind_options`).
      params: the assembled parameters.
      kind: the `physics.component.OwnStepKind`.
      y0: the kind's branch of the state at frame `first`.
      first: int (may be traced), the absolute frame index of y0.
      bounds: host ints, 0, the cuts, then the run's frame count.

    Returns:
      the branch, leaves [bounds[-1] + 1, ...] (y0 first).
    """
    y, pieces = y0, []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if a:
            y = jax.lax.stop_gradient(y)
        options = RolloutOptions(frames=b - a, frame_dt=exp.frame_dt, first=first + a, **exp.kind_options)
        piece = kind.rollout(exp.topology, params, y, options, exp.substeps)
        pieces.append(piece if not a else jax.tree.map(lambda v: v[1:], piece))
        y = jax.tree.map(lambda v: v[-1], piece)
    return jax.tree.map(lambda *v: jnp.concatenate(v, axis=0), *pieces)


def run_windows(exp: Experiment, params, state0: State, poses: dict, rates: dict, windows: Windows, push):
    """Every window run from its own start ({part: [count, ...]} poses and rates, window 0's the initial state's):
    (the compared states, leaves [count * len(windows.offsets()), ...] in window order, and each window's state
    at the next window's first frame, leaves [count - 1, ...]).

    Args:
      exp: the experiment.
      params: the assembled parameters.
      state0: the initial state (the template of every start state).
      poses: {part: [count, ...]} each window's start pose (window 0's the initial state's).
      rates: {part: [count, ...]} each window's start rate.
      windows: the windows.
      push: the known push, or None.

    Returns:
      (compared states, ends) as above.
    """
    count = windows.count
    starts = np.asarray(windows.starts)
    start_states = jax.vmap(lambda p, r: with_pose_rate(exp, state0, p, r))(poses, rates)
    trajs = jax.lax.map(lambda sf: run_from(exp, params, sf[0], sf[1], windows.length, push),
                        (start_states, jnp.asarray(starts)))
    offsets = windows.offsets()
    frames = jax.tree.map(lambda a: a[:, offsets].reshape((count * len(offsets),) + a.shape[2:]), trajs)
    ends = jax.tree.map(lambda a: a[np.arange(count - 1), starts[1:] - starts[:-1]], trajs)
    return frames, ends


def window_states(exp: Experiment, theta: dict, windows: Windows) -> dict:
    """The window start states of one run of theta (`start_names(exp)` entries, at frames `windows.starts[1:]`):
    its joins match exactly; see the module docstring for when it is a poor start.

    Args:
      exp: the experiment.
      theta: quantities (missing ones: the experiment's; entries starting with "_" are ignored).
      windows: the windows.

    Returns:
      {start-state name: [count - 1, ...]}.
    """
    theta = as_theta(exp, {k: v for k, v in theta.items() if not k.startswith("_")})
    traj = compiled(exp, trajectory, "trajectory")(theta)
    idx = np.asarray(windows.starts[1:], np.int64)
    pose, rate = pose_rate(exp, jax.tree.map(lambda a: jnp.asarray(a)[idx], traj))
    return {name: value for part in pose for name, value in zip(PARTS[part], (pose[part], rate[part]))}


def unwrap(value, centre, period):
    """value moved by whole periods to lie within half a period of centre.

    Args:
      value: the coordinates (numpy or traced).
      centre: the coordinates to lie near, broadcastable to value.
      period: the coordinates' period (None: as they are).

    Returns:
      value + a whole number of periods.
    """
    return centre + join_gap(value, centre, period)


def pose_periods(exp: Experiment) -> dict:
    """{part: the period of its pose coordinates, or None}: the ODE body's `OdeSystem.pose_period` (angles), None
    for particles. A join between windows measures an angle's mismatch on the circle (`join_gap`).

    Args:
      exp: the experiment.

    Returns:
      {"x": None[, "q": the period or None]}.
    """
    return {"x": None, **{part: START_PARTS[part].period(exp) for part in state_parts(exp) if part != "x"}}


def join_gap(end, start, period):
    """end - start, the nearest by whole periods when the coordinates are angles of `period` (None, or 0 in an
    array of periods per entry: as it is). A window that starts a whole turn from where the previous one ends
    starts from the same physical state. numpy in, numpy out (its dtype kept); traceable.

    Args:
      end: the coordinates where a window ends.
      start: the next window's start coordinates, the same shape.
      period: None, a number, or an array of periods per entry (0: not periodic).

    Returns:
      the gap, end's shape.
    """
    gap = end - start
    if period is None:
        return gap
    return gap - period * (gap / (period + (period == 0))).round()


def check_windowed(exp: Experiment, windows: Windows, shooting: str) -> None:
    """Refuse a windowed fit the experiment cannot take: an unknown shooting, windows of another recording,
    smoke, multiple shooting of rigid bodies or of an ODE body without coordinates, an overlap for truncated
    backpropagation.

    Args:
      exp: the experiment.
      windows: how the recording is cut.
      shooting: "multiple" or "truncated".
    """
    if shooting not in SHOOTING:
        raise ValueError(f"unknown shooting {shooting!r}; choose from {SHOOTING}")
    if windows.frames != exp.frames:
        raise ValueError(f"the windows cut {windows.frames} frames but the experiment has {exp.frames}")
    refused = refusal(exp)
    if refused is not None:
        raise ValueError(f"windowed fits (window, shooting) are not available for {refused.kind} ({refused.where}): "
                         f"{refused.reason}")
    if shooting == "multiple" and np.shape(exp.state0.rigid.x)[0]:
        raise ValueError("multiple shooting estimates particle and ODE-body start states only; this experiment has "
                         "rigid bodies: use shooting='truncated'")
    if shooting == "multiple":
        for part in state_parts(exp):
            START_PARTS[part].check_multiple(exp)  # an ODE body: ValueError when it names no coordinates
    if shooting == "truncated" and windows.overlap:
        raise ValueError("truncated backpropagation cuts one forward run and takes no overlap (overlap=0)")
