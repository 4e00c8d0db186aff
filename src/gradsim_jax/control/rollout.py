"""A rollout driven by a policy: once per frame the policy reads the time (and the state), its outputs become
a `Control` through an actuator, and that control is held over the frame's substeps.

Built on `gradsim_jax.physics.simulate`'s per-frame control hook, so it is the same `lax.scan` over frames
(each frame under `jax.checkpoint`) and gradients flow to the policy parameters through every frame.
Pure and jittable; jit at the caller.
"""

from __future__ import annotations

from typing import Protocol

import jax
import jax.numpy as jnp

from gradsim_jax.compilation import accurate_products
from gradsim_jax.control.policies import Policy
from gradsim_jax.physics.integrators import Integrator, SemiImplicitEuler
from gradsim_jax.physics.rollout import simulate
from gradsim_jax.physics.types import Control, Params, State, Topology
from gradsim_jax.typing import Array


class Actuator(Protocol):
    """What a policy drives (`control.actuators`: `TetActivation`, `TriActivation`, `BendRest`, `ParticleForce`,
    `Actuators`): it maps the policy's outputs to the `Control` of one frame."""

    def control(self, outputs: Array) -> Control:
        """The frame's control.

        Args:
            outputs: [outputs], the policy's output vector.

        Returns:
            The `Control` held over the frame's substeps.
        """
        ...


def simulate_policy(
    topology: Topology,
    params: Params,
    state0: State,
    policy_params,
    policy: Policy,
    actuator: Actuator,
    *,
    frames: int,
    substeps: int = 32,
    frame_dt: float = 1.0 / 60.0,
    checkpoint: bool = True,
    integrator: Integrator = SemiImplicitEuler(),
) -> State:
    """Roll the scene forward under `policy`; the state at every frame, the initial one included.

    At the start of frame i (time t = i frame_dt, s) the control is
    `actuator.control(policy(policy_params, t, state))`, held over the `substeps` steps of dt =
    frame_dt / substeps. Differentiable w.r.t. policy_params (and params, state0).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state0: the initial `State`.
        policy_params: the policy's parameters (e.g. `PolicyParams`).
        policy: `policy(policy_params, t, state) -> [outputs]` (`Policy`, e.g. `PhasePolicy`).
        actuator: maps the outputs to a `Control` (`Actuator`).
        frames: number of frames (static).
        substeps: steps per frame (static).
        frame_dt: s, the length of a frame.
        checkpoint: what the gradient stores (`physics.rollout.simulate`'s `checkpoint`).
        integrator: the time integrator (static; `physics.integrators.Integrator`).

    Returns:
        A `State` with leading axis frames + 1 (as `simulate`).
    """
    with accurate_products():

        def control(frame_index, state):
            return actuator.control(policy(policy_params, frame_index * frame_dt, state))

        return simulate(topology, params, state0, frames=frames, substeps=substeps, frame_dt=frame_dt,
                        control=control, checkpoint=checkpoint, integrator=integrator)


def policy_outputs(policy_params, policy: Policy, trajectory: State, *, frame_dt: float = 1.0 / 60.0):
    """The outputs the policy gave at the start of each frame of `trajectory`: for effort penalties and reports.
    Recomputed from the stored states, so they equal those the rollout used.

    Args:
        policy_params: the policy's parameters.
        policy: the `Policy` the rollout ran.
        trajectory: a `simulate_policy` result (leaves [frames + 1, ...]).
        frame_dt: s, the length of a frame.

    Returns:
        [frames, outputs].
    """
    states = jax.tree.map(lambda a: a[:-1], trajectory)
    frames = jax.tree.leaves(states)[0].shape[0]
    t = jnp.arange(frames) * frame_dt
    return jax.vmap(lambda ti, s: policy(policy_params, ti, s))(t, states)
