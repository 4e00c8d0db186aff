"""ODE systems as bodies: a component whose motion is an ODE in its own coordinates, y' = f(t, y, params),
rendered through a map from y to vertices, integrated with Diffrax.

An ODE body is three things, as everywhere in the package: its structure (`OdeTopology`: the `OdeSystem`,
static, and the faces its vertices make), its parameters (`Params.ode`, any pytree the system reads) and its
state (`State.ode`, the pytree y). `simulate` integrates it apart from the particles and rigid bodies (it
does not touch them), over the frame times, and `render.mesh` appends its vertices after theirs.

A system says four things (`OdeSystem`): its vector field `field(t, y, params, world)` (world: the scene's
`World`, gravity and ground plane, so that a fitted gravity reaches it), its render vertices `vertices(params, y)`,
their faces (host side, at build time) and its checks of concrete values (`validate`). Its motion is
`trajectory(...)`, which by default solves the field with `solve_ode`; a system whose motion has events
(the bouncing ball's impacts, `physics.ball`) overrides it. Built in: `physics.pendulum.PendulumSystem`
(chains of point masses, the simple and the double pendulum) and `physics.ball.BallSystem`; a user's own
is a `FunctionOde` of their two functions.

`OdeSolver` (static) says how: Tsit5 (5th order) at fixed steps of frame_dt / substeps by default,
differentiated through the solver's own steps (Diffrax's `DirectAdjoint`: the exact derivative of the
computed trajectory, in reverse and in forward mode, which the Levenberg-Marquardt polish needs);
`adaptive=True` lets a PID controller choose the steps; `adjoint="recursive"` is the same derivative in
reverse mode with recursive checkpointing (memory ~ log of the steps); `adjoint="backsolve"` solves the
continuous adjoint ODE backwards, which is only as accurate as that solve (gradSim's authors report the
adjoint failing on the double pendulum; `benchmarks/bench_pendulum_adjoints.py` measures all three against
float64 finite differences, docs/concepts/ode-bodies.md reports it).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.typing import pytree_dataclass

Array = Any


@dataclasses.dataclass(frozen=True)
class OdeSolver:
    """How an ODE body is solved (static: hashable, part of a compiled program's key).

    solver: "tsit5" (5th order), "dopri8" (8th order) or "euler"; adaptive: False steps at frame_dt /
    substeps, True lets a PID controller choose steps to `rtol` / `atol` (starting at frame_dt / substeps);
    adjoint: "direct" (differentiate the solver's own steps, in reverse and in forward mode; memory grows with
    the steps), "recursive" (the same derivative, reverse mode only, with recursive checkpointing) or
    "backsolve" (the continuous adjoint ODE solved backwards); max_steps: the step budget of an adaptive
    solve."""

    solver: str = "tsit5"
    adaptive: bool = False
    rtol: float = 1e-8
    atol: float = 1e-8
    adjoint: str = "direct"
    max_steps: int = 100_000

    def __post_init__(self):
        if self.solver not in ("tsit5", "dopri8", "euler"):
            raise ValueError(f"OdeSolver solver must be tsit5, dopri8 or euler, got {self.solver!r}")
        if self.adjoint not in ("direct", "recursive", "backsolve"):
            raise ValueError(f"OdeSolver adjoint must be direct, recursive or backsolve, got {self.adjoint!r}")


def solve_ode(field: Callable, y0, ts: Array, dt0, solver: OdeSolver = OdeSolver(), steps: int | None = None,
              args=None):
    """y at the times ts, solved with Diffrax.

    Args:
        field: field(t, y, args) -> y' (a pytree like y; what it is differentiated with respect to must come in
            `args`, not from a closure: the backsolve adjoint differentiates only those).
        y0: the state at ts[0] (a pytree).
        ts: [T] s, the output times.
        dt0: s, the fixed step (the first step of an adaptive solve).
        solver: the `OdeSolver`.
        steps: the number of fixed steps the solve takes (a static budget; None: `solver.max_steps`).
        args: the field's arguments.

    Returns:
        y at ts, every leaf with a leading time axis [T, ...] (ts[0]: y0).
    """
    import diffrax

    method = {"tsit5": diffrax.Tsit5, "dopri8": diffrax.Dopri8, "euler": diffrax.Euler}[solver.solver]()
    controller = (diffrax.PIDController(rtol=solver.rtol, atol=solver.atol) if solver.adaptive
                  else diffrax.ConstantStepSize())
    adjoint = {"direct": diffrax.DirectAdjoint, "recursive": diffrax.RecursiveCheckpointAdjoint}.get(solver.adjoint)
    adjoint = (adjoint() if adjoint is not None
               else diffrax.BacksolveAdjoint(solver=method, stepsize_controller=controller))
    budget = solver.max_steps if solver.adaptive or steps is None else int(steps) + 16
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field), method, t0=ts[0], t1=ts[-1], dt0=dt0, y0=y0, args=args,
        saveat=diffrax.SaveAt(ts=ts), stepsize_controller=controller, adjoint=adjoint, max_steps=budget)
    return sol.ys


class OdeSystem(abc.ABC):
    """An ODE body's kind (subclass it as a frozen dataclass: hashable, static). Subclasses must give `field`,
    `vertices` and `faces`; they may override `validate`, `energy`, `conservative` and `trajectory` (which
    solves the field) and set the class attributes `coordinates`, `pose_period` and `energy_unit`."""

    @abc.abstractmethod
    def field(self, t, y, params, world):
        """The vector field y' = f(t, y).

        Args:
            t: () s, the time.
            y: the state (a pytree).
            params: the system's parameters (`Params.ode`).
            world: the scene's `World` (gravity [3] m/s^2, ground plane).

        Returns:
            y', a pytree like y (per second).
        """

    @abc.abstractmethod
    def vertices(self, params, y) -> Array:
        """Render vertices at state y.

        Args:
            params: the system's parameters.
            y: the state.

        Returns:
            [v, 3] m, the vertices.
        """

    @abc.abstractmethod
    def faces(self, params, y) -> np.ndarray:
        """Faces over `vertices` (host side, called once at build time).

        Args:
            params: the system's parameters.
            y: the initial state.

        Returns:
            [F, 3] int32 vertex indices.
        """

    #: The names of the state's pose and of its time derivative, when y is a pose and its rate (the pendulum's
    #: ("theta", "omega"), the ball's ("x", "v")); None when the system does not say. A windowed fit's
    #: multiple shooting needs it: it estimates each window's pose from the video and its rate from the
    #: neighbouring frames (`sysid.windows.starts`).
    coordinates: tuple | None = None

    #: The period of every pose coordinate when they are angles (a pendulum's 2 pi: a pose and the same pose
    #: plus a whole turn look and move alike); None when they are not. Multiple shooting then searches each
    #: window's start pose over a whole turn before fitting it (`sysid.windows.starts`), so that a start lost
    #: in a chaotic motion is found again, and unwraps the fitted poses onto one branch.
    pose_period: float | None = None

    #: The unit of `energy` (a pendulum's J; a ball's J/kg: its energy per unit mass).
    energy_unit: str = "J"

    def validate(self, params, y, world) -> None:
        """ValueError naming the field of a bad concrete value (host side); the default checks nothing.

        Args:
            params: the system's parameters.
            y: the state.
            world: the scene's `World`.
        """

    #: The energy of each body, a method `energy(params, world, y) -> [b]` (in `energy_unit`) that a system
    #: which knows it defines (the pendulum's, the ball's); None (the default) when it does not say.
    energy: Callable | None = None

    def conservative(self, params):
        """`params` with every dissipation switched off (joint damping, lost restitution, friction), so that
        its energy is a constant of the motion and any change of it is the solver's; None (the default) when
        the system does not know its dissipation.

        Args:
            params: the system's parameters.

        Returns:
            The conservative twin's parameters, or None.
        """
        return None

    def trajectory(self, params, world, y0, ts: Array, dt0, solver: OdeSolver, steps: int):
        """y at the times ts (the default solves `field` with `solve_ode`).

        Args:
            params: the system's parameters.
            world: the scene's `World`.
            y0: the state at ts[0].
            ts: [T] s, the output times.
            dt0: s, the fixed step (the first step of an adaptive solve).
            solver: the `OdeSolver`.
            steps: the number of fixed steps (a static budget).

        Returns:
            y with a leading time axis [T, ...] on every leaf.
        """
        return solve_ode(lambda t, y, a: self.field(t, y, *a), y0, ts, dt0, solver, steps, args=(params, world))


@dataclasses.dataclass(frozen=True, eq=False)
class FunctionOde(OdeSystem):
    """A user's ODE body from plain functions: field_fn(t, y, params, world) -> y' (world.gravity [3] m/s^2),
    vertices_fn(params, y) -> [v, 3] m, and the faces [F, 3] over those vertices (a mesh that moves with y);
    coordinates: (pose, rate), the keys (y a dict) or attributes of y holding a pose and its time derivative
    (optional: multiple shooting needs them); pose_period: the period of the pose's coordinates when they are
    angles (e.g. 2 pi; `OdeSystem.pose_period`). Equal only to itself."""

    field_fn: Callable
    vertices_fn: Callable
    face_array: Any
    validate_fn: Callable | None = None
    coordinates: tuple | None = None
    pose_period: float | None = None

    def field(self, t, y, params, world):
        """`field_fn(t, y, params, world)`.

        Args:
            t: () s, the time.
            y: the state.
            params: the system's parameters.
            world: the scene's `World`.

        Returns:
            y', a pytree like y.
        """
        return self.field_fn(t, y, params, world)

    def vertices(self, params, y):
        """`vertices_fn(params, y)`.

        Args:
            params: the system's parameters.
            y: the state.

        Returns:
            [v, 3] m, the render vertices.
        """
        return self.vertices_fn(params, y)

    def faces(self, params, y):
        """The given faces.

        Args:
            params: the system's parameters (unused).
            y: the initial state (unused).

        Returns:
            [F, 3] int32.
        """
        return np.asarray(self.face_array, np.int32).reshape(-1, 3)

    def validate(self, params, y, world):
        """`validate_fn(params, y, world)` when given.

        Args:
            params: the system's parameters.
            y: the state.
            world: the scene's `World`.
        """
        if self.validate_fn is not None:
            self.validate_fn(params, y, world)


@pytree_dataclass(meta=("system",))
class OdeTopology:
    """An ODE body's structure: `system` (static, an `OdeSystem`) and faces [F, 3] int32 over its vertices."""

    system: Any
    faces: Array


