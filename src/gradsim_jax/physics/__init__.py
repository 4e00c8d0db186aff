"""Differentiable particle physics: containers, force terms, integrator and rollout."""

from gradsim_jax.physics.checks import (
    TracedCheckError, checked_simulate, raise_if_error, scene_checks, trajectory_checks, validate_traced,
)
from gradsim_jax.physics.cloth import bending_forces, membrane_energy, membrane_forces
from gradsim_jax.physics.contact import ContactReport, ContactWarning, contact_report, ground_contact
from gradsim_jax.physics.cost import CostEstimate, available_memory_bytes, estimate_cost
from gradsim_jax.physics.integrators import euler_step, particle_forces
from gradsim_jax.physics.rollout import SimulationDiverged, check_finite, first_nonfinite, simulate
from gradsim_jax.physics.springs import spring_energy, spring_forces
from gradsim_jax.physics.types import Control, Params, State, Topology
from gradsim_jax.physics.validate import validate_scene

__all__ = [
    "ContactReport", "ContactWarning", "Control", "CostEstimate", "Params", "SimulationDiverged", "State",
    "Topology", "TracedCheckError", "available_memory_bytes", "bending_forces", "check_finite",
    "checked_simulate", "contact_report", "estimate_cost", "euler_step",
    "first_nonfinite", "ground_contact", "membrane_energy", "membrane_forces", "particle_forces",
    "raise_if_error", "scene_checks", "simulate", "spring_energy", "spring_forces", "trajectory_checks",
    "validate_scene", "validate_traced",
]
