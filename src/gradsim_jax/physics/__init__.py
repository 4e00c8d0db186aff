"""Differentiable particle physics: containers, force terms, integrator and rollout."""

from gradsim_jax.physics.cloth import bending_forces, membrane_energy, membrane_forces
from gradsim_jax.physics.contact import ground_contact
from gradsim_jax.physics.integrators import euler_step, particle_forces
from gradsim_jax.physics.rollout import SimulationDiverged, check_finite, first_nonfinite, simulate
from gradsim_jax.physics.springs import spring_energy, spring_forces
from gradsim_jax.physics.types import Control, Params, State, Topology
from gradsim_jax.physics.validate import validate_scene

__all__ = [
    "Control", "Params", "SimulationDiverged", "State", "Topology", "bending_forces", "check_finite",
    "euler_step", "first_nonfinite", "ground_contact", "membrane_energy", "membrane_forces",
    "particle_forces", "simulate", "spring_energy", "spring_forces", "validate_scene",
]
