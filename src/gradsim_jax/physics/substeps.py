"""The checks `simulate` runs on a concrete scene before it compiles (`start_checks`), and the number of
substeps a frame needs when the caller gives none (`stable_substeps`).

Every stiff part of a scene bounds the explicit step: the elastic elements (`physics.stability`, the
largest stable dt of the stiffest and the most damped mode), the ground's penalty spring on the lightest free
particle (`physics.contact.max_stable_dt`), each collider's (`physics.colliders`), the rigid bodies' ground and
body contacts (`physics.rigid`, `physics.bodycontact`). `stable_substeps` takes the smallest of the bounds
that have a closed form, keeps `STEP_MARGIN` of it (the factor the warnings advise: a power iteration reads the
stiffest mode about 2 % low, and the step near its limit barely damps the stiffest mode), then checks the step
against every check that depends on it and adds substeps until none complains. A scene with nothing stiff
gets `DEFAULT_MAX_DT` (16 substeps at 60 frames per second, where gradSim ran): the accuracy of free fall and
of an ODE body's fixed Tsit5 steps, not stability, sets it there.

The README's 10 x 10 cloth (0.05 kg particles, the cloth's default stiffness) has a stable step of 0.644 ms:
at 16 substeps (1.04 ms) it blows up in the second frame; `stable_substeps` gives 33 (0.505 ms).
"""

from __future__ import annotations

import dataclasses

import math
import warnings
from typing import Optional

import numpy as np

from gradsim_jax.physics.bodycontact import body_contact_message, hull_problems
from gradsim_jax.physics.colliders import collider_message
from gradsim_jax.physics.contact import ContactWarning, contact_report, max_stable_dt
from gradsim_jax.physics.particle_body import particle_body_message
from gradsim_jax.physics.rigid import rigid_contact_message
from gradsim_jax.physics.selfcontact import self_contact_overflow
from gradsim_jax.physics.stability import StepWarning, step_report
from gradsim_jax.physics.validate import is_concrete

#: Power iterations of the step check on a concrete scene with elastic elements (`step_report`; each is one
#: pass over the elements: 30 take 20 ms for the demo cloth's 400 triangles).
STEP_CHECK_ITERATIONS = 30

#: The share of the smallest stable step that `stable_substeps` takes (the warnings' advice uses the same).
STEP_MARGIN = 0.8

#: The longest step `stable_substeps` gives when nothing stiff bounds it (s): 16 substeps at 60 fps.
DEFAULT_MAX_DT = 1.0 / 960.0

#: How many times `stable_substeps` raises its count by a quarter when a check still finds the step too long.
GROWTH_STEPS = 40


class SubstepsChosen(UserWarning):
    """`simulate` was called without `substeps` and chose them from the scene's stability bound
    (`stable_substeps`); the message says how many and why. Filter it (`warnings.filterwarnings("ignore",
    category=SubstepsChosen)`) or pass `substeps=` to silence it."""


def _has_elastic(topology) -> bool:
    return bool(topology.fem.tets.shape[0] or topology.springs.pairs.shape[0]
                or topology.cloth.triangles.shape[0] or topology.cloth.bend_edges.shape[0])


def _explicit_elastic(topology, integrator) -> bool:
    """Whether elastic elements bound the integrator's step (not when it takes them implicitly)."""
    return _has_elastic(topology) and not getattr(integrator, "implicit_elastic", False)


def _free_masses(topology, params) -> np.ndarray:
    mass = np.asarray(params.particles.mass, np.float64)
    return mass[~np.asarray(topology.particles.pinned) & (mass > 0.0)]


def _elastic_report(topology, params, state0, dt: Optional[float]):
    return step_report(topology, params, state0, dt=dt, method="power", iterations=STEP_CHECK_ITERATIONS, rtol=1e-3)


def _integrates(params, state0) -> bool:
    """Whether anything of the scene is stepped by substeps (particles, rigid bodies or an ODE body)."""
    return bool(np.shape(params.particles.mass)[0] or state0.rigid.x.shape[0] or state0.ode is not None)


def _penalty_topology(topology, integrator):
    """The topology whose contact the penalty checks see: without ground and colliders when the integrator takes
    them by Blender's impulses (`ImpulseContact`: no stiffness to bound the step, no spring to throw a deep
    start out)."""
    if integrator.contact is None:
        return topology
    return dataclasses.replace(topology, ground=False, colliders=None)


