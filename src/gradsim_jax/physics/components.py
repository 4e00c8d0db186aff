"""The registry of body kinds `simulate` loops over (`COMPONENTS`), and the built-in kinds.

Each kind implements `physics.component.BodyKind` (moved by the integrator) or `OwnStepKind` (moved by its own
rollout). Adding a kind is one module with its class plus one line: an entry of `COMPONENTS` below, or, from a
user's module, `register_component(kind)`. The order of `COMPONENTS` is the order of their checks and of the
own-step rollouts.

The built-in kinds hook the existing checks rather than re-implement them: the particles' kind runs
`validate_scene` and the integrator's `start_checks`, which read the particle, element (springs, cloth, FEM,
self-contact), rigid and collider branches together, because their counts are shared and the step's stability is
one bound for everything the integrator couples.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.physics.collider_motion import collider_state
from gradsim_jax.physics.colliders import validate_colliders
from gradsim_jax.physics.component import BodyKind, OwnStepKind, RolloutOptions
from gradsim_jax.physics.ode import is_concrete_tree, ode_trajectory, validate_ode
from gradsim_jax.physics.smoke import smoke_rollout, validate_smoke
from gradsim_jax.physics.substeps import start_checks
from gradsim_jax.physics.validate import validate_scene


class OdeBodies(OwnStepKind):
    """An ODE body (`physics.ode`): branches `Topology.ode` (`OdeTopology`), `Params.ode`, `State.ode` (its y);
    solved over the frame times by `ode_trajectory` at frame_dt / substeps."""

    name = "ode"

    def check(self, topology, params, state, options: RolloutOptions) -> None:
        """ValueError without `Topology.ode`; on concrete values `validate_ode`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.
            options: the rollout's `RolloutOptions`.
        """
        if topology.ode is None:
            raise ValueError("the state has an ODE body (State.ode) but Topology.ode is None")
        if is_concrete_tree(params.ode, state.ode, params.world):
            validate_ode(topology.ode, params.ode, state.ode, params.world)

    def rollout(self, topology, params, state0, options: RolloutOptions, substeps: int):
        """`ode_trajectory` over the frames.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state0: y at frame 0.
            options: the rollout's `RolloutOptions` (frames, frame_dt, ode_solver, first).
            substeps: the solver's fixed steps a frame.

        Returns:
            y at every frame (leaves [frames + 1, ...]).
        """
        return ode_trajectory(topology.ode, params.ode, params.world, state0, options.frames, options.frame_dt,
                              substeps, options.ode_solver, first=options.first)


class Smoke(OwnStepKind):
    """2-D smoke on a grid (`physics.smoke`): branches `Topology.smoke`, `Params.smoke`, `State.smoke`; stepped by
    its solver, `options.smoke_substeps` steps a frame (`smoke_rollout`)."""

    name = "smoke"

    def check(self, topology, params, state, options: RolloutOptions) -> None:
        """ValueError without the smoke's topology or parameters, or for a bad `smoke_substeps`; `validate_smoke`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.
            options: the rollout's `RolloutOptions` (smoke_substeps).
        """
        if topology.smoke is None or params.smoke is None:
            raise ValueError("the state has smoke (State.smoke) but Topology.smoke or Params.smoke is None")
        if not isinstance(options.smoke_substeps, (int, np.integer)) or options.smoke_substeps < 1:
            raise ValueError(f"smoke_substeps must be a positive int, got {options.smoke_substeps!r}")
        validate_smoke(topology.smoke, params.smoke, state.smoke)

    def rollout(self, topology, params, state0, options: RolloutOptions, substeps: int):
        """`smoke_rollout` over the frames.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state0: the `SmokeState` at frame 0.
            options: the rollout's `RolloutOptions` (frames, frame_dt, smoke_substeps).
            substeps: the integrator's steps a frame (unused: the smoke has its own).

        Returns:
            The smoke at every frame (leaves [frames + 1, ny, nx]).
        """
        return smoke_rollout(topology.smoke, params.smoke, state0, frames=options.frames,
                             substeps=options.smoke_substeps, frame_dt=options.frame_dt)


class Particles(BodyKind):
    """Particles and the elements made of them (springs, cloth, FEM, self-contact; their forces: the terms of
    `physics.forces`), stepped by the integrator. Its checks are the scene's: `validate_scene` (particle, element
    and rigid branches) and `start_checks` (every contact and elastic step bound of the integrated scene)."""

    name = "particles"

    def present(self, topology, params, state) -> bool:
        """Always: every scene has the particle branch (empty when it has no particles).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            True.
        """
        return True

    def check(self, topology, params, state, options: RolloutOptions) -> None:
        """`validate_scene` of what the integrator steps (own-step kinds' branches taken out).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.
            options: the rollout's `RolloutOptions`.
        """
        validate_scene(*integrated(topology, params, state))

    def moves(self, topology, params, state) -> bool:
        """Whether a particle is free: not pinned, with a positive mass.

        Args:
            topology: the scene's `Topology` (the pins).
            params: the scene's `Params` (the masses, kg).
            state: the initial `State`.

        Returns:
            A Python bool.
        """
        return bool((~np.asarray(topology.particles.pinned) & (np.asarray(params.particles.mass) > 0)).any())

    def start_checks(self, topology, params, state, dt, integrator) -> list[tuple[type, str]]:
        """`physics.substeps.start_checks`: deep starts and steps too long for contacts and elastic elements.

        Args:
            topology: the `Topology` the integrator steps.
            params: the `Params` the integrator steps.
            state: the `State` the integrator starts from.
            dt: s, the integrator's step.
            integrator: the `Integrator`.

        Returns:
            (warning category, message) pairs.
        """
        return start_checks(topology, params, state, dt, integrator)


class RigidBodies(BodyKind):
    """Rigid bodies (`physics.rigid`): branches `Topology.rigid`, `Params.rigid`, `State.rigid`, stepped by the
    integrator with the particles (their contact is two-way). Checked with the scene (`Particles`)."""

    name = "rigid"

    def present(self, topology, params, state) -> bool:
        """Whether the scene has bodies.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            Whether `state.rigid` holds at least one body.
        """
        return state.rigid.x.shape[0] > 0

    def moves(self, topology, params, state) -> bool:
        """Whether a body has a positive mass (a mass-0 body is kinematic).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params` (the bodies' masses, kg).
            state: the initial `State`.

        Returns:
            A Python bool.
        """
        return bool((np.asarray(params.rigid.mass) > 0).any())


class Colliders(BodyKind):
    """Static or keyframed obstacles (`physics.colliders`, `physics.collider_motion`): branches
    `Topology.colliders`, `Params.colliders` and `State.colliders` (the keyframed ones' pose)."""

    name = "colliders"

    def present(self, topology, params, state) -> bool:
        """Whether the scene has colliders (in its topology or its parameters).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            A Python bool.
        """
        return topology.colliders is not None or params.colliders is not None

    def moves(self, topology, params, state) -> bool:
        """Never: a collider is an obstacle, kept still or moved as keyframed, not a motion a recording films.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            False.
        """
        return False

    def initial(self, topology, params, state):
        """`state` with the keyframed colliders' pose at time 0 (None: none moves).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.

        Returns:
            The `State`.
        """
        return dataclasses.replace(state, colliders=collider_state(params.colliders, 0.0))

    def check(self, topology, params, state, options: RolloutOptions) -> None:
        """ValueError without `Params.colliders`; `validate_colliders`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the initial `State`.
            options: the rollout's `RolloutOptions`.
        """
        if topology.colliders is None:
            return
        if params.colliders is None:
            raise ValueError("the scene has colliders (Topology.colliders) but Params.colliders is None")
        validate_colliders(topology.colliders, params.colliders)


#: The body kinds, in the order of their checks and of the own-step rollouts. Adding a kind: one line here
#: (or `register_component` from outside the package).
COMPONENTS: list[BodyKind] = [OdeBodies(), Smoke(), Particles(), RigidBodies(), Colliders()]


def register_component(kind: BodyKind) -> BodyKind:
    """Add a body kind to `COMPONENTS` (replacing the one of the same name).

    Args:
        kind: the `BodyKind` (an `ExtraBodyKind` for a kind defined outside the package).

    Returns:
        `kind`.
    """
    if not isinstance(kind, BodyKind):
        raise TypeError(f"a body kind must be a physics.component.BodyKind, got {type(kind).__name__}")
    COMPONENTS[:] = [k for k in COMPONENTS if k.name != kind.name] + [kind]
    return kind


def unregister_component(name: str) -> None:
    """Remove the body kind called `name` from `COMPONENTS` (nothing when there is none).

    Args:
        name: the kind's `name`.
    """
    COMPONENTS[:] = [k for k in COMPONENTS if k.name != name]


def present_kinds(topology, params, state) -> list[BodyKind]:
    """The registered kinds the scene has, in registry order.

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state: the initial `State`.

    Returns:
        A list of `BodyKind`.
    """
    return [kind for kind in COMPONENTS if kind.present(topology, params, state)]


def integrated(topology, params, state):
    """The trees the integrator steps: every registered own-step kind's state branch taken out, and the branches
    of kinds defined outside the package (`bodies`) out of all three trees.

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state: a `State`.

    Returns:
        (topology, params, state).
    """
    for kind in COMPONENTS:
        if isinstance(kind, OwnStepKind):
            state = kind.with_branch(state, None)
    return (dataclasses.replace(topology, bodies=None), dataclasses.replace(params, bodies=None),
            dataclasses.replace(state, bodies=None))