def is_concrete_tree(*trees) -> bool:
    """Whether every leaf of the trees is a concrete value (not traced).

    Args:
        *trees: pytrees.

    Returns:
        A Python bool.
    """
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(trees))


def check_shapes(where: str, tree, shapes: dict) -> None:
    """ValueError if a field of `tree` has not its shape.

    Args:
        where: the prefix of the field's name in the message ("Params.ode").
        tree: a dataclass.
        shapes: {field name: expected shape}.
    """
    for name, want in shapes.items():
        got = np.shape(getattr(tree, name))
        if got != tuple(want):
            raise ValueError(f"{where}.{name} must have shape {tuple(want)}, got {got}")


def check_values(where: str, tree, rules: dict) -> None:
    """ValueError naming the field and index of the first value that breaks its rule; every rule also asks for a
    finite value.

    Args:
        where: the prefix of the field's name in the message ("Params.ode").
        tree: a dataclass of concrete values.
        rules: {field name: "> 0", ">= 0", "finite" or (low, high) inclusive}.
    """
    for name, rule in rules.items():
        a = np.asarray(getattr(tree, name), np.float64)
        if isinstance(rule, tuple):
            ok, text = (a >= rule[0]) & (a <= rule[1]), f"a finite value in [{rule[0]:g}, {rule[1]:g}]"
        else:
            ok = {"> 0": a > 0, ">= 0": a >= 0, "finite": np.ones_like(a, bool)}[rule]
            text = "finite" if rule == "finite" else f"a finite value {rule}"
        ok = ok & np.isfinite(a)
        if not np.all(ok):
            index = tuple(int(i) for i in np.argwhere(~ok)[0]) if a.ndim else ()
            raise ValueError(f"{where}.{name}{list(index) if index else ''} = {a[index]} is not {text}")


