"""Differentiable physics of cloth (membrane, bending, springs, aerodynamics, wind), rigid bodies and FEM soft bodies, with
ground contact, colliders (planes, spheres, boxes, capsules, triangle meshes; static or keyframed), contact
between rigid bodies and between particles, and ODE bodies (pendulums, a bouncing
ball, a user's system): the containers (Topology, Params, State, Control: one branch per component), force
terms, integrators, the rollout over frames (`simulate`) and the checks of a scene and a trajectory. The lowest
layer above the shared helpers: it imports no other part of gradsim_jax (docs/architecture.md)."""

from gradsim_jax.physics.checks import (
    TracedCheckError, checked_simulate, raise_if_error, scene_checks, trajectory_checks, validate_traced,
)
from gradsim_jax.physics.cloth import (
    ClothControl, ClothParams, ClothTopology, bending_forces, membrane_energy, membrane_forces,
)
from gradsim_jax.physics.colliders import (
    COLLIDER_KINDS, ColliderParams, ColliderTopology, collider_contact, collider_distance, collider_params,
    validate_colliders,
)
from gradsim_jax.physics.contact import (
    ContactParams, ContactReport, ContactWarning, contact_report, ground_contact, implicit_penalty_force,
    penalty_force,
)
from gradsim_jax.physics.cost import CostEstimate, available_memory_bytes, estimate_cost
from gradsim_jax.physics.fem import (
    FemControl, FemParams, FemTopology, fem_energy, fem_forces, fem_stress, fem_volumes,
)
from gradsim_jax.physics.checkpointing import CheckpointPolicy, NestedSqrt, NoCheckpoint, PerFrame, PerSubstep
from gradsim_jax.physics.component import BodyKind, ExtraBodyKind, OwnStepKind, RolloutOptions
from gradsim_jax.physics.components import COMPONENTS, register_component, unregister_component
from gradsim_jax.physics.forces import (
    CONTACT_FORCES, PARTICLE_FORCES, ContactTerm, ForceTerm, FunctionForce, contact_forces, particle_forces,
    register_contact, register_force,
)
from gradsim_jax.physics.ode import FunctionOde, OdeSolver, OdeSystem, OdeTopology, solve_ode
from gradsim_jax.physics.pendulum import PendulumParams, PendulumState, PendulumSystem
from gradsim_jax.physics.impulse_contact import ContactCapacityWarning, ImpulseContact
from gradsim_jax.physics.integrators import ImplicitEuler, Integrator, SemiImplicitEuler, euler_step
from gradsim_jax.physics.linsolve import cg_solve
from gradsim_jax.physics.blender import blender_cloth
from gradsim_jax.physics.particles import (
    ParticleControl, ParticleParams, ParticleState, ParticleTopology, free_inverse_mass, kinetic_energy,
)
from gradsim_jax.physics.rigid import (
    RigidControl, RigidParams, RigidState, RigidTopology, angular_momentum, rigid_step, world_vertices,
)
from gradsim_jax.physics.rollout import SimulationDiverged, check_finite, first_nonfinite, simulate
from gradsim_jax.physics.stability import StepReport, StepWarning, damping_limit, step_report
from gradsim_jax.physics.substeps import SubstepsChosen, stable_substeps
from gradsim_jax.physics.collider_motion import ColliderState
from gradsim_jax.physics.selfcontact import SelfContactParams, SelfContactTopology, self_contact_overflow
from gradsim_jax.physics.springs import SpringParams, SpringTopology, spring_energy, spring_forces
from gradsim_jax.physics.types import Control, Params, State, Topology, particle_state
from gradsim_jax.physics.validate import validate_scene
from gradsim_jax.physics.wind import (
    WindParams, blender_pressure, face_wind_forces, wind_factor, wind_forces, wind_params, with_wind,
)
from gradsim_jax.physics.world import World
from gradsim_jax.typing import get_path, named_leaves, replace_paths

__all__ = [
    "BodyKind", "COMPONENTS", "CheckpointPolicy", "ExtraBodyKind", "FunctionForce", "Integrator", "NestedSqrt",
    "NoCheckpoint", "OwnStepKind", "PerFrame", "PerSubstep", "RolloutOptions", "register_component",
    "unregister_component",
    "COLLIDER_KINDS", "ColliderParams", "ColliderTopology", "collider_contact", "collider_distance",
    "collider_params", "validate_colliders", "ColliderState", "SelfContactParams", "SelfContactTopology",
    "self_contact_overflow",
    "FunctionOde", "OdeSolver", "OdeSystem", "OdeTopology", "PendulumParams", "PendulumState", "PendulumSystem",
    "solve_ode",
    "CONTACT_FORCES", "ClothControl", "ClothParams", "ClothTopology", "ContactParams", "ContactTerm", "contact_forces",
    "implicit_penalty_force", "register_contact", "ContactReport", "ContactWarning", "Control",
    "StepReport", "StepWarning", "damping_limit", "step_report", "SubstepsChosen", "stable_substeps",
    "CostEstimate", "FemControl", "FemParams", "FemTopology", "ForceTerm", "PARTICLE_FORCES", "Params", "ParticleControl", "ParticleParams", "ParticleState",
    "ParticleTopology", "RigidControl", "RigidParams", "RigidState", "RigidTopology", "SemiImplicitEuler", "ImplicitEuler", "ImpulseContact", "ContactCapacityWarning", "cg_solve", "blender_cloth", "SimulationDiverged", "SpringParams", "SpringTopology", "State",
    "Topology", "TracedCheckError", "World", "available_memory_bytes", "bending_forces", "check_finite",
    "checked_simulate", "contact_report", "estimate_cost", "euler_step", "fem_energy", "fem_forces", "fem_stress",
    "fem_volumes", "first_nonfinite", "free_inverse_mass",
    "angular_momentum", "get_path", "ground_contact", "kinetic_energy", "membrane_energy", "membrane_forces", "named_leaves",
    "particle_forces", "particle_state", "penalty_force", "raise_if_error", "register_force", "replace_paths", "rigid_step", "scene_checks",
    "simulate", "spring_energy", "spring_forces", "trajectory_checks", "validate_scene", "validate_traced", "world_vertices",
    "WindParams", "blender_pressure", "face_wind_forces", "wind_factor", "wind_forces", "wind_params", "with_wind",
]
