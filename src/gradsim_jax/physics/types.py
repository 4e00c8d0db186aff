"""The three containers of a simulation: `Topology` (structure), `Params` (physical data), `State`.

Conventions (used throughout the package):
- SI units, y axis up, gravity (0, -9.81, 0) m/s^2 by default.
- Particles: positions `x: [n, 3] m`, velocities `v: [n, 3] m/s`, `mass: [n] kg`.
- Index arrays are int32 data (traced, never baked into the program); counts are their static shapes, so
  a scene without triangles pays nothing for the membrane term.
- `Params` holds every float that a fit may differentiate. Derived quantities (inverse masses, rest-shape
  matrices, rest areas) are computed from `Params` inside each call, never stored.
- Quaternions (rigid bodies, later) are stored w, x, y, z.

All three are frozen dataclasses registered as pytrees; change them with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax

Array = Any


def _pytree(cls=None, *, meta=()):
    """Freeze `cls` and register it as a pytree whose fields are data, except those named in `meta`."""

    def wrap(c):
        c = dataclasses.dataclass(frozen=True)(c)
        names = [f.name for f in dataclasses.fields(c)]
        return jax.tree_util.register_dataclass(
            c, data_fields=[n for n in names if n not in meta], meta_fields=list(meta)
        )

    return wrap if cls is None else wrap(cls)


@_pytree(meta=("ground", "aerodynamics"))
class Topology:
    """Static structure of a particle scene.

    Attributes:
      springs: [s, 2] int32 particle indices (i, j).
      triangles: [t, 3] int32 particle indices (p, q, r) of membrane triangles.
      bend_edges: [e, 4] int32 (x1, x2, x3, x4): x1, x2 the vertices opposite the shared edge (x3, x4).
      pinned: [n] bool; pinned particles are kinematic (they move only with `Control.pinned_velocity`).
      ground: static flag; when True particles collide with the ground plane.
      aerodynamics: static flag; when True triangles feel drag and lift (`Params.tri_drag`, `tri_lift`).
    """

    springs: Array
    triangles: Array
    bend_edges: Array
    pinned: Array
    ground: bool = False
    aerodynamics: bool = False

    @property
    def num_particles(self) -> int:
        return self.pinned.shape[-1]


@_pytree
class Params:
    """Physical parameters: a float pytree, the only thing a fit differentiates.

    Particles: `mass [n] kg` (0 means kinematic, like `pinned`), `gravity [3] m/s^2`,
    `damping` (scalar, 1/s: linear drag acceleration -damping * v on free particles).
    Springs: `spring_ke [s] N/m`, `spring_kd [s] N s/m`, `spring_rest [s] m`.
    Membrane (per triangle): `tri_ke` (k_mu, Pa m... i.e. N/m, scaled by rest area), `tri_ka` (k_lambda),
    `tri_kd` (k_damp), `tri_activation` (target-area shift), `tri_drag`, `tri_lift` (aerodynamics),
    and `rest_x [n, 3] m`, the rest configuration the triangles' rest shapes are taken from.
    Bending (per interior edge): `bend_ke`, `bend_kd`, `bend_rest` (rest dihedral angle, rad).
    Ground contact: `contact_ke`, `contact_kd`, `contact_kf`, `contact_mu`, `ground_height` (m),
    `ground_normal [3]` (normalized on use), `particle_radius` (m).
    """

    mass: Array
    gravity: Array
    damping: Array
    spring_ke: Array
    spring_kd: Array
    spring_rest: Array
    tri_ke: Array
    tri_ka: Array
    tri_kd: Array
    tri_activation: Array
    tri_drag: Array
    tri_lift: Array
    rest_x: Array
    bend_ke: Array
    bend_kd: Array
    bend_rest: Array
    contact_ke: Array
    contact_kd: Array
    contact_kf: Array
    contact_mu: Array
    ground_height: Array
    ground_normal: Array
    particle_radius: Array


@_pytree
class State:
    """Time-varying state carried by `lax.scan`: `x [n, 3] m`, `v [n, 3] m/s`."""

    x: Array
    v: Array


@_pytree
class Control:
    """Per-step inputs (all optional; None means none).

    `force [n, 3] N`: external force on each particle (a known push).
    `tri_activation [t]`: added to `Params.tri_activation` (muscles).
    `pinned_velocity [n, 3] m/s`: velocity of pinned particles (a kinematic path); 0 when None.
    """

    force: Optional[Array] = None
    tri_activation: Optional[Array] = None
    pinned_velocity: Optional[Array] = None
