"""Time integration over frames: a `lax.scan` over frames around a `lax.scan` over substeps.

Each frame is wrapped in `jax.checkpoint` by default, so a gradient through T frames stores one state per
frame and recomputes the substeps of one frame at a time during the backward pass (keeping only the state
before each substep, and one substep's residuals at a time): memory grows with the number of frames, not
with frames x substeps. Other policies (none, nested sqrt(T) segments) and their
memory formulas: `gradsim_jax.physics.checkpointing`.

What stays the same over a rollout (rest shapes: `integrator.prepare`) is computed once,
before the time loop. With a topology closed over by a jitted loss this happens on the host while tracing,
so XLA receives finished constants and never constant-folds mesh-sized computations (minutes for a
2000 x 2000 cloth when the rest shapes were computed inside the checkpointed loop). Passing the topology as
an argument of the jitted function keeps mesh-sized constants out of the program altogether.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, Optional, Protocol, Union

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.checkpointing import CheckpointLike, checkpoint_policy
from gradsim_jax.physics.integrators import Integrator, SemiImplicitEuler
from gradsim_jax.physics.particles import ParticleControl
from gradsim_jax.physics.collider_motion import collider_state
from gradsim_jax.physics.colliders import validate_colliders
from gradsim_jax.physics.substeps import chosen_substeps, start_checks
from gradsim_jax.physics.smoke import smoke_rollout, validate_smoke
from gradsim_jax.physics.ode import OdeSolver, is_concrete_tree, ode_trajectory, validate_ode
from gradsim_jax.physics.types import Control, Params, State, Topology
from gradsim_jax.typing import named_leaves, replace_paths
from gradsim_jax.physics.validate import validate_dt, validate_scene



class ControlFunction(Protocol):
    """A per-frame control (a policy): called once at the start of each frame, its control held over the frame's
    substeps. A plain function qualifies."""

    def __call__(self, frame, state: State) -> Optional[Control]:
        """The frame's control.

        Args:
            frame: () int32, the frame's index (traced).
            state: the `State` at the start of the frame.

        Returns:
            The `Control` of the frame (None: no inputs).
        """
        ...


ControlLike = Union[None, Control, ControlFunction]


class SimulationDiverged(FloatingPointError):
    """A rollout produced a non-finite state. Attributes: frame (index of the first bad frame, 0 = the initial
    state), quantity ("x" position m or "v" velocity m/s of a particle; "rigid.x", "rigid.q", "rigid.v",
    "rigid.w" of a body; "smoke.density" of the smoke) and particle (the index of the particle or body; the
    smoke's flat cell index, -1 when unknown)."""

    def __init__(self, frame: int, quantity: str, particle: int):
        self.frame, self.quantity, self.particle = frame, quantity, particle
        what = f"state.{quantity} of body {particle}" if quantity.startswith("rigid.") else (
            f"state.{quantity}" + (f" of cell {particle}" if particle >= 0 else "") if quantity.startswith("smoke.")
            else f"state.{quantity} of particle {particle}")
        super().__init__(
            f"simulation diverged: {what} is not finite at frame {frame} "
            "(try more substeps, a smaller frame_dt, or smaller stiffness)"
        )



def simulate(
    topology: Topology,
    params: Params,
    state0: State,
    *,
    frames: int,
    substeps: Optional[int] = None,
    frame_dt: float = 1.0 / 60.0,
    control: ControlLike = None,
    checkpoint: CheckpointLike = True,
    integrator: Integrator = SemiImplicitEuler(),
    ode_solver: OdeSolver = OdeSolver(),
    smoke_substeps: int = 1,
) -> State:
    """Roll the scene forward and return the state at every frame, the initial one included.

    Args:
      frames: number of frames to simulate (static).
      substeps: semi-implicit Euler steps per frame (static); dt = frame_dt / substeps. None (the default): the
        number the scene's stability bound asks for (`physics.substeps.stable_substeps`: 80 % of the smallest
        stable step of its elastic elements and contacts, at most 1/960 s), said once in a `SubstepsChosen`
        warning; the scene must then be concrete (outside jit and grad: inside them, pass substeps).
      frame_dt: seconds per frame (a float; may be traced).
      control: None, a `Control` applied at every step, or `control(frame_index, state) -> Control`
        called once at the start of each frame (a policy; the control is held over the frame's substeps).
      checkpoint: what the gradient stores (static): True or "frame" (default) checkpoints each frame and
        each substep inside it, memory T S + s S + R; False or "none" stores every substep's residuals,
        T s R; "substep" keeps the state before every substep, T s S + R (the fastest gradient where it
        fits); "sqrt" checkpoints segments of ceil(sqrt(T)) frames and the frames inside them, about
        2 sqrt(T) S + s S + R (T frames, s substeps, S bytes of a State, R bytes of one substep's residuals);
        or a policy object (`gradsim_jax.physics.checkpointing`, e.g. `PerFrame(remat_substeps=False)`).
      integrator: the time integrator (static; `SemiImplicitEuler()`), see `gradsim_jax.physics.integrators`.
      ode_solver: how an ODE body is solved (static; `physics.ode.OdeSolver`): by default Tsit5 at fixed steps
        of frame_dt / substeps.
      smoke_substeps: solver steps of the smoke a frame (static; `physics.smoke.smoke_rollout`), when the
        scene has smoke (State.smoke).

    Returns:
      `State` whose leaves have a leading axis of length frames + 1: particles.x [frames + 1, n, 3], ...

    Warns (`ContactWarning`, concrete inputs only) when the initial state starts deep in ground contact or the
    contact is too stiff for the step (`contact_report`), likewise inside or against a collider
    (`physics.colliders.collider_message`) and for rigid bodies
    (`rigid_contact_message`); warns (`StepWarning`) when the step is too long for the stiffness and damping
    of the tets, springs and cloth (`step_report`).

    Raises ValueError or TypeError naming the field (and, for a concrete bad value, its index) for leaves of
    the wrong shape or dtype, out-of-range indices, and non-finite or negative values (`validate_scene`);
    lists and integer leaves are converted first (`as_arrays`).
    """
    if not isinstance(frames, (int, np.integer)) or frames < 1:
        raise ValueError(f"frames must be a positive int, got {frames!r}")
    if substeps is not None and (not isinstance(substeps, (int, np.integer)) or substeps < 1):
        raise ValueError(f"substeps must be a positive int or None, got {substeps!r}")
    validate_dt(frame_dt, "frame_dt")
    if not isinstance(integrator, Integrator):
        raise TypeError(f"integrator must be a physics.integrators.Integrator, got {type(integrator).__name__}")
    policy = checkpoint_policy(checkpoint)
    topology, params = as_arrays(topology, params)
    state0 = as_float_state(state0, params)
    y0, smoke0 = state0.ode, state0.smoke
    state0 = dataclasses.replace(state0, ode=None, smoke=None)  # integrated apart, below
    # Kinematic colliders carry their pose in the state (the video draws them there); static ones none.
    state0 = dataclasses.replace(state0, colliders=collider_state(params.colliders, 0.0))
    if y0 is not None and topology.ode is None:
        raise ValueError("the state has an ODE body (State.ode) but Topology.ode is None")
    if smoke0 is not None:
        if topology.smoke is None or params.smoke is None:
            raise ValueError("the state has smoke (State.smoke) but Topology.smoke or Params.smoke is None")
        if not isinstance(smoke_substeps, (int, np.integer)) or smoke_substeps < 1:
            raise ValueError(f"smoke_substeps must be a positive int, got {smoke_substeps!r}")
        validate_smoke(topology.smoke, params.smoke, smoke0)
    if y0 is not None and is_concrete_tree(params.ode, y0, params.world):
        validate_ode(topology.ode, params.ode, y0, params.world)
    validate_scene(topology, params, state0)
    if topology.colliders is not None:
        if params.colliders is None:
            raise ValueError("the scene has colliders (Topology.colliders) but Params.colliders is None")
        validate_colliders(topology.colliders, params.colliders)
    if substeps is None:
        substeps = chosen_substeps(topology, params, state0, frame_dt, integrator)
    dt = frame_dt / substeps
    for category, message in start_checks(topology, params, state0, dt, integrator):
        warnings.warn(message, category, stacklevel=2)

    # Rest shapes: once, outside the time loop (their gradient accumulates over it).
    prepared = integrator.prepare(topology, params)

    def one_frame(state, frame_index):
        ctrl = control if control is None or isinstance(control, Control) else control(frame_index, state)
        t0 = frame_index * frame_dt

        def substep(s, k):
            return integrator.step(topology, params, s, ctrl, t0 + k * dt, dt, prepared=prepared), None

        state, _ = jax.lax.scan(policy.substep(substep), state, jnp.arange(substeps))
        return state, state

    _, traj = policy.run(one_frame, state0, frames)
    traj = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], axis=0), state0, traj)
    if y0 is not None:
        motion = ode_trajectory(topology.ode, params.ode, params.world, y0, frames, frame_dt, substeps, ode_solver)
        traj = dataclasses.replace(traj, ode=motion)
    if smoke0 is not None:
        traj = dataclasses.replace(traj, smoke=smoke_rollout(topology.smoke, params.smoke, smoke0, frames=frames,
                                                             substeps=smoke_substeps, frame_dt=frame_dt))
    return traj