def _implicit(integrator) -> bool:
    return bool(integrator.implicit_contact)


def start_checks(topology, params, state0, dt: float, integrator) -> list[tuple[type, str]]:
    """What `simulate` warns about before it runs a concrete scene with step `dt` (s): (warning category,
    message) pairs for deep starts and steps too long for the ground, colliders, rigid bodies and elastic
    elements, and for an overflowing self-contact grid. Raises ValueError for a rigid body that contact needs as
    a solid whose hull is not closed and convex. Traced inputs: nothing is checked.

    Args:
        topology: the `Topology` the integrator steps.
        params: the `Params` it steps.
        state0: the `State` it starts from.
        dt: s, the integrator's step (traced: only what does not depend on it is checked).
        integrator: the `Integrator` (its `implicit_contact`).

    Returns:
        (warning category, message) pairs, each with a message.
    """
    if not is_concrete(params, state0):
        return []
    found = []
    implicit = _implicit(integrator)
    topology = _penalty_topology(topology, integrator)
    if topology.self_contact is not None:
        if bool(self_contact_overflow(topology, params, state0.particles.x)):
            found.append((ContactWarning, f"self-contact: a grid cell holds more than {topology.self_contact.capacity} "
                          "particles in the initial state, so some pairs are not tested; build with a larger "
                          "self_contact_capacity (`physics.self_contact_overflow` checks a trajectory)"))
    if not is_concrete(dt):  # a traced frame_dt: the step is unknown, nothing else can be checked
        return found
    dt = float(dt)
    if topology.colliders is not None:
        found.append((ContactWarning, collider_message(topology, params, state0, dt, implicit=implicit)))
    if topology.ground:
        found.append((ContactWarning, contact_report(topology, params, state0, dt=dt, implicit=implicit).message))
    if _explicit_elastic(topology, integrator):
        found.append((StepWarning, _elastic_report(topology, params, state0, dt).message))
    if state0.rigid.x.shape[0]:
        _check_hulls(topology, params, state0)
        message = "; ".join(m for m in (
            rigid_contact_message(topology.rigid, params.rigid, params.world, state0.rigid, dt=dt),
            body_contact_message(topology.rigid, params.rigid, state0.rigid, (topology.colliders, params.colliders),
                                 dt=dt),
            particle_body_message(topology, params, state0) if topology.rigid.particles else "",
        ) if m)
        found.append((ContactWarning, message))
    return [(category, message) for category, message in found if message]


def _check_hulls(topology, params, state0) -> None:
    b = state0.rigid.x.shape[0]
    solids = [flag for flag, on in (("collide", topology.rigid.collide and b > 1),
                                    ("particles", topology.rigid.particles)) if on]
    if solids:
        problems = hull_problems(topology.rigid.vertex_body, topology.rigid.faces, params.rigid.vertices, b)
        if problems:
            i, what = next(iter(problems.items()))
            kind = "body" if solids[0] == "collide" else "particle"
            raise ValueError(f"RigidTopology.{solids[0]} is True but rigid body {i} cannot be a solid for {kind} "
                             f"contact: {what} (hulls must be closed and convex)")


def _closed_form_step(topology, params, state0, implicit: bool, elastic: bool) -> float:
    """The smallest stable step (s) of the parts whose bound has a closed form: elastic elements (when `elastic`),
    the ground and the colliders on the lightest free particle (inf when none bounds it)."""
    bounds = [math.inf]
    if elastic:
        bounds.append(_elastic_report(topology, params, state0, None).max_stable_dt)
    if topology.ground:
        bounds.append(contact_report(topology, params, state0, implicit=implicit).max_stable_dt)
    masses = _free_masses(topology, params)
    if topology.colliders is not None and topology.colliders.kinds and masses.size:
        col = params.colliders
        bounds.append(float(np.min(max_stable_dt(col.ke, col.kd, masses.min(), implicit))))
    return min(bounds)


