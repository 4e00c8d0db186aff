"""The body-kind interface: what every kind of body declares to `simulate` (the registry: `physics.components`).

A body kind (the particles and the elements made of them, rigid bodies, colliders, ODE bodies, the smoke, a
user's own) owns one branch of the scene's trees (`physics.types`: its structure in `Topology`, its parameters
in `Params`, its state in `State`), says whether a scene has it (`present`, static), checks a scene's values
before the rollout (`check`: it hooks the existing checks, e.g. `validate_scene`, `validate_ode`), says what to
warn about before a concrete rollout (`start_checks`) and may set its part of the state the rollout starts
from (`initial`: the colliders' pose at time 0). How it moves is one of two things:

- `BodyKind`: moved by the integrator's substeps (`physics.integrators.Integrator`), its forces summed there
  (the particle force terms of `physics.forces`, contacts, the rigid bodies' step);
- `OwnStepKind`: moved by its own rollout over the frames (`rollout`), apart from the integrator and from the
  other kinds: an ODE body (`physics.ode`: Diffrax), the smoke (`physics.smoke`: its solver's steps). Its
  branch is taken out of the state the integrator carries (`branch`, `with_branch`) and its trajectory put
  back into the rollout's result.

`ExtraBodyKind` is an own-step kind defined outside the package: its branches live under its `name` in the
trees' `bodies` dicts (`Topology.bodies`, `Params.bodies`, `State.bodies`), so adding one edits no container.
`RolloutOptions` holds what the rollout was asked for (frames, frame length, the ODE solver, the smoke's steps).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

from gradsim_jax.physics.ode import OdeSolver


@dataclasses.dataclass(frozen=True)
class RolloutOptions:
    """What `simulate` was asked for, as its kinds see it (static except frame_dt).

    frames: the number of frames; frame_dt: s per frame (a float, may be traced); ode_solver: how an ODE body is
    solved (`physics.ode.OdeSolver`); smoke_substeps: the smoke's solver steps a frame (checked by the smoke kind);
    first: the frame index of the rollout's first state (its time first * frame_dt; may be traced): 0 for
    `simulate`, a window's first frame for a run resumed mid-recording (`sysid.windows.runs.run_from`); a kind
    whose motion does not depend on the time may ignore it.
    """

    frames: int
    frame_dt: Any
    ode_solver: OdeSolver = OdeSolver()
    smoke_substeps: Any = 1
    first: Any = 0


class BodyKind(abc.ABC):
    """A kind of body of a scene (module docstring); subclass it (a frozen dataclass or a plain class)."""

    #: The name of the branch the kind owns in Topology, Params and State (`physics.types`).
    name: str = ""

    @abc.abstractmethod
    def present(self, topology, params, state) -> bool:
        """Whether the scene has a body of this kind (static: from shapes, flags and None branches).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            A Python bool.
        """

    def moves(self, topology, params, state) -> bool:
        """Whether the scene's body of this kind can move (host side, concrete values): a recording of a scene where
        no kind moves films nothing (`sysid.experiment.Experiment` refuses it). The base: `present`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            A Python bool.
        """
        return self.present(topology, params, state)

    def check(self, topology, params, state, options: RolloutOptions) -> None:
        """Raise ValueError or TypeError naming the field of a bad branch (the base checks nothing).

        Args:
            topology: the scene's `Topology` (leaves arrays).
            params: the scene's `Params` (leaves arrays, floats).
            state: the initial `State` (every kind's branch, `initial` applied).
            options: the rollout's `RolloutOptions`.
        """

    def start_checks(self, topology, params, state, dt, integrator) -> list[tuple[type, str]]:
        """What to warn about before a rollout (the base: nothing).

        Args:
            topology: the `Topology` the integrator steps (own-step kinds' branches taken out).
            params: the `Params` the integrator steps.
            state: the `State` the integrator starts from.
            dt: s, the integrator's step (may be traced: then check what does not depend on it).
            integrator: the `physics.integrators.Integrator`.

        Returns:
            (warning category, message) pairs; empty messages are dropped.
        """
        return []

    def initial(self, topology, params, state):
        """The state the rollout starts from, with this kind's part set (the base: `state` as it is).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State` as given (converted to arrays).

        Returns:
            The `State`.
        """
        return state


class OwnStepKind(BodyKind):
    """A body kind that moves by its own rollout, apart from the integrator (module docstring)."""

    def branch(self, tree):
        """The kind's branch of a tree: the trees' field named after the kind (`tree.ode`, `tree.smoke`).

        Args:
            tree: a `Topology`, `Params` or `State`.

        Returns:
            The branch (None: the tree has none).
        """
        return getattr(tree, self.name)

    def with_branch(self, tree, value):
        """`tree` with the kind's branch replaced.

        Args:
            tree: a `Topology`, `Params` or `State`.
            value: the new branch (None: none).

        Returns:
            A tree of the same type.
        """
        return dataclasses.replace(tree, **{self.name: value})

    def present(self, topology, params, state) -> bool:
        """Whether the state has the kind's branch.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            `branch(state) is not None`.
        """
        return self.branch(state) is not None

    def moves(self, topology, params, state) -> bool:
        """Whether the topology has the kind's branch (its own rollout moves it).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            `branch(topology) is not None`.
        """
        return self.branch(topology) is not None

    @abc.abstractmethod
    def rollout(self, topology, params, state0, options: RolloutOptions, substeps: int):
        """The kind's state at every frame.

        Args:
            topology: the scene's `Topology` (the kind's branch: `branch(topology)`).
            params: the scene's `Params`.
            state0: the kind's branch of the initial state.
            options: the rollout's `RolloutOptions` (frames, frame_dt, ...).
            substeps: the integrator's steps a frame (static), for kinds that step with it.

        Returns:
            The branch with a leading axis of length frames + 1 on every leaf (the first: state0).
        """


class ExtraBodyKind(OwnStepKind):
    """An own-step kind defined outside the package: its branch of each tree is `tree.bodies[name]`."""

    def branch(self, tree):
        """The kind's entry of `tree.bodies`.

        Args:
            tree: a `Topology`, `Params` or `State`.

        Returns:
            `tree.bodies[name]`, None when absent.
        """
        return None if tree.bodies is None else tree.bodies.get(self.name)

    def with_branch(self, tree, value):
        """`tree` with `bodies[name]` set (value None: removed; no entries left: `bodies` None).

        Args:
            tree: a `Topology`, `Params` or `State`.
            value: the new branch (None: none).

        Returns:
            A tree of the same type.
        """
        bodies = {k: v for k, v in (tree.bodies or {}).items() if k != self.name}
        if value is not None:
            bodies[self.name] = value
        return dataclasses.replace(tree, bodies=bodies or None)
