"""Time integrators: static strategies passed to `simulate` (`integrator=SemiImplicitEuler()`).

An integrator is a frozen, hashable subclass of `Integrator` (the declared extension point): its
`step(topology, params, state, control, t, dt, prepared) -> State` (t: time at the start of the step, s; dt:
its length, s) advances every component the integrator steps; its `prepare(topology, params) -> prepared`
is evaluated once per rollout and passed to every `step(..., prepared=prepared)` (quantities that do not change
over time; the base's returns None); its `implicit_contact` (a class attribute, False in the base) says whether
contact damping and friction are taken backward over the step, which the start checks' stability bounds read.
`SemiImplicitEuler` is the symplectic Euler of PHYSICS.md (velocities first, then positions with the new
velocities), with the contact's damping and friction taken backward by default (`implicit_contact`, see
`physics.contact`); an implicit integrator would be another class with the same `step`.
"""

from __future__ import annotations

import abc
import dataclasses

from gradsim_jax.physics.collider_motion import collider_state, is_moving, posed
from gradsim_jax.physics.forces import contact_forces, has_contact, particle_forces, prepare_forces
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


@dataclasses.dataclass(frozen=True)
class SemiImplicitEuler(Integrator):
    """v1 = v0 + dt a(x0, v0); x1 = x0 + dt v1, for every component.

    implicit_contact: the particles' contact terms see the velocity the step reaches without them and take
    their damping and friction backward (stable at any kd, kf; `physics.contact.implicit_penalty_force`);
    False: at v0, explicitly, as Warp 1.8's semi-implicit integrator does (unstable for dt kd / m or
    dt kf / m above 2)."""

    implicit_contact: bool = True

    def prepare(self, topology, params):
        """What every step of a rollout shares (rest shapes): `step(..., prepared=)`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.

        Returns:
            {force term name: its prepared aux} (`physics.forces.prepare_forces`).
        """
        return prepare_forces(topology, params)

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
        moving = is_moving(params.colliders)
        if moving:  # kinematic colliders at the step's start time (pose and rates)
            params = dataclasses.replace(params, colliders=posed(params.colliders, t))
        particles = state.particles
        f = particle_forces(topology, params, particles.x, particles.v, control, prepared)
        if topology.wind:  # keyed in time: evaluated at the step's start
            f = f + wind_forces(topology, params, particles.x, t)
        rc = None if control is None else control.rigid
        body_force, body_torque = (None, None) if rc is None else (rc.force, rc.torque)
        touch_bodies = has_particle_body_contact(topology) and state.rigid.x.shape[0] and particles.x.shape[0]
        if has_contact(topology) or touch_bodies:
            inv_mass, v_free = free_inverse_mass(topology.particles, params.particles), None
            if self.implicit_contact:
                accel = f * inv_mass[:, None] + params.world.gravity - params.particles.damping * particles.v
                v_free = particles.v + dt * accel
            fc = contact_forces(topology, params, particles.x, particles.v, v_free, inv_mass, dt)
            if touch_bodies:
                fp, fb, tb = particle_body_loads(topology, params, particles.x, particles.v, state.rigid, v_free,
                                                 inv_mass, dt)
                fc = fc + fp
                body_force = fb if body_force is None else body_force + fb
                body_torque = tb if body_torque is None else body_torque + tb
            f = f + fc
        pc = None if control is None else control.particles
        particles = particle_euler(topology.particles, params.particles, particles, f, params.world.gravity, pc, dt)
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