def validate_ode(topology: OdeTopology, params, y, world) -> None:
    """Check an ODE body's concrete values: every leaf finite, then the system's own checks.

    Args:
        topology: the body's `OdeTopology`.
        params: the system's parameters (`Params.ode`).
        y: its state (`State.ode`).
        world: the scene's `World`.
    """
    for where, tree in (("Params.ode", params), ("State.ode", y)):
        for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
            a = np.asarray(leaf, np.float64)
            if not np.all(np.isfinite(a)):
                index = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0]) if a.ndim else ()
                raise ValueError(f"{where}{jax.tree_util.keystr(path)}{list(index) if index else ''} = "
                                 f"{a[index]} is not finite")
    topology.system.validate(params, y, world)


#: gradSim's energy check (its double pendulum, after the SciPython example it is built on): the largest
#: |E(t) - E(0)| it lets a conservative solve drift, in J.
EDRIFT = 0.05


def energy_drift(system: OdeSystem, params, world, ys) -> dict | None:
    """How far an ODE body's energy strays over its motion. Host side (concrete arrays).

    Args:
        system: the `OdeSystem`.
        params: its parameters.
        world: the scene's `World`.
        ys: its motion (leaves [T, ...], `ode_trajectory`).

    Returns:
        {"unit", "initial", "final", "max_drift", "relative"}: per body the initial and final energy,
        max_t |E(t) - E(0)| (in `system.energy_unit`) and that over max_t |E(t)|; None when the system has no
        `energy`.
    """
    if system.energy is None:
        return None
    e = np.asarray(jax.vmap(lambda y: system.energy(params, world, y))(ys), np.float64)  # [T, b]
    drift = np.max(np.abs(e - e[:1]), axis=0)
    scale = np.maximum(np.max(np.abs(e), axis=0), np.finfo(np.float64).tiny)
    return {"unit": system.energy_unit, "initial": e[0].tolist(), "final": e[-1].tolist(),
            "max_drift": drift.tolist(), "relative": (drift / scale).tolist()}


