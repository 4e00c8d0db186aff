"""Particle forces and the semi-implicit (symplectic) Euler step.

v1 = v0 + dt (f(x0, v0) / m + g - damping v0) for free particles, x1 = x0 + dt v1 (PHYSICS.md). Pinned
particles (`Topology.pinned` or mass 0) are kinematic: they move only with `Control.pinned_velocity`
(default 0), which fixes gradSim's drift of fixed particles with their initial velocity.
"""

from __future__ import annotations

import jax.numpy as jnp

from gradsim_jax.physics.cloth import bending_forces, membrane_forces
from gradsim_jax.physics.contact import ground_contact
from gradsim_jax.physics.springs import spring_forces
from gradsim_jax.physics.types import Control, State


def particle_forces(topology, params, x, v, control=None):
    """Sum of internal, aerodynamic, contact and external forces on every particle: [n, 3] N."""
    activation = None if control is None else control.tri_activation
    f = spring_forces(topology, params, x, v)
    f = f + membrane_forces(topology, params, x, v, activation)
    f = f + bending_forces(topology, params, x, v)
    if topology.ground:
        f = f + ground_contact(params, x, v)
    if control is not None and control.force is not None:
        f = f + control.force
    return f


def free_inverse_mass(topology, params):
    """1 / mass for free particles, 0 for pinned or massless ones: [n] 1/kg."""
    free = jnp.logical_not(topology.pinned) & (params.mass > 0.0)
    return jnp.where(free, 1.0 / jnp.where(free, params.mass, 1.0), 0.0)


def euler_step(topology, params, state: State, control: Control | None, dt) -> State:
    """One semi-implicit Euler step of length `dt` (s)."""
    inv_mass = free_inverse_mass(topology, params)
    free = (inv_mass > 0.0)[:, None]
    f = particle_forces(topology, params, state.x, state.v, control)
    accel = f * inv_mass[:, None] + params.gravity - params.damping * state.v
    kinematic_v = jnp.zeros_like(state.v)
    if control is not None and control.pinned_velocity is not None:
        kinematic_v = control.pinned_velocity
    v1 = jnp.where(free, state.v + dt * accel, kinematic_v)
    return State(x=state.x + dt * v1, v=v1)
