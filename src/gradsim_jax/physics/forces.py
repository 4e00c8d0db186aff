"""The force terms a scene has, summed: a registry of particle force terms, one per physical model.

A `ForceTerm` names a model, says (statically, from the Topology's shapes and flags) whether a scene has
it, and computes its forces `(topology, params, x, v, control) -> [n, 3] N`. `particle_forces` sums the
terms the scene has, so a scene without triangles compiles no membrane code (nor one without tets any FEM
code). A new component registers its term with `register_force` beside its physics.

A term may also have `prepare(topology, params) -> aux`: what its forces need that stays the same over a
rollout (rest shapes). `prepare_forces` evaluates them once, before the time loop
(`simulate` does), and `forces(..., control, aux)` then receives its aux; so the gradient accumulates the
rest shapes' cotangents over the steps and differentiates their construction once.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax.numpy as jnp

from gradsim_jax.physics.cloth import bending_forces, membrane_forces, prepare_bending, prepare_membrane
from gradsim_jax.physics.contact import ground_contact
from gradsim_jax.physics.fem import fem_forces, prepare_fem
from gradsim_jax.physics.springs import spring_forces


@dataclasses.dataclass(frozen=True)
class ForceTerm:
    """name; present(topology) -> bool (static); forces(topology, params, x, v, control) -> [n, 3] N, or
    forces(topology, params, x, v, control, aux) when `prepare(topology, params) -> aux` is given."""

    name: str
    present: Callable
    forces: Callable
    prepare: Optional[Callable] = None


#: Particle force terms by name, in the order they are summed.
PARTICLE_FORCES: dict[str, ForceTerm] = {}


def register_force(term: ForceTerm) -> ForceTerm:
    """Add (or replace) a particle force term."""
    PARTICLE_FORCES[term.name] = term
    return term


def _activation(control):
    return None if control is None or control.cloth is None else control.cloth.tri_activation


def _bend_rest_offset(control):
    return None if control is None or control.cloth is None else control.cloth.bend_rest_offset


def _tet_activation(control):
    return None if control is None or control.fem is None else control.fem.tet_activation


register_force(ForceTerm("springs", lambda t: t.springs.pairs.shape[0] > 0,
                         lambda t, p, x, v, c: spring_forces(t, p, x, v)))
register_force(ForceTerm("membrane", lambda t: t.cloth.triangles.shape[0] > 0,
                         lambda t, p, x, v, c, aux: membrane_forces(t, p, x, v, _activation(c), prepared=aux),
                         prepare_membrane))
register_force(ForceTerm("bending", lambda t: t.cloth.bend_edges.shape[0] > 0,
                         lambda t, p, x, v, c, aux: bending_forces(t, p, x, v, _bend_rest_offset(c), prepared=aux),
                         prepare_bending))
register_force(ForceTerm("fem", lambda t: t.fem.tets.shape[0] > 0,
                         lambda t, p, x, v, c, aux: fem_forces(t, p, x, v, _tet_activation(c), prepared=aux),
                         prepare_fem))
register_force(ForceTerm("ground", lambda t: t.ground, lambda t, p, x, v, c: ground_contact(t, p, x, v)))


def prepare_forces(topology, params) -> dict:
    """{name: aux} of the terms the scene has that have a `prepare` (evaluate once per rollout)."""
    return {name: term.prepare(topology, params) for name, term in PARTICLE_FORCES.items()
            if term.prepare is not None and term.present(topology)}


def particle_forces(topology, params, x, v, control=None, prepared=None):
    """Sum of the force terms the scene has, plus the external force of `control`: [n, 3] N.

    `prepared`: `prepare_forces(topology, params)` (computed here when None)."""
    if prepared is None:
        prepared = prepare_forces(topology, params)
    f = jnp.zeros_like(x)
    for name, term in PARTICLE_FORCES.items():
        if term.present(topology):
            if term.prepare is None:
                f = f + term.forces(topology, params, x, v, control)
            else:
                f = f + term.forces(topology, params, x, v, control, prepared[name])
    if control is not None and control.particles is not None and control.particles.force is not None:
        f = f + control.particles.force
    return f