def push_control(force, frames: int, frame) -> Optional[Control]:
    """The control of frame index `frame` (traced) under a known push: `force` [n, 3] N on every particle during
    the first `frames` frames, zero after; None when there is no push (`force` None or `frames` 0)."""
    if force is None or frames == 0:
        return None
    return Control(particles=ParticleControl(force=jnp.where(frame < frames, force, jnp.zeros_like(force))))


def leading_push(force, frames: int) -> Callable:
    """`control(frame, state)` for `simulate`: `push_control` of each frame (a known push during the first
    `frames` frames, as the system-identification scenes apply it)."""

    def control(frame, state):
        return push_control(force, frames, frame)

    return control


def _real(name: str, value):
    """`value` as an array of real numbers (bool, int or float); TypeError naming `name` otherwise."""
    try:
        value = jnp.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of real numbers, got {type(value).__name__}") from None
    if jnp.issubdtype(value.dtype, jnp.complexfloating) or not (
            jnp.issubdtype(value.dtype, jnp.number) or value.dtype == jnp.bool_):
        raise TypeError(f"{name} has dtype {value.dtype}: it must hold real numbers")
    return value


def _float_dtype(tree):
    """The promoted float dtype of the float leaves of `tree` (JAX's default float when none)."""
    floats = [jnp.result_type(leaf) for leaf in jax.tree.leaves(tree)]
    floats = [d for d in floats if jnp.issubdtype(d, jnp.floating)]
    return jnp.result_type(*floats) if floats else jnp.zeros(()).dtype