def _step_limited(topology, params, state0, dt: float, implicit: bool, elastic: bool) -> bool:
    """Whether a check that depends on the step finds `dt` too long (its message with the step differs from its
    message without it: the deep-start parts are the same in both); elastic elements only when `elastic`."""
    if elastic and not _elastic_report(topology, params, state0, dt).stable:
        return True
    if topology.ground and not contact_report(topology, params, state0, dt=dt, implicit=implicit).stable:
        return True
    if topology.colliders is not None and (collider_message(topology, params, state0, dt, implicit=implicit)
                                           != collider_message(topology, params, state0, None, implicit=implicit)):
        return True
    if state0.rigid.x.shape[0]:
        rigid = topology.rigid, params.rigid
        colliders = (topology.colliders, params.colliders)
        if (rigid_contact_message(*rigid, params.world, state0.rigid, dt=dt)
                != rigid_contact_message(*rigid, params.world, state0.rigid)):
            return True
        if (body_contact_message(*rigid, state0.rigid, colliders, dt=dt)
                != body_contact_message(*rigid, state0.rigid, colliders)):
            return True
    return False


def stable_substeps(topology, params, state0, *, frame_dt: float = 1.0 / 60.0, integrator=None) -> int:
    """The substeps a frame of `frame_dt` s needs for the explicit step to be stable on this scene (module
    docstring): at most `STEP_MARGIN` of the smallest stable step of its stiff parts, at most `DEFAULT_MAX_DT`,
    and none of `simulate`'s step checks complaining; 1 for a scene that integrates nothing by substeps (smoke
    alone). `integrator`: the one `simulate` will use (None: `SemiImplicitEuler()`, whose contact damping is
    implicit). Inputs must be concrete (not traced: call it outside `jit` and `grad`, and pass the result).

    Args:
        topology: the scene's `Topology`.
        params: the scene's `Params`.
        state0: the initial `State`.
        frame_dt: s, a frame's length.
        integrator: the `Integrator` (None: `SemiImplicitEuler()`).

    Returns:
        The number of substeps a frame.
    """
    if not is_concrete(params, state0, frame_dt):
        raise ValueError("stable_substeps reads the scene's stiffness and masses: its inputs must be concrete, not "
                         "traced (call it outside jit and grad, and pass the result as simulate's substeps)")
    if integrator is None:
        from gradsim_jax.physics.integrators import SemiImplicitEuler

        integrator = SemiImplicitEuler()
    if not _integrates(params, state0):
        return 1
    frame_dt = float(frame_dt)
    implicit = _implicit(integrator)
    topology = _penalty_topology(topology, integrator)
    elastic = _explicit_elastic(topology, integrator)
    dt = min(STEP_MARGIN * _closed_form_step(topology, params, state0, implicit, elastic), DEFAULT_MAX_DT)
    substeps = max(1, math.ceil(frame_dt / dt * (1.0 - 1e-12)))
    for _ in range(GROWTH_STEPS):
        if not _step_limited(topology, params, state0, frame_dt / substeps, implicit, elastic):
            return substeps
        substeps = math.ceil(1.25 * substeps)
    raise ValueError(f"no stable number of substeps up to {substeps} for frame_dt {frame_dt:g} s: the contact or "
                     "elastic stiffness is extreme for the masses (see the warnings of simulate with a given substeps)")


def chosen_substeps(topology, params, state0, frame_dt, integrator) -> int:
    """`simulate`'s substeps when the caller gives none: `stable_substeps`, said once as a `SubstepsChosen`
    warning (a scene that integrates nothing by substeps gets 1 silently, traced or not). Traced inputs: a
    ValueError that says what to pass.

    Args:
        topology: the `Topology` the integrator steps.
        params: the `Params` it steps.
        state0: the `State` it starts from.
        frame_dt: s, a frame's length.
        integrator: the `Integrator`.

    Returns:
        The number of substeps a frame.
    """
    if not _integrates(params, state0):
        return 1
    if not is_concrete(params, state0, frame_dt):
        raise ValueError("simulate: substeps not given and the scene is traced (inside jit or grad), so the stable "
                         "number cannot be read from it: pass substeps= (gs.stable_substeps(topology, params, state0, "
                         "frame_dt=...) computes it outside the traced function)")
    substeps = stable_substeps(topology, params, state0, frame_dt=frame_dt, integrator=integrator)
    warnings.warn(f"simulate: substeps not given: {substeps} a frame (dt {float(frame_dt) / substeps:.3g} s), from the "
                  f"scene's stable step with a margin of {STEP_MARGIN:g} (gs.stable_substeps); pass substeps= to set "
                  "it", SubstepsChosen, stacklevel=3)
    return substeps
