"""Point masses: the particle component that cloth, springs and (later) FEM tetrahedra share.

Branches: `ParticleTopology.pinned [n] bool`; `ParticleParams` mass [n] kg (0 means kinematic, like
pinned), damping (scalar 1/s: linear drag acceleration -damping v on free particles), radius (m: the
contact radius against the ground); `ParticleState` x [n, 3] m, v [n, 3] m/s; `ParticleControl` force
[n, 3] N (a known push) and pinned_velocity [n, 3] m/s (the path of pinned particles; 0 when None).

Semi-implicit (symplectic) Euler (PHYSICS.md): v1 = v0 + dt (f(x0, v0) / m + g - damping v0) for free
particles, x1 = x0 + dt v1. Pinned particles (`pinned` or mass 0) are kinematic: they move only with
`ParticleControl.pinned_velocity`, which fixes gradSim's drift of fixed particles with their initial velocity.
"""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp

from gradsim_jax.typing import Array, pytree_dataclass


@pytree_dataclass
class ParticleTopology:
    """pinned: [n] bool; pinned particles are kinematic."""

    pinned: Array

    @property
    def count(self) -> int:
        return self.pinned.shape[-1]


@pytree_dataclass
class ParticleParams:
    """mass [n] kg (0: kinematic); damping () 1/s; radius () m (ground contact)."""

    mass: Array
    damping: Array
    radius: Array


@pytree_dataclass
class ParticleState:
    """x [n, 3] m; v [n, 3] m/s."""

    x: Array
    v: Array


@pytree_dataclass
class ParticleControl:
    """force [n, 3] N added to every particle; pinned_velocity [n, 3] m/s of the pinned ones (None: 0)."""

    force: Optional[Array] = None
    pinned_velocity: Optional[Array] = None


def free_inverse_mass(topology: ParticleTopology, params: ParticleParams) -> Array:
    """1 / mass for free particles, 0 for pinned or massless ones: [n] 1/kg.

    Args:
        topology: the particles' topology (pinned [n] bool).
        params: the particles' parameters (mass [n] kg).

    Returns:
        [n] 1/kg, the inverse masses, 0 for kinematic particles.
    """
    free = jnp.logical_not(topology.pinned) & (params.mass > 0.0)
    return jnp.where(free, 1.0 / jnp.where(free, params.mass, 1.0), 0.0)


def particle_euler(topology: ParticleTopology, params: ParticleParams, state: ParticleState, force: Array,
                   gravity: Array, control: Optional[ParticleControl], dt) -> ParticleState:
    """One semi-implicit Euler step of the particles under `force` [n, 3] N (every force term summed).

    Args:
        topology: the particles' topology (pinned [n] bool).
        params: the particles' parameters (mass [n] kg, damping () 1/s).
        state: the particles' state at the start of the step (x [n, 3] m, v [n, 3] m/s).
        force: [n, 3] N, the total force on each particle at the start of the step.
        gravity: [3] m/s^2, the gravitational acceleration.
        control: the particles' control; its pinned_velocity [n, 3] m/s moves the pinned particles (None: they
            stay still).
        dt: () s, the time step.

    Returns:
        The ParticleState after the step (x [n, 3] m, v [n, 3] m/s).
    """
    inv_mass = free_inverse_mass(topology, params)
    free = (inv_mass > 0.0)[:, None]
    accel = force * inv_mass[:, None] + gravity - params.damping * state.v
    kinematic_v = jnp.zeros_like(state.v)
    if control is not None and control.pinned_velocity is not None:
        kinematic_v = control.pinned_velocity
    v1 = jnp.where(free, state.v + dt * accel, kinematic_v)
    return ParticleState(x=state.x + dt * v1, v=v1)


def kinetic_energy(params: ParticleParams, state: ParticleState) -> Array:
    """sum m |v|^2 / 2 over the particles: J.

    Args:
        params: the particles' parameters (mass [n] kg).
        state: the particles' state (v [n, 3] m/s).

    Returns:
        () J, the kinetic energy.
    """
    return 0.5 * jnp.sum(params.mass * jnp.sum(state.v * state.v, axis=-1))
