"""The options of `Scene.build`, grouped in three frozen records with defaults: `Environment` (gravity, air,
damping, the ground), `Contact` (penalty coefficients, which components meet, self-contact) and `Numerics`
(dtype, incidence tables). `BUILD_SHORTHANDS` maps the flat keyword
names `Scene.build` also takes (`contact_ke=...`) to their record and field (`contact=Contact(ke=...)`).

What the values mean, and how they are checked, is `Scene.build`'s (geometry/scene.py) and
`geometry.contact_options`'."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional


@dataclasses.dataclass(frozen=True)
class Environment:
    """What surrounds the scene.

    Attributes:
        gravity: [3] m/s^2, the acceleration of gravity.
        damping: 1/s, the particles' velocity damping.
        aerodynamics: the cloth's drag and lift term on (True), off (False), or on where any tri_drag or
            tri_lift is nonzero (None).
        membrane: the cloth's membrane (stretch, area and their damping) on (True), off (False), or on unless
            the cloth has triangles whose tri_ke, tri_ka and tri_kd are all 0 (None): a cloth of springs only
            then pays nothing for its triangles (they still render and feel the air).
        bending: the cloth's bending model: "dihedral" (Bridson et al.; bend_ke N m/rad) or "angular" (Blender's
            hinges, explicit in an implicit step; bend_ke N/rad per m of edge, bend_kd N s/m:
            `physics.hinges.angular_bending_forces`).
        ground: whether there is a ground (for every component).
        ground_height: m, the ground's offset along `ground_normal`.
        ground_normal: [3], the ground's normal (normalized on use).
    """

    gravity: Any = (0.0, -9.81, 0.0)
    damping: float = 0.0
    aerodynamics: Optional[bool] = None
    membrane: Optional[bool] = None
    bending: str = "dihedral"
    ground: bool = False
    ground_height: float = 0.0
    ground_normal: Any = (0.0, 1.0, 0.0)


@dataclasses.dataclass(frozen=True)
class Contact:
    """Penalty contact of the particles, and which components meet each other.

    Attributes:
        ke: N/m, the particles' contact stiffness.
        kd: N s/m, their contact damping.
        kf: N s/m, friction's viscous slope.
        mu: 1, the Coulomb friction coefficient.
        particle_radius: m, the particles' contact radius.
        smoothing: m, the distance over which every penalty contact starts smoothly (0: the exact penalty).
        rigid_model: the bodies' contact with the ground, "penalty", "impulse" or "none" (None: "penalty" with
            a ground, "none" without one).
        body_contact: the bodies meet each other: True, False, or None (on where every hull is closed and
            convex).
        particle_body_contact: the particles meet the bodies: True, False, or None (as `body_contact`).
        self_contact: the particles push each other apart closer than two particle radii
            (`physics.selfcontact`).
        self_ke: N/m, the self-contact stiffness.
        self_kd: N s/m, its damping.
        self_capacity: particles self-contact takes per grid cell (`self_contact_overflow` tells when a cell
            holds more).
    """

    ke: float = 1.0e4
    kd: float = 100.0
    kf: float = 100.0
    mu: float = 0.5
    particle_radius: float = 0.01
    smoothing: float = 0.0
    rigid_model: Optional[str] = None
    body_contact: Optional[bool] = None
    particle_body_contact: Optional[bool] = None
    self_contact: bool = False
    self_ke: float = 1.0e3
    self_kd: float = 1.0
    self_capacity: int = 8


@dataclasses.dataclass(frozen=True)
class Numerics:
    """How the device containers are laid out.

    Attributes:
        dtype: the float dtype of every array (None: JAX's default float).
        incidence: corner incidence tables for the element arrays: True, False, or None (for arrays of at least
            `INCIDENCE_MIN_CORNERS` corners, `TRIANGLE_INCIDENCE_MIN_CORNERS` for triangles).
    """

    dtype: Any = None
    incidence: Optional[bool] = None


#: `Scene.build`'s flat keywords: {flat name: (record keyword, field)}.
BUILD_SHORTHANDS = {
    "gravity": ("environment", "gravity"),
    "damping": ("environment", "damping"),
    "aerodynamics": ("environment", "aerodynamics"),
    "membrane": ("environment", "membrane"),
    "bending": ("environment", "bending"),
    "ground": ("environment", "ground"),
    "ground_height": ("environment", "ground_height"),
    "ground_normal": ("environment", "ground_normal"),
    "contact_ke": ("contact", "ke"),
    "contact_kd": ("contact", "kd"),
    "contact_kf": ("contact", "kf"),
    "contact_mu": ("contact", "mu"),
    "particle_radius": ("contact", "particle_radius"),
    "contact_smoothing": ("contact", "smoothing"),
    "rigid_contact": ("contact", "rigid_model"),
    "body_contact": ("contact", "body_contact"),
    "particle_body_contact": ("contact", "particle_body_contact"),
    "self_contact": ("contact", "self_contact"),
    "self_contact_ke": ("contact", "self_ke"),
    "self_contact_kd": ("contact", "self_kd"),
    "self_contact_capacity": ("contact", "self_capacity"),
    "incidence": ("numerics", "incidence"),
    "dtype": ("numerics", "dtype"),
}
