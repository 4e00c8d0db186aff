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

`simulate` knows no body kind by name: it loops over the registered kinds (`physics.components.COMPONENTS`,
the interface `physics.component.BodyKind`) for their initial state, checks and start checks, lets the
integrator step what it steps, and puts in the motion of the kinds that move by their own steps (the ODE
body, the smoke, a user's `ExtraBodyKind`). The strategies are declared bases: `Integrator`,
`CheckpointPolicy`, and a per-frame control is a `ControlFunction`.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, Optional, Protocol, Union

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import accurate_products, current_backend
from gradsim_jax.physics.checkpointing import CheckpointLike, CheckpointPolicy, checkpoint_policy
from gradsim_jax.physics.component import OwnStepKind, RolloutOptions
from gradsim_jax.physics.components import COMPONENTS, integrated, present_kinds
from gradsim_jax.physics.integrators import Integrator, SemiImplicitEuler
from gradsim_jax.physics.particles import ParticleControl
from gradsim_jax.physics.substeps import chosen_substeps
from gradsim_jax.physics.ode import OdeSolver
from gradsim_jax.physics.types import Control, Params, State, Topology
from gradsim_jax.typing import named_leaves, replace_paths
from gradsim_jax.physics.validate import validate_dt



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
    unroll: Optional[int] = None,
) -> State:
    """Roll the scene forward and return the state at every frame, the initial one included.

    The stages: `checked_scene` (convert, set and check every body kind of `physics.components.COMPONENTS`),
    `integrated` (what the integrator steps), the substeps and the start checks, `integrate` (frames of
    substeps) and `with_own_rollouts` (the ODE body, the smoke and other kinds that move by their own steps).

    Args:
      topology: the scene's `Topology` (structure).
      params: the scene's `Params` (what a fit differentiates).
      state0: the initial `State`.
      frames: number of frames to simulate (static).
      substeps: semi-implicit Euler steps per frame (static); dt = frame_dt / substeps. None (the default): the
        number the scene's stability bound asks for (`physics.substeps.stable_substeps`: 80 % of the smallest
        stable step of its elastic elements and contacts, at most 1/960 s), said once in a `SubstepsChosen`
        warning; the scene must then be concrete (outside jit and grad: inside them, pass substeps).
      frame_dt: seconds per frame (a float; may be traced).
      control: None, a `Control` applied at every step, or `control(frame_index, state) -> Control`
        called once at the start of each frame (a `ControlFunction`, a policy; the control is held over the
        frame's substeps).
      checkpoint: what the gradient stores (static): True or "frame" (default) checkpoints each frame and
        each substep inside it, memory T S + s S + R; False or "none" stores every substep's residuals,
        T s R; "substep" keeps the state before every substep, T s S + R (the fastest gradient where it
        fits); "sqrt" checkpoints segments of ceil(sqrt(T)) frames and the frames inside them, about
        2 sqrt(T) S + s S + R (T frames, s substeps, S bytes of a State, R bytes of one substep's residuals);
        or a policy object (`gradsim_jax.physics.checkpointing`, e.g. `PerFrame(remat_substeps=False)`).
      integrator: the time integrator (static; an `Integrator`, by default `SemiImplicitEuler()`), see
        `gradsim_jax.physics.integrators`.
      ode_solver: how an ODE body is solved (static; `physics.ode.OdeSolver`): by default Tsit5 at fixed steps
        of frame_dt / substeps.
      smoke_substeps: solver steps of the smoke a frame (static; `physics.smoke.smoke_rollout`), when the
        scene has smoke (State.smoke).
      unroll: substeps fused into one iteration of the substep scan (static; `lax.scan`'s unroll: fewer
        iterations, each with more work for the compiler to fuse, at a longer compile); None: `default_unroll()`
        for the backend. Results are the same whatever it is.

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
    with accurate_products():
        _check_arguments(frames, substeps, frame_dt, integrator, unroll)
        policy = checkpoint_policy(checkpoint)
        options = RolloutOptions(frames=frames, frame_dt=frame_dt, ode_solver=ode_solver, smoke_substeps=smoke_substeps)
        scene = checked_scene(topology, params, state0, options)
        kinds = present_kinds(*scene)
        loop = integrated(*scene)  # own-step kinds (ODE, smoke, ...) roll apart, below
        if substeps is None:
            substeps = chosen_substeps(*loop, frame_dt, integrator)
        for category, message in kinds_start_checks(kinds, *loop, frame_dt / substeps, integrator):
            warnings.warn(message, category, stacklevel=2)
        traj = integrate(*loop, frames=frames, substeps=substeps, frame_dt=frame_dt, control=control,
                         integrator=integrator, policy=policy, unroll=unroll)
        return with_own_rollouts(kinds, *scene, traj, options, substeps)


#: `simulate`'s substeps per iteration of the substep scan, by backend (`default_unroll`); others: 1. On a
#: CPU fusing substeps gains nothing measurable (benchmarks/bench_stencil.py --unroll).
DEFAULT_UNROLL = {"cpu": 1}


def default_unroll(backend: Optional[str] = None) -> int:
    """The substeps `simulate` fuses into one iteration of its substep scan when given no `unroll`.

    Args:
        backend: a JAX backend name ("cpu", "tpu", "gpu"); None: the current one (`compilation.current_backend`).

    Returns:
        `DEFAULT_UNROLL` of the backend, 1 when it has none.
    """
    return DEFAULT_UNROLL.get(current_backend() if backend is None else backend, 1)


def _check_arguments(frames, substeps, frame_dt, integrator, unroll=None) -> None:
    """ValueError or TypeError for a bad frame count, substep count, frame length, integrator or unroll."""
    if not isinstance(frames, (int, np.integer)) or frames < 1:
        raise ValueError(f"frames must be a positive int, got {frames!r}")
    if substeps is not None and (not isinstance(substeps, (int, np.integer)) or substeps < 1):
        raise ValueError(f"substeps must be a positive int or None, got {substeps!r}")
    validate_dt(frame_dt, "frame_dt")
    if unroll is not None and (not isinstance(unroll, (int, np.integer)) or isinstance(unroll, bool) or unroll < 1):
        raise ValueError(f"unroll must be a positive int or None, got {unroll!r}")
    if not isinstance(integrator, Integrator):
        raise TypeError(f"integrator must be a physics.integrators.Integrator, got {type(integrator).__name__}")


def checked_scene(topology: Topology, params: Params, state0: State, options: RolloutOptions):
    """The scene as `simulate` runs it: leaves converted to arrays (`as_arrays`, `as_float_state`), every
    registered kind's `initial` applied (the keyframed colliders' pose at time 0), then every present kind's
    `check` in registry order (`physics.components.COMPONENTS`); ValueError for a `State.bodies` entry that no
    registered kind owns.

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state0: the initial `State`.
        options: the rollout's `RolloutOptions`.

    Returns:
        (topology, params, state0), converted and checked.
    """
    topology, params = as_arrays(topology, params)
    state0 = as_float_state(state0, params)
    unknown = sorted(set(state0.bodies or {}) - {kind.name for kind in COMPONENTS})
    if unknown:
        raise ValueError(f"State.bodies has {unknown}, but no body kind of that name is registered "
                         "(physics.components.register_component)")
    for kind in COMPONENTS:
        state0 = kind.initial(topology, params, state0)
    for kind in present_kinds(topology, params, state0):
        kind.check(topology, params, state0, options)
    return topology, params, state0


def kinds_start_checks(kinds, topology: Topology, params: Params, state0: State, dt, integrator) -> list:
    """What `simulate` warns about before the rollout: every kind's `start_checks`, in order.

    Args:
        kinds: the scene's present `BodyKind`s.
        topology: the `Topology` the integrator steps.
        params: the `Params` the integrator steps.
        state0: the `State` the integrator starts from.
        dt: s, the integrator's step.
        integrator: the `Integrator`.

    Returns:
        (warning category, message) pairs with a message.
    """
    found = [pair for kind in kinds for pair in kind.start_checks(topology, params, state0, dt, integrator)]
    return [(category, message) for category, message in found if message]


def integrate(topology: Topology, params: Params, state0: State, *, frames: int, substeps: int, frame_dt,
              control: ControlLike, integrator: Integrator, policy: CheckpointPolicy,
              unroll: Optional[int] = None) -> State:
    """What the integrator steps, over the frames: a scan over frames (`policy.run`) of scans over substeps.

    What stays the same over the rollout (`integrator.prepare`: rest shapes) is computed once, before the loop
    (its gradient accumulates over it).

    Args:
        topology: the `Topology` the integrator steps (own-step kinds apart).
        params: the `Params` it steps.
        state0: the `State` it starts from.
        frames: number of frames (static).
        substeps: integrator steps a frame (static).
        frame_dt: s, a frame's length.
        control: None, a `Control`, or a `ControlFunction` called at the start of each frame.
        integrator: the `Integrator`.
        policy: the `CheckpointPolicy`.
        unroll: substeps per iteration of the substep scan (static); None: `default_unroll()`.

    Returns:
        The `State` at every frame (leaves [frames + 1, ...], the first state0).
    """
    unroll = default_unroll() if unroll is None else unroll
    prepared = integrator.prepare(topology, params)
    dt = frame_dt / substeps

    def one_frame(state, frame_index):
        ctrl = control if control is None or isinstance(control, Control) else control(frame_index, state)
        t0 = frame_index * frame_dt

        def substep(s, k):
            return integrator.step(topology, params, s, ctrl, t0 + k * dt, dt, prepared=prepared), None

        state, _ = jax.lax.scan(policy.substep(substep), state, jnp.arange(substeps), unroll=min(unroll, substeps))
        return state, state

    _, traj = policy.run(one_frame, state0, frames)
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], axis=0), state0, traj)


def with_own_rollouts(kinds, topology: Topology, params: Params, state0: State, traj: State,
                      options: RolloutOptions, substeps: int) -> State:
    """`traj` with the trajectory of every present own-step kind (ODE body, smoke, ...) put in its branch.

    Args:
        kinds: the scene's present `BodyKind`s, in registry order.
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state0: the scene's initial `State` (every branch).
        traj: the integrator's trajectory (leaves [frames + 1, ...]).
        options: the rollout's `RolloutOptions`.
        substeps: the integrator's steps a frame.

    Returns:
        The `State` at every frame.
    """
    for kind in kinds:
        if isinstance(kind, OwnStepKind):
            motion = kind.rollout(topology, params, kind.branch(state0), options, substeps)
            traj = kind.with_branch(traj, motion)
    return traj


def push_control(force, frames: int, frame) -> Optional[Control]:
    """The control of a frame under a known push: `force` on every particle during the first `frames` frames,
    zero after.

    Args:
        force: [n, 3] N, the push on each particle (None: no push).
        frames: how many frames it lasts (0: no push).
        frame: () int, the frame's index (traced).

    Returns:
        The `Control`; None when there is no push.
    """
    if force is None or frames == 0:
        return None
    return Control(particles=ParticleControl(force=jnp.where(frame < frames, force, jnp.zeros_like(force))))


def path_velocities(times, offsets, frames: int, frame_dt: float, pinned, dtype):
    """The pinned particles' velocity during each frame [frames, n, 3] m/s along a keyframed path of offsets (all
    alike; linear between keys, at rest outside them): the offset's change over the frame divided by its length,
    so that the substeps carry them exactly to the path's next frame; zero for the free particles.

    Args:
        times: [K] s, the key times, increasing.
        offsets: [K, 3] m, the pinned particles' offset from where they start at each key.
        frames: how many frames are simulated.
        frame_dt: s, the length of a frame.
        pinned: [n] bool, the pinned particles (may be traced).
        dtype: the float dtype of the result.

    Returns:
        [frames, n, 3] velocities.
    """
    times, offsets = np.asarray(times, np.float64), np.asarray(offsets, np.float64).reshape(-1, 3)
    t = np.arange(frames + 1) * frame_dt
    path = np.stack([np.interp(t, times, offsets[:, k]) for k in range(3)], axis=-1)  # [frames + 1, 3]
    velocity = jnp.asarray(np.diff(path, axis=0) / frame_dt, dtype)  # [frames, 3]
    return jnp.where(jnp.asarray(pinned)[None, :, None], velocity[:, None, :], jnp.zeros((), dtype))


def leading_push(force, frames: int, pinned_velocity=None) -> Callable:
    """`control(frame, state)` for `simulate`: `push_control` of each frame (a known push during the first
    `frames` frames, as the system-identification scenes apply it), and the pinned particles' velocities of each
    frame when they move (a kinematic pin: a hand, a hook).

    Args:
        force: [n, 3] N, the push on each particle (None: no push).
        frames: how many frames it lasts.
        pinned_velocity: [F, n, 3] m/s, the velocity of each pinned particle during each frame (held over its
            substeps; frames past F hold the last), or None: the pinned particles stay where they are.

    Returns:
        A `ControlFunction`.
    """

    def control(frame, state):
        pushed = push_control(force, frames, frame)
        if pinned_velocity is None:
            return pushed
        v = jnp.asarray(pinned_velocity)[jnp.minimum(frame, jnp.shape(pinned_velocity)[0] - 1)]
        push = None if pushed is None else pushed.particles.force
        return Control(particles=ParticleControl(force=push, pinned_velocity=v))

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
    or non-numeric values. Traceable (dtypes and shapes are static).

    Args:
        topology: the scene's `Topology` (its `bodies` branch is left as it is: each such kind's own).
        params: the scene's `Params` (a user's ODE branch and the `bodies` branch take the float dtype of the
            others leaf by leaf).

    Returns:
        (topology, params), converted.
    """
    params, user = _split_user_branch(params)
    params, bodies = _split_bodies(params)
    topology, topology_bodies = _split_bodies(topology)
    leaves = {name: _real(f"Params.{name}", value) for name, value in named_leaves(params, "")}
    index = {name: _real(f"Topology.{name}", value) for name, value in named_leaves(topology, "")}
    dtype = _float_dtype(leaves)
    leaves = {k: v if jnp.issubdtype(v.dtype, jnp.floating) else v.astype(dtype) for k, v in leaves.items()}
    index["particles.pinned"] = index["particles.pinned"].astype(bool)
    params = replace_paths(params, leaves)
    if user is not None:
        params = dataclasses.replace(params, ode=jax.tree.map(lambda v: _as_float(v, dtype, "Params.ode"), user))
    if bodies is not None:
        params = dataclasses.replace(params, bodies=jax.tree.map(lambda v: _as_float(v, dtype, "Params.bodies"),
                                                                 bodies))
    return dataclasses.replace(replace_paths(topology, index), bodies=topology_bodies), params