def with_ode_body(topology, params, state, system: OdeSystem, ode_params, y0, arr=jnp.asarray):
    """(topology, params, state) with an ODE body added, checked (`validate_ode`).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state: the scene's `State`.
        system: the body's `OdeSystem`.
        ode_params: its parameters (a pytree).
        y0: its initial state (a pytree).
        arr: how each leaf is converted (the scene's dtype).

    Returns:
        (topology, params, state) with their ode branches set.
    """
    ode_params, y0 = jax.tree.map(arr, ode_params), jax.tree.map(arr, y0)
    ode = OdeTopology(system, jnp.asarray(system.faces(ode_params, y0), jnp.int32))
    validate_ode(ode, ode_params, y0, params.world)
    return (dataclasses.replace(topology, ode=ode), dataclasses.replace(params, ode=ode_params),
            dataclasses.replace(state, ode=y0))


def ode_trajectory(topology: OdeTopology, params, world, y0, frames: int, frame_dt, substeps: int,
                   solver: OdeSolver = OdeSolver(), first=0):
    """The ODE body's state at every frame, stepping at frame_dt / substeps.

    Args:
        topology: the body's `OdeTopology`.
        params: the system's parameters.
        world: the scene's `World`.
        y0: the state at frame `first`.
        frames: the number of frames after it.
        frame_dt: s, a frame's length.
        substeps: solver steps a frame.
        solver: the `OdeSolver`.
        first: the frame of y0 (time first * frame_dt; may be traced).

    Returns:
        y with a leading axis of frames + 1 on every leaf (the first y0).
    """
    dtype = jnp.result_type(*jax.tree.leaves(y0))
    ts = (first + jnp.arange(frames + 1, dtype=dtype)) * frame_dt
    world = jax.tree.map(lambda a: jnp.asarray(a, dtype), world)
    return topology.system.trajectory(params, world, y0, ts, frame_dt / substeps, solver, frames * substeps)


def _part(y, name: str):
    return y[name] if isinstance(y, dict) else getattr(y, name)


def ode_coordinates(system: OdeSystem, y) -> tuple:
    """(pose, rate) arrays of an ODE body's state y, by its system's `coordinates`; ValueError when it has none.

    Args:
        system: the `OdeSystem`.
        y: its state.

    Returns:
        (pose, rate).
    """
    names = system.coordinates
    if names is None:
        raise ValueError(f"the ODE body {type(system).__name__} does not name its pose and rate (its `coordinates`, "
                         "e.g. FunctionOde(..., coordinates=('q', 'qdot')))")
    return _part(y, names[0]), _part(y, names[1])


def with_ode_coordinates(system: OdeSystem, y, pose, rate):
    """y with its pose and rate (`ode_coordinates`) replaced.

    Args:
        system: the `OdeSystem` (its `coordinates`).
        y: its state.
        pose: the new pose.
        rate: the new rate.

    Returns:
        A state like y.
    """
    names = system.coordinates
    if isinstance(y, dict):
        return {**y, names[0]: pose, names[1]: rate}
    return dataclasses.replace(y, **{names[0]: pose, names[1]: rate})
