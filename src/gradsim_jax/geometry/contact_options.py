"""The contact options of `Scene.build`, checked: which model the bodies meet the ground with, whether they meet
each other, and whether the particles meet them."""

from __future__ import annotations

import warnings

import numpy as np

from gradsim_jax.physics.bodycontact import hull_problems
from gradsim_jax.physics.rigid import CONTACT_MODELS


def _solid_flag(name: str, value, scene, applies: bool, solid_for: str, reason: str, without: str) -> bool:
    """A `Scene.build` flag that needs closed convex hulls: TypeError unless True, False or None; False where it
    does not apply; else the hulls' first problem (`hull_problems`) is a ValueError when asked for (True) and a
    warning and False by default (None)."""
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True, False or None, got {value!r}")
    if value is False or not applies:
        return False
    problems = hull_problems(scene.vertex_body, scene.body_faces, scene.body_vertices, scene.num_bodies)
    if not problems:
        return True
    i, what = next(iter(problems.items()))
    message = f"rigid body {i} cannot be a solid for {solid_for}: {what}; {reason}"
    if value:
        raise ValueError(message)
    warnings.warn(f"{message}; {without} ({name}=False silences this)", UserWarning, stacklevel=5)
    return False


def body_contact_flag(body_contact, scene) -> bool:
    """Whether the bodies of `scene` meet each other (`Scene.build(body_contact=...)`).

    Args:
        body_contact: True, False or None (`Contact.body_contact`).
        scene: the host `Scene`.

    Returns:
        Whether they meet.
    """
    return _solid_flag("body_contact", body_contact, scene, scene.num_bodies >= 2, "body contact",
                       "body contact tests each hull vertex against the other bodies' face planes, so hulls must be "
                       "closed and convex (give the body its convex hull)",
                       "the bodies will not collide with each other")


def rigid_contact_model(rigid_contact, ground: bool, bodies: int) -> str:
    """The bodies' contact model for `Scene.build`: "penalty" with a ground, "none" without one; a given one
    must agree with `ground` (ValueError).

    Args:
        rigid_contact: "penalty", "impulse", "none" or None (`Contact.rigid_model`).
        ground: whether the scene has a ground.
        bodies: the number of rigid bodies.

    Returns:
        The contact model's name.
    """
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
    rule as `body_contact_flag` for a scene with particles and bodies.

    Args:
        particle_body_contact: True, False or None (`Contact.particle_body_contact`).
        scene: the host `Scene`.

    Returns:
        Whether they meet.
    """
    return _solid_flag("particle_body_contact", particle_body_contact, scene,
                       scene.num_bodies > 0 and len(scene.x) > 0, "the particles",
                       "particle-body contact tests each particle against the bodies' face planes, so hulls must be "
                       "closed and convex", "the particles will pass through the bodies")


def smoothing_length(contact_smoothing) -> float:
    """`Scene.build(contact_smoothing=...)` as a float (m): finite and >= 0, else a ValueError naming it.

    Args:
        contact_smoothing: m, the smoothing length given (`Contact.smoothing`).

    Returns:
        It as a float, m.
    """
    try:
        value = float(contact_smoothing)
    except (TypeError, ValueError):
        raise ValueError(f"contact_smoothing must be a length in m, got {contact_smoothing!r}") from None
    if not np.isfinite(value) or value < 0.0:
        raise ValueError(f"contact_smoothing must be finite and >= 0 (m), got {value}")
    return value