def _split_bodies(tree):
    """(tree without its bodies branch, that branch): dotted paths cannot name a dict's leaves."""
    return dataclasses.replace(tree, bodies=None), tree.bodies


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

    Args:
        state: the initial `State`.
        params: the scene's `Params` (their float dtype).

    Returns:
        The `State`, converted.
    """
    dtype = _float_dtype(params)
    state, user = _split_user_branch(state)
    state, bodies = _split_bodies(state)
    out = {name[len("State."):]: _as_float(value, dtype, name) for name, value in named_leaves(state, "State")}
    state = replace_paths(state, out)
    if user is not None:
        state = dataclasses.replace(state, ode=jax.tree.map(lambda v: _as_float(v, dtype, "State.ode"), user))
    if bodies is not None:
        state = dataclasses.replace(state, bodies=jax.tree.map(lambda v: _as_float(v, dtype, "State.bodies"),
                                                               bodies))
    return state


def first_nonfinite(trajectory: State):
    """Locate the first non-finite value of a trajectory. Runs on the host.

    Args:
        trajectory: a `State` whose leaves have a leading frame axis (x [T, n, 3] m, ...).

    Returns:
        None if every value is finite, else a dict {frame, quantity, particle}: quantity "x" or "v" of
        a particle, or "rigid.x", "rigid.q", "rigid.v", "rigid.w" of a body (its index in "particle").
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
    """Raise `SimulationDiverged` naming the first frame with a non-finite state; else return it unchanged. Runs on
    the host.

    Args:
        trajectory: a `State` whose leaves have a leading frame axis (x [T, n, 3] m, ...).

    Returns:
        `trajectory`.
    """
    found = first_nonfinite(trajectory)
    if found is not None:
        raise SimulationDiverged(**found)
    return trajectory
