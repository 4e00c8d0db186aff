"""The force terms a scene has, summed: a registry of particle force terms, one per physical model.

A `ForceTerm` (the declared extension point, an abstract base) names a model, says (statically, from the
Topology's shapes and flags) whether a scene has it (`present`), and computes its forces with one signature,
`forces(topology, params, x, v, control, prepared) -> [n, 3] N`. `particle_forces` sums the terms the scene
has, so a scene without triangles compiles no membrane code (nor one without tets any FEM code). A new
component registers its term with `register_force` beside its physics; `FunctionForce` makes a term of plain
functions.

A term's `prepare(topology, params) -> prepared` gives what its forces need that stays the same over a rollout
(rest shapes; None in the base: nothing). `prepare_forces` evaluates them once, before the time loop
(`simulate` does, through the integrator's `prepare`), and `forces` then receives the term's own; so the
gradient accumulates the rest shapes' cotangents over the steps and differentiates their construction once.

Contact terms (`CONTACT_FORCES`, `ContactTerm`) come after: the integrator gives them the step's length, the
particles' inverse masses and the velocities the step would reach under every other force, so that their
damping and friction can be integrated backward (`physics.contact`); `contact_forces` sums them.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Callable, Optional

import jax.numpy as jnp

from gradsim_jax.physics.cloth import bending_forces, membrane_forces, prepare_bending, prepare_membrane
from gradsim_jax.physics.hinges import (angular_bending_forces, angular_bending_system_jvp, bending_system_jvp,
                                       prepare_angular_bending)
from gradsim_jax.physics.colliders import collider_contact
from gradsim_jax.physics.selfcontact import self_contact_forces
from gradsim_jax.physics.contact import ground_contact
from gradsim_jax.physics.fem import fem_forces, prepare_fem
from gradsim_jax.physics.springs import spring_forces, spring_system_jvp


class ForceTerm(abc.ABC):
    """A particle force model (subclass it as a frozen dataclass with a `name` field, or use `FunctionForce`)."""

    #: The term's name, its key in `PARTICLE_FORCES`.
    name: str

    @abc.abstractmethod
    def present(self, topology) -> bool:
        """Whether the scene has this term (static: read from shapes and flags, never from values).

        Args:
            topology: the scene's `Topology`.

        Returns:
            A Python bool.
        """

    def prepare(self, topology, params):
        """What the term's forces need that does not change over a rollout (None in the base: nothing).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.

        Returns:
            Any pytree, passed to `forces` as `prepared`.
        """
        return None

    def has_system_jvp(self) -> bool:
        """Whether the term gives the implicit step a Jacobian of its own (`system_jvp`) instead of its exact one.

        Returns:
            False in the base: `ImplicitEuler` differentiates `forces`.
        """
        return False

    def system_jvp(self, topology, params, x, v, dx, dv, prepared):
        """The force change [n, 3] N an implicit step takes for the position and velocity changes dx, dv [n, 3]
        at (x, v): a positive semi-definite stand-in for the exact Jacobian where that one is not (a
        compressed spring's sideways stiffness is negative, and conjugate gradients diverge on it).

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            x: [n, 3] m, particle positions.
            v: [n, 3] m/s, particle velocities.
            dx: [n, 3] m, a position change.
            dv: [n, 3] m/s, a velocity change.
            prepared: what `prepare` returned (None: none).

        Returns:
            [n, 3] N.
        """
        raise NotImplementedError(f"force term {self.name!r} gives no system Jacobian (has_system_jvp is False)")

    @abc.abstractmethod
    def forces(self, topology, params, x, v, control, prepared):
        """The term's force on each particle.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            x: [n, 3] m, particle positions.
            v: [n, 3] m/s, particle velocities.
            control: the step's `Control` (None: no inputs).
            prepared: what `prepare(topology, params)` returned (None when the term prepares nothing, or when
                it was not prepared: compute it inside).

        Returns:
            [n, 3] N, the force on each particle.
        """


@dataclasses.dataclass(frozen=True)
class FunctionForce(ForceTerm):
    """A `ForceTerm` of plain functions: present_fn(topology) -> bool, forces_fn(topology, params, x, v, control,
    prepared) -> [n, 3] N and, optionally, prepare_fn(topology, params) -> prepared."""

    name: str
    present_fn: Callable
    forces_fn: Callable
    prepare_fn: Optional[Callable] = None
    system_jvp_fn: Optional[Callable] = None

    def has_system_jvp(self) -> bool:
        """Whether `system_jvp_fn` was given.

        Returns:
            A Python bool.
        """
        return self.system_jvp_fn is not None

    def system_jvp(self, topology, params, x, v, dx, dv, prepared):
        """`system_jvp_fn(topology, params, x, v, dx, dv, prepared)`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            x: [n, 3] m, particle positions.
            v: [n, 3] m/s, particle velocities.
            dx: [n, 3] m, a position change.
            dv: [n, 3] m/s, a velocity change.
            prepared: what `prepare` returned (None: none).

        Returns:
            [n, 3] N, the force change the implicit step takes.
        """
        if self.system_jvp_fn is None:
            return super().system_jvp(topology, params, x, v, dx, dv, prepared)
        return self.system_jvp_fn(topology, params, x, v, dx, dv, prepared)

    def present(self, topology) -> bool:
        """`present_fn(topology)`.

        Args:
            topology: the scene's `Topology`.

        Returns:
            Whether the scene has this term (static).
        """
        return self.present_fn(topology)

    def prepare(self, topology, params):
        """`prepare_fn(topology, params)`, None without one.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.

        Returns:
            The term's prepared pytree, or None.
        """
        return None if self.prepare_fn is None else self.prepare_fn(topology, params)

    def forces(self, topology, params, x, v, control, prepared):
        """`forces_fn(topology, params, x, v, control, prepared)`.

        Args:
            topology: the scene's `Topology`.
            params: the scene's `Params`.
            x: [n, 3] m, particle positions.
            v: [n, 3] m/s, particle velocities.
            control: the step's `Control` (None: no inputs).
            prepared: what `prepare` returned (None: none).

        Returns:
            [n, 3] N, the force on each particle.
        """
        return self.forces_fn(topology, params, x, v, control, prepared)


#: Particle force terms by name, in the order they are summed.
PARTICLE_FORCES: dict[str, ForceTerm] = {}


def register_force(term: ForceTerm) -> ForceTerm:
    """Add (or replace) a particle force term.

    Args:
        term: the `ForceTerm`, registered under its name.

    Returns:
        `term`.
    """
    PARTICLE_FORCES[term.name] = term
    return term


def _activation(control):
    return None if control is None or control.cloth is None else control.cloth.tri_activation


def _bend_rest_offset(control):
    return None if control is None or control.cloth is None else control.cloth.bend_rest_offset


def _tet_activation(control):
    return None if control is None or control.fem is None else control.fem.tet_activation


register_force(FunctionForce("springs", lambda t: t.springs.pairs.shape[0] > 0,
                             lambda t, p, x, v, c, aux: spring_forces(t, p, x, v),
                             system_jvp_fn=lambda t, p, x, v, dx, dv, aux: spring_system_jvp(t, p, x, dx, dv)))
register_force(FunctionForce("membrane", lambda t: t.cloth.triangles.shape[0] > 0 and (t.cloth.membrane
                                                                                      or t.cloth.aerodynamics),
                             lambda t, p, x, v, c, aux: membrane_forces(t, p, x, v, _activation(c), prepared=aux),
                             prepare_membrane))
register_force(FunctionForce("bending", lambda t: t.cloth.bend_edges.shape[0] > 0 and t.cloth.bending != "angular",
                             lambda t, p, x, v, c, aux: bending_forces(t, p, x, v, _bend_rest_offset(c),
                                                                       prepared=aux),
                             prepare_bending, bending_system_jvp))
register_force(FunctionForce("angular_bending",
                             lambda t: t.cloth.bend_edges.shape[0] > 0 and t.cloth.bending == "angular",
                             lambda t, p, x, v, c, aux: angular_bending_forces(t, p, x, v, prepared=aux),
                             prepare_angular_bending, angular_bending_system_jvp))
register_force(FunctionForce("fem", lambda t: t.fem.tets.shape[0] > 0,
                             lambda t, p, x, v, c, aux: fem_forces(t, p, x, v, _tet_activation(c), prepared=aux),
                             prepare_fem))


@dataclasses.dataclass(frozen=True)
class ContactTerm:
    """name; present(topology) -> bool (static); forces(topology, params, x, v, v_free, inv_mass, dt) -> [n, 3] N,
    where v_free [n, 3] m/s is what the step of length dt would make of v without contact forces (None: take
    the contact explicitly, at v) and inv_mass [n] 1/kg (0 for kinematic particles)."""

    name: str
    present: Callable
    forces: Callable


#: Particle contact terms by name, summed after the other forces (`contact_forces`).
CONTACT_FORCES: dict[str, ContactTerm] = {}


def register_contact(term: ContactTerm) -> ContactTerm:
    """Add (or replace) a particle contact term.

    Args:
        term: the `ContactTerm`, registered under its name.

    Returns:
        `term`.
    """
    CONTACT_FORCES[term.name] = term
    return term


register_contact(ContactTerm("ground", lambda t: t.ground,
                             lambda t, p, x, v, v_free, inv_mass, dt: ground_contact(t, p, x, v, v_free=v_free,
                                                                                      inv_mass=inv_mass, dt=dt)))


register_contact(ContactTerm("colliders", lambda t: t.colliders is not None and len(t.colliders.kinds) > 0,
                             lambda t, p, x, v, v_free, inv_mass, dt: collider_contact(t, p, x, v, v_free=v_free,
                                                                                        inv_mass=inv_mass, dt=dt)))


register_contact(ContactTerm("self", lambda t: t.self_contact is not None,
                             lambda t, p, x, v, v_free, inv_mass, dt: self_contact_forces(t, p, x, v)))


def has_contact(topology) -> bool:
    """Whether the scene has a particle contact term (static).

    Args:
        topology: the scene's `Topology`.

    Returns:
        A Python bool.
    """
    return any(term.present(topology) for term in CONTACT_FORCES.values())


def contact_forces(topology, params, x, v, v_free=None, inv_mass=None, dt=None):
    """Sum of the contact terms the scene has (`ContactTerm`).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        v_free: [n, 3] m/s, the velocities the step would reach without contact forces (None: explicit, at v).
        inv_mass: [n] 1/kg, the particles' inverse masses (0 for kinematic ones).
        dt: s, the step's length.

    Returns:
        [n, 3] N, the contact force on each particle.
    """
    f = jnp.zeros_like(x)
    for term in CONTACT_FORCES.values():
        if term.present(topology):
            f = f + term.forces(topology, params, x, v, v_free, inv_mass, dt)
    return f


def prepare_forces(topology, params) -> dict:
    """What the terms the scene has prepare, once per rollout.

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.

    Returns:
        {name: prepared} of the present terms whose `prepare` returns something (not None).
    """
    found = {name: term.prepare(topology, params) for name, term in PARTICLE_FORCES.items() if term.present(topology)}
    return {name: aux for name, aux in found.items() if aux is not None}


def particle_forces(topology, params, x, v, control=None, prepared=None, exclude=()):
    """Sum of the force terms the scene has, plus the external force of `control` (contact terms apart:
    `contact_forces`).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        control: the step's `Control` (None: no inputs).
        prepared: `prepare_forces(topology, params)` (computed here when None).
        exclude: names of terms left out (static).

    Returns:
        [n, 3] N, the force on each particle.
    """
    if prepared is None:
        prepared = prepare_forces(topology, params)
    f = jnp.zeros_like(x)
    for name, term in PARTICLE_FORCES.items():
        if term.present(topology) and name not in exclude:
            f = f + term.forces(topology, params, x, v, control, prepared.get(name))
    if control is not None and control.particles is not None and control.particles.force is not None:
        f = f + control.particles.force
    return f
