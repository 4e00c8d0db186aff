"""The contact options of `Scene.build`, checked: which model the bodies meet the ground with, whether they meet
each other, and whether the particles meet them."""

from __future__ import annotations

import warnings

import numpy as np

from gradsim_jax.physics.bodycontact import hull_problems
from gradsim_jax.physics.rigid import CONTACT_MODELS


def body_contact_flag(body_contact, scene) -> bool:
    """Whether the bodies of `scene` meet each other (`Scene.build(body_contact=...)`)."""
    if body_contact is not None and not isinstance(body_contact, (bool, np.bool_)):
        raise TypeError(f"body_contact must be True, False or None, got {body_contact!r}")
    if body_contact is False or scene.num_bodies < 2:
        return False
    problems = hull_problems(scene.vertex_body, scene.body_faces, scene.body_vertices, scene.num_bodies)
    if problems:
        i, what = next(iter(problems.items()))
        message = (f"rigid body {i} cannot be a solid for body contact: {what}; body contact tests each hull "
                   "vertex against the other bodies' face planes, so hulls must be closed and convex (give the body "
                   "its convex hull)")
        if body_contact:
            raise ValueError(message)
        warnings.warn(message + "; the bodies will not collide with each other (body_contact=False silences this)",
                      UserWarning, stacklevel=3)
        return False
    return True


def rigid_contact_model(rigid_contact, ground: bool, bodies: int) -> str:
    """The bodies' contact model for `Scene.build`: "penalty" with a ground, "none" without one; a given one
    must agree with `ground` (ValueError)."""
    if rigid_contact is None:
        return "penalty" if ground else "none"
    if rigid_contact not in CONTACT_MODELS:
        raise ValueError(f"rigid_contact must be one of {', '.join(CONTACT_MODELS)}, got {rigid_contact!r}")
    if bodies and not ground and rigid_contact != "none":
        raise ValueError(f"rigid_contact={rigid_contact!r} is the bodies' contact with the ground, but ground=False: "
                         "pass ground=True (one ground for every component), or rigid_contact='none'")
    if bodies and ground and rigid_contact == "none":
        raise ValueError("ground=True, but rigid_contact='none' lets the bodies fall through it: leave "
                         "rigid_contact out (penalty) or choose 'penalty' or 'impulse', or pass ground=False")
    return rigid_contact


def particle_contact_flag(particle_body_contact, scene) -> bool:
    """Whether the particles of `scene` meet its bodies (`Scene.build(particle_body_contact=...)`): the same
    rule as `body_contact_flag` for a scene with particles and bodies."""
    if particle_body_contact is not None and not isinstance(particle_body_contact, (bool, np.bool_)):
        raise TypeError(f"particle_body_contact must be True, False or None, got {particle_body_contact!r}")
    if particle_body_contact is False or scene.num_bodies == 0 or len(scene.x) == 0:
        return False
    problems = hull_problems(scene.vertex_body, scene.body_faces, scene.body_vertices, scene.num_bodies)
    if problems:
        i, what = next(iter(problems.items()))
        message = (f"rigid body {i} cannot be a solid for the particles: {what}; particle-body contact tests each "
                   "particle against the bodies' face planes, so hulls must be closed and convex")
        if particle_body_contact:
            raise ValueError(message)
        warnings.warn(message + "; the particles will pass through the bodies (particle_body_contact=False "
                      "silences this)", UserWarning, stacklevel=3)
        return False
    return True


def smoothing_length(contact_smoothing) -> float:
    """`Scene.build(contact_smoothing=...)` as a float (m): finite and >= 0, else a ValueError naming it."""
    try:
        value = float(contact_smoothing)
    except (TypeError, ValueError):
        raise ValueError(f"contact_smoothing must be a length in m, got {contact_smoothing!r}") from None
    if not np.isfinite(value) or value < 0.0:
        raise ValueError(f"contact_smoothing must be finite and >= 0 (m), got {value}")
    return value