def as_arrays(topology: Topology, params: Params) -> tuple[Topology, Params]:
    """`topology` and `params` with every leaf an array (lists and Python scalars converted, not flattened
    into pytrees) and integer or boolean Params in their float dtype; TypeError naming the field for complex
    or non-numeric values. Traceable (dtypes and shapes are static)."""
    params, user = _split_user_branch(params)
    leaves = {name: _real(f"Params.{name}", value) for name, value in named_leaves(params, "")}
    index = {name: _real(f"Topology.{name}", value) for name, value in named_leaves(topology, "")}
    dtype = _float_dtype(leaves)
    leaves = {k: v if jnp.issubdtype(v.dtype, jnp.floating) else v.astype(dtype) for k, v in leaves.items()}
    index["particles.pinned"] = index["particles.pinned"].astype(bool)
    params = replace_paths(params, leaves)
    if user is not None:
        params = dataclasses.replace(params, ode=jax.tree.map(lambda v: _as_float(v, dtype, "Params.ode"), user))
    return replace_paths(topology, index), params


def _split_user_branch(tree):
    """(tree without its ode branch, that branch) when the branch is a user's plain pytree (a dict, list or
    tuple, which dotted paths cannot name); (tree, None) otherwise."""
    branch = tree.ode
    if isinstance(branch, (dict, list, tuple)):
        return dataclasses.replace(tree, ode=None), branch
    return tree, None


def _as_float(value, dtype, name):
    """value as an array of a float dtype: integers and booleans take dtype, floats are promoted with it."""
    value = _real(name, value)
    kind = value.dtype
    if jnp.issubdtype(kind, jnp.integer) or kind == jnp.bool_:
        return jnp.asarray(value, dtype)
    if jnp.issubdtype(kind, jnp.floating):
        return jnp.asarray(value, jnp.promote_types(kind, dtype))
    raise TypeError(f"{name} has dtype {kind}: positions and velocities must be real numbers")


def as_float_state(state: State, params: Params) -> State:
    """`state` with every leaf in the float dtype a step produces from it and `params`.

    Integer (or bool) positions and velocities take the float dtype of `params` (a scan carry must keep
    its dtype, and a step turns them into floats); floats are promoted with it (float32 state, float64
    params: float64). Raises TypeError, naming the field, for complex or non-numeric values. Traceable.
    """
    dtype = _float_dtype(params)
    state, user = _split_user_branch(state)
    out = {name[len("State."):]: _as_float(value, dtype, name) for name, value in named_leaves(state, "State")}
    state = replace_paths(state, out)
    if user is not None:
        state = dataclasses.replace(state, ode=jax.tree.map(lambda v: _as_float(v, dtype, "State.ode"), user))
    return state


def first_nonfinite(trajectory: State):
    """Locate the first non-finite value of a trajectory (leading axis = frames).

    Returns None if every value is finite, else a dict {frame, quantity, particle}: quantity "x" or "v" of
    a particle, or "rigid.x", "rigid.q", "rigid.v", "rigid.w" of a body (its index in "particle"). Runs
    on the host.
    """
    parts = {q: np.asarray(getattr(trajectory.particles, q)) for q in ("x", "v")}
    parts.update({f"rigid.{q}": np.asarray(getattr(trajectory.rigid, q)) for q in ("x", "q", "v", "w")})
    bad = {q: ~np.isfinite(a).all(axis=-1) for q, a in parts.items()}  # [T, count]
    bad_frame = np.zeros(next(iter(bad.values())).shape[0], bool)
    for mask in bad.values():
        bad_frame |= mask.any(axis=-1)
    if not bad_frame.any():
        return None
    frame = int(np.argmax(bad_frame))
    quantity = next(q for q, mask in bad.items() if mask[frame].any())
    return {"frame": frame, "quantity": quantity, "particle": int(np.argmax(bad[quantity][frame]))}


def check_finite(trajectory: State) -> State:
    """Raise `SimulationDiverged` naming the first frame with a non-finite state of `trajectory` (a State whose
    leaves have a leading frame axis: x [T, n, 3] m, ...); else return it unchanged. Runs on the host."""
    found = first_nonfinite(trajectory)
    if found is not None:
        raise SimulationDiverged(**found)
    return trajectory
