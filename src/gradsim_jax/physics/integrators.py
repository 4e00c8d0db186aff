"""Time integrators: static strategies passed to `simulate` (`integrator=SemiImplicitEuler()`).

An integrator is a frozen, hashable subclass of `Integrator` (the declared extension point): its
`step(topology, params, state, control, t, dt, prepared) -> State` (t: time at the start of the step, s; dt:
its length, s) advances every component the integrator steps; its `prepare(topology, params) -> prepared`
is evaluated once per rollout and passed to every `step(..., prepared=prepared)` (quantities that do not change
over time; the base's returns None); its `implicit_contact` (a class attribute, False in the base) says whether
contact damping and friction are taken backward over the step, which the start checks' stability bounds read.
`SemiImplicitEuler` is the symplectic Euler of PHYSICS.md (velocities first, then positions with the new
velocities), with the contact's damping and friction taken backward by default (`implicit_contact`, see
`physics.contact`). `ImplicitEuler` is the linearized backward Euler of Baraff and Witkin (1998), the step
Blender's cloth takes: the particles' forces (elastic, damping, bending, aerodynamic) are taken at the step's
end, linearized once, and the linear system is solved matrix-free by conjugate gradients (`physics.linsolve`);
its `implicit_elastic` (True) tells the start checks that no elastic element limits its step.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp

from gradsim_jax.physics.collider_motion import collider_state, is_moving, posed
from gradsim_jax.physics.impulse_contact import ImpulseContact, impulse_collide
from gradsim_jax.physics.forces import (
    PARTICLE_FORCES, contact_forces, has_contact, particle_forces, prepare_forces,
)
from gradsim_jax.physics.linsolve import cg_solve
from gradsim_jax.physics.particle_body import has_particle_body_contact, particle_body_loads
from gradsim_jax.physics.particles import free_inverse_mass, particle_euler
from gradsim_jax.physics.rigid import rigid_step
from gradsim_jax.physics.types import Control, State
from gradsim_jax.physics.wind import wind_forces


class Integrator(abc.ABC):
    """What `simulate` needs of a time integrator (subclass it as a frozen dataclass: hashable, static)."""

    #: Whether the step takes the particles' contact damping and friction backward (implicitly); the start
    #: checks and `stable_substeps` then use the implicit contact's stability bound.
    implicit_contact: bool = False
    #: Whether the particles' elastic forces are taken at the step's end (an implicit step): the start checks
    #: then do not bound the step by the elastic elements' explicit stability limit.
    implicit_elastic: bool = False
    #: Blender's collision response the step takes instead of the penalty contact (`ImpulseContact`), or None: the
    #: start checks and the runtime estimate read it.
    contact: Optional[ImpulseContact] = None

    def step_cost(self) -> float:
        """The time of one step in semi-implicit Euler steps of the same scene (`physics.estimate_cost`)."""
        return 1.0

    def prepare(self, topology, params):
        """What every step of a rollout shares, evaluated once before the time loop (None: nothing).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.

        Returns:
            Any pytree, passed to every `step` as `prepared`; None in the base.
        """
        return None

    @abc.abstractmethod
    def step(self, topology, params, state: State, control: Control | None, t, dt, prepared=None) -> State:
        """Advance the scene by one step.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the `State` at the start of the step.
            control: the `Control` held over the step (None: no inputs).
            t: s, time at the start of the step.
            dt: s, the step's length.
            prepared: what `prepare` returned for this rollout (None: computed inside when needed).

        Returns:
            The `State` after the step (same shapes).
        """


class _ForceIntegrator(Integrator):
    """An integrator of the registered particle forces: a rollout prepares their rest shapes once."""

    def prepare(self, topology, params):
        """What every step of a rollout shares (rest shapes): `step(..., prepared=)`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.

        Returns:
            {force term name: its prepared aux} (`physics.forces.prepare_forces`).
        """
        return prepare_forces(topology, params)


@dataclasses.dataclass(frozen=True)
class SemiImplicitEuler(_ForceIntegrator):
    """v1 = v0 + dt a(x0, v0); x1 = x0 + dt v1, for every component.

    implicit_contact: the particles' contact terms see the velocity the step reaches without them and take
    their damping and friction backward (stable at any kd, kf; `physics.contact.implicit_penalty_force`);
    False: at v0, explicitly, as Warp 1.8's semi-implicit integrator does (unstable for dt kd / m or
    dt kf / m above 2)."""

    implicit_contact: bool = True

    def step(self, topology, params, state: State, control: Control | None, t, dt, prepared=None) -> State:
        """One semi-implicit Euler step of particles and rigid bodies (the class docstring).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the `State` at the start of the step: particles x, v [n, 3] m, m/s; bodies x [b, 3] m,
                q [b, 4], v [b, 3] m/s, w [b, 3] rad/s.
            control: the `Control` held over the step (None: no inputs).
            t: s, time at the start of the step.
            dt: s, the step's length.
            prepared: `prepare(topology, params)` (None: computed inside).

        Returns:
            The `State` after the step (same shapes).
        """
        params, moving = _posed_at(params, t)
        particles = state.particles
        f = particle_forces(topology, params, particles.x, particles.v, control, prepared)
        if topology.wind:  # keyed in time: evaluated at the step's start
            f = f + wind_forces(topology, params, particles.x, t)
        v_free = None
        if self.implicit_contact and _touches(topology, state):
            inv_mass = free_inverse_mass(topology.particles, params.particles)
            accel = f * inv_mass[:, None] + params.world.gravity - params.particles.damping * particles.v
            v_free = particles.v + dt * accel
        fc, body_force, body_torque = _contact_loads(topology, params, state, control, v_free, dt)
        if fc is not None:
            f = f + fc
        pc = None if control is None else control.particles
        particles = particle_euler(topology.particles, params.particles, particles, f, params.world.gravity, pc, dt)
        return _finish(topology, params, state, particles, body_force, body_torque, moving, t, dt)


@dataclasses.dataclass(frozen=True)
class ImplicitEuler(_ForceIntegrator):
    """The particles' linearized backward Euler step (Baraff and Witkin 1998; Blender's cloth step), rigid bodies
    as `SemiImplicitEuler` steps them.

    With f(x, v) the particles' forces (`particle_forces`: every elastic, damping, bending and aerodynamic term),
    m the masses, c the linear air damping (`ParticleParams.damping`, 1/s) and g gravity, the velocity change dv of
    the free particles solves the step taken at its end, linearized once at its start:

        (m (1 + dt c) - dt J_v - dt^2 J_x) dv = dt (f + m g - m c v) + dt^2 J_x v,

    J_x, J_v the forces' Jacobians by position and velocity, applied matrix-free (`jax.linearize`) inside
    `iterations` conjugate-gradient steps (`physics.linsolve.cg_solve`; with a `tolerance` > 0 at most that many,
    stopping at that relative residual: Blender's rule is `iterations=100, tolerance=0.01`). A force term that
    gives a Jacobian of its own for the step (`ForceTerm.system_jvp`: the springs' is positive semi-definite, as
    Blender's solver takes it, so that a crumpling cloth's compressed springs do not make the system indefinite)
    is taken with it, in the system and its right-hand side alike. Pinned particles move at their kinematic
    velocity and enter the free particles' system as known. Then v1 = v + dv, x1 = x + dt v1. The
    step is stable at any stiffness and damps a mode of frequency w by about w^2 dt / 2 per second (a stiff
    mode, w dt >> 1, not at all): a video made by an engine that steps this way (Blender's cloth at `quality`
    substeps per frame) is matched by the same step at the same substeps, not by a finer explicit one.

    Wind is explicit (evaluated at the step's start); contact and the particles' meeting with bodies act after
    the solve on the velocity it reached: the penalty contact with its damping and friction taken backward
    (`implicit_contact`), or, with `contact=ImpulseContact(...)`, Blender's collision response (velocity impulses
    between the cloth's triangles and the colliders' and the ground's, `physics.impulse_contact`; the contacts'
    ke, kd and kf then play no part, their mu does).
    Each iteration costs a Jacobian-vector product of the forces: 40 iterations at 5 substeps a frame cost
    about what 200 (gradient) to 300 (forward) explicit substeps a frame do (`step_cost`, an upper bound with a
    tolerance). Too few iterations leave the stiff system unsolved (the cloth stretches); check a scene against a
    run with more.

    Derivatives flow through the solve as through an exact one (`physics.linsolve`).

    Definiteness: conjugate gradients need the system positive definite. The springs' and the dihedral bending's
    own step Jacobians are (`physics.springs.spring_system_jvp`, `physics.hinges.bending_system_jvp`); Blender's
    angular bending is taken explicitly; the membrane and FEM terms enter with their exact Jacobians,
    which a strongly compressed or folded element can make indefinite at a long step (dt^2 k / m well above 1):
    a crumpling membrane cloth or soft body may then diverge (`SimulationDiverged`). Model such a cloth with
    springs (`[material] spring_ke`), or step it semi-implicitly.
    """

    iterations: int = 40
    tolerance: float = 0.0
    implicit_contact: bool = True
    contact: Optional[ImpulseContact] = None
    implicit_elastic = True

    def step_cost(self) -> float:
        """The time of one step in semi-implicit Euler steps of the same scene, in a fit's gradient: measured on
        Blender's 289-particle spring cloth (2-core CPU, float32, 40 iterations), an implicit substep's gradient
        took 42 explicit ones' (its forward 64: the backward pass solves one transposed system instead of
        retracing the iterations).

        Returns:
            1 + 1.05 x iterations.
        """
        return 1.0 + 1.05 * self.iterations

    def step(self, topology, params, state: State, control: Control | None, t, dt, prepared=None) -> State:
        """One linearized backward Euler step of the particles, a semi-implicit one of rigid bodies (the class
        docstring).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            state: the `State` at the start of the step.
            control: the `Control` held over the step (None: no inputs).
            t: s, time at the start of the step.
            dt: s, the step's length.
            prepared: `prepare(topology, params)` (None: computed inside).

        Returns:
            The `State` after the step (same shapes).
        """
        params, moving = _posed_at(params, t)
        particles = state.particles
        x, v = particles.x, particles.v
        if prepared is None:
            prepared = prepare_forces(topology, params)
        inv_mass = free_inverse_mass(topology.particles, params.particles)
        free = (inv_mass > 0.0)[:, None].astype(x.dtype)
        mass = jnp.where(inv_mass > 0.0, 1.0 / jnp.where(inv_mass > 0.0, inv_mass, 1.0), 0.0)[:, None]
        pc = None if control is None else control.particles
        kinematic_v = jnp.zeros_like(v) if pc is None or pc.pinned_velocity is None else pc.pinned_velocity
        own = tuple(name for name, term in PARTICLE_FORCES.items()
                    if term.present(topology) and term.has_system_jvp())  # terms with a definite Jacobian
        f0, exact = jax.linearize(
            lambda xx, vv: particle_forces(topology, params, xx, vv, control, prepared, exclude=own), x, v)
        for name in own:
            f0 = f0 + PARTICLE_FORCES[name].forces(topology, params, x, v, control, prepared.get(name))

        def jacobian(dx, dv):  # the forces' change the step takes for (dx, dv)
            change = exact(dx, dv)
            for name in own:
                change = change + PARTICLE_FORCES[name].system_jvp(topology, params, x, v, dx, dv, prepared.get(name))
            return change

        if topology.wind:
            f0 = f0 + wind_forces(topology, params, x, t)
        c = params.particles.damping
        dtc = dt * c

        def apply(u):  # the system's operator on a velocity change u: the free particles' block, identity on the pinned
            w = free * u
            return free * (mass * (1.0 + dtc) * w - jacobian(dt * dt * w, dt * w)) + (1.0 - free) * u

        known = (1.0 - free) * (kinematic_v - v)  # the pinned particles' velocity change
        rhs = dt * (f0 + mass * params.world.gravity - mass * c * v) + jacobian(dt * dt * v, jnp.zeros_like(v))
        rhs = free * (rhs + jacobian(dt * dt * known, dt * known))
        dv = free * cg_solve(apply, rhs, self.iterations, self.tolerance)
        v_free = v + dv + known
        if self.contact is not None and _touches(topology, state):
            if _meets_bodies(topology, state):
                raise ValueError("ImplicitEuler(contact=ImpulseContact(...)) takes the ground and colliders; particles "
                                 "meeting rigid bodies need the penalty contact (contact=None)")
            if topology.self_contact is not None:
                raise ValueError("ImplicitEuler(contact=ImpulseContact(...)) has no self-contact; remove the self contact "
                                 "or use the penalty contact (contact=None)")
            v1 = impulse_collide(self.contact, topology, params, x, v_free, free, dt)
            body_force, body_torque = _control_loads(control)
        else:
            fc, body_force, body_torque = _contact_loads(topology, params, state, control, v_free, dt)
            v1 = v_free if fc is None else v_free + dt * free * fc * inv_mass[:, None]
        particles = dataclasses.replace(particles, x=x + dt * v1, v=v1)
        return _finish(topology, params, state, particles, body_force, body_torque, moving, t, dt)


def _posed_at(params, t):
    """(params with kinematic colliders at time t, whether any moves): the pose and rates a step starts from."""
    moving = is_moving(params.colliders)
    if moving:
        params = dataclasses.replace(params, colliders=posed(params.colliders, t))
    return params, moving


def _meets_bodies(topology, state) -> bool:
    """Whether the particles meet rigid bodies (static)."""
    return bool(has_particle_body_contact(topology) and state.rigid.x.shape[0] and state.particles.x.shape[0])


def _touches(topology, state) -> bool:
    """Whether the particles meet the ground, colliders or rigid bodies (static)."""
    return bool(has_contact(topology) or _meets_bodies(topology, state))


def _control_loads(control):
    """(force, torque) the control puts on the bodies over the step, each None when it puts none."""
    rc = None if control is None else control.rigid
    return (None, None) if rc is None else (rc.force, rc.torque)


def _contact_loads(topology, params, state: State, control, v_free, dt):
    """(contact force [n, 3] N on the particles or None, force and torque on the bodies or None) at the step's
    start state; `v_free` [n, 3]: the velocities the step reaches without them (None: explicit contact)."""
    body_force, body_torque = _control_loads(control)
    if not _touches(topology, state):
        return None, body_force, body_torque
    particles = state.particles
    inv_mass = free_inverse_mass(topology.particles, params.particles)
    fc = contact_forces(topology, params, particles.x, particles.v, v_free, inv_mass, dt)
    if _meets_bodies(topology, state):
        fp, fb, tb = particle_body_loads(topology, params, particles.x, particles.v, state.rigid, v_free, inv_mass,
                                         dt)
        fc = fc + fp
        body_force = fb if body_force is None else body_force + fb
        body_torque = tb if body_torque is None else body_torque + tb
    return fc, body_force, body_torque


def _finish(topology, params, state: State, particles, body_force, body_torque, moving: bool, t, dt) -> State:
    """The step's State: the particles given, the rigid bodies stepped under the loads, moving colliders posed."""
    rigid = state.rigid
    if rigid.x.shape[0]:
        rigid = rigid_step(topology.rigid, params.rigid, params.world, rigid, t, dt, force=body_force,
                           torque=body_torque, colliders=(topology.colliders, params.colliders))
    if moving:
        return dataclasses.replace(state, particles=particles, rigid=rigid,
                                   colliders=collider_state(params.colliders, t + dt))
    return State(particles=particles, rigid=rigid)


def euler_step(topology, params, state: State, control: Control | None, dt, t=0.0) -> State:
    """One semi-implicit Euler step of length `dt` (s) starting at time `t` (s), under `control` held over the step.

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state: the `State` at the start of the step.
        control: the `Control` held over the step (None: no inputs).
        dt: s, the step's length.
        t: s, time at the start of the step.

    Returns:
        The State after the step (same shapes: particle x, v [n, 3] in m, m/s; bodies x [b, 3], q [b, 4],
        v [b, 3], w [b, 3]).
    """
    return SemiImplicitEuler().step(topology, params, state, control, t, dt)
