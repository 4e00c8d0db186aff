"""The containers of a simulation: `Topology` (structure), `Params` (physical data), `State`, `Control`.

Each is a tree with one branch per component, each branch defined beside its physics:

| branch    | Topology              | Params                    | State           | Control           |
|-----------|-----------------------|---------------------------|-----------------|-------------------|
| world     |                       | `World` (gravity, ground) |                 |                   |
| particles | `ParticleTopology`    | `ParticleParams`          | `ParticleState` | `ParticleControl` |
| springs   | `SpringTopology`      | `SpringParams`            |                 |                   |
| cloth     | `ClothTopology`       | `ClothParams`             |                 | `ClothControl`    |
| contact   |                       | `ContactParams`           |                 |                   |
| rigid     | `RigidTopology`       | `RigidParams`             | `RigidState`    | `RigidControl`    |
| fem       | `FemTopology`         | `FemParams`               |                 | `FemControl`      |
| ode       | `OdeTopology`         | the system's (any pytree) | its y (pytree)  |                   |
| smoke     | `SmokeTopology`       | `SmokeParams`             | `SmokeState`    |                   |
| colliders | `ColliderTopology`    | `ColliderParams`          | `ColliderState` |                   |
| bodies    | {kind name: branch}   | {kind name: branch}       | {kind: branch}  |                   |
| wind      | `wind` (a flag)       | `WindParams`              |                 |                   |

A scene without a component carries an empty branch (zero-length arrays) and pays nothing for it: force
terms are summed only for the elements a scene has (`gradsim_jax.physics.forces`). FEM tetrahedra, like
cloth, are made of particles: their positions and velocities are the particle state, so they need no State
branch (and get the particles' ground contact). The ode branch is optional (None: none): a body whose motion is
an ODE in its own coordinates (a pendulum, a bouncing ball, a user's system), integrated apart by `simulate`
(`physics.ode`). So is the smoke branch (None: none): 2-D smoke on a grid (`physics.smoke`), stepped apart by
`simulate` (`smoke_substeps` solver steps a frame); its topology is static (the grid's shape and solver). So
is the colliders branch (None: none): static planes, spheres, boxes and capsules that the particles collide
with (`physics.colliders`); its topology (the kinds) is static. So is the bodies branch (None: none): the
branches of body kinds defined outside the package (`physics.component.ExtraBodyKind`), by kind name. Every
kind of body and what it owns is declared in `physics.components.COMPONENTS`.

Conventions (used throughout the package):
- SI units, y axis up, gravity (0, -9.81, 0) m/s^2 by default.
- Index arrays are int32 data (traced, never baked into the program); counts are their static shapes.
- `Params` holds every float that a fit may differentiate. Derived quantities (inverse masses, rest-shape
  matrices, rest areas) are computed from `Params` inside each call, never stored.
- Quaternions are stored w, x, y, z.

All are frozen dataclasses registered as pytrees; change them with `dataclasses.replace`, or a leaf by its
dotted path with `replace_paths(params, {"cloth.tri_ke": value})`.
"""

from __future__ import annotations

from typing import Any, Optional

import jax.numpy as jnp

from gradsim_jax.physics.cloth import ClothControl, ClothParams, ClothTopology
from gradsim_jax.physics.collider_motion import ColliderState
from gradsim_jax.physics.colliders import ColliderParams, ColliderTopology
from gradsim_jax.physics.contact import ContactParams
from gradsim_jax.physics.fem import FemControl, FemParams, FemTopology
from gradsim_jax.physics.ode import OdeTopology
from gradsim_jax.physics.smoke import SmokeParams, SmokeState, SmokeTopology
from gradsim_jax.physics.selfcontact import SelfContactParams, SelfContactTopology
from gradsim_jax.physics.rigid import RigidControl, RigidParams, RigidState, RigidTopology
from gradsim_jax.physics.particles import ParticleControl, ParticleParams, ParticleState, ParticleTopology
from gradsim_jax.physics.springs import SpringParams, SpringTopology
from gradsim_jax.physics.wind import WindParams
from gradsim_jax.physics.world import World
from gradsim_jax.typing import pytree_dataclass


@pytree_dataclass(meta=("ground", "smoke", "colliders", "wind"))
class Topology:
    """Static structure: particles (pinned flags), springs (pairs), cloth (triangles, bending edges,
    aerodynamics flag), rigid (hull vertices' bodies, faces, pushes' bodies, contact model), fem (tets,
    surface triangles); `ground` (static): whether particles collide with the ground plane (bodies:
    `RigidTopology.contact`); ode (an ODE body, None: none); smoke (static `SmokeTopology`, None: none);
    colliders (None: none); self_contact (None: none); bodies ({kind name: branch} of kinds defined outside the
    package, None: none); `wind` (static): whether a wind pushes the cloth's faces (`physics.wind`; its
    `Params.wind`)."""

    particles: ParticleTopology
    springs: SpringTopology
    cloth: ClothTopology
    rigid: RigidTopology
    fem: FemTopology
    ground: bool = False
    ode: Optional[OdeTopology] = None
    smoke: Optional[SmokeTopology] = None
    colliders: Optional[ColliderTopology] = None
    self_contact: Optional[SelfContactTopology] = None
    bodies: Optional[dict] = None
    wind: bool = False

    @property
    def num_particles(self) -> int:
        return self.particles.count


@pytree_dataclass
class Params:
    """Physical parameters: a float tree, the only thing a fit differentiates, one branch per component (each
    branch class documents its fields, units and shapes): world (gravity [3] m/s^2, the ground plane),
    particles (mass [n] kg, radius m, ...), springs (ke, kd, rest [s]), cloth (membrane tri_ke, tri_ka, tri_kd
    [t], bending bend_ke, bend_kd [e], aerodynamic tri_drag, tri_lift, rest shape), contact (ground ke, kd,
    kf, mu), rigid (mass [b] kg, gyration, hull vertices, contact coefficients and restitution per body), fem
    (Lame k_mu, k_lambda [k] Pa, damping k_damp [k] Pa s, activation, rest shape, particle volumes); ode (the
    system's parameters, None: none); smoke (`SmokeParams`: buoyancy, dissipation, vorticity, inflow; None:
    none); colliders, self_contact (None: none); bodies ({kind name: branch} of kinds defined outside the
    package, None: none); wind (`WindParams`: direction, strength Pa, keyframes; None: none)."""

    world: World
    particles: ParticleParams
    springs: SpringParams
    cloth: ClothParams
    contact: ContactParams
    rigid: RigidParams
    fem: FemParams
    ode: Any = None
    smoke: Optional[SmokeParams] = None
    colliders: Optional[ColliderParams] = None
    self_contact: Optional[SelfContactParams] = None
    bodies: Optional[dict] = None
    wind: Optional[WindParams] = None


@pytree_dataclass
class State:
    """Time-varying state carried by `lax.scan`: particles (x [n, 3] m, v [n, 3] m/s) and rigid bodies
    (x [b, 3] m, q [b, 4] wxyz, v [b, 3] m/s, w [b, 3] rad/s); an ODE body's y
    (None: none, `physics.ode`); the smoke (`SmokeState`: u, v [ny, nx] m/s, density [ny, nx]; None: none); the
    kinematic colliders' pose (`ColliderState`, `physics.collider_motion`; None: none moves); bodies ({kind
    name: branch} of kinds defined outside the package; None: none)."""

    particles: ParticleState
    rigid: RigidState
    ode: Any = None
    smoke: Optional[SmokeState] = None
    colliders: Optional[ColliderState] = None
    bodies: Optional[dict] = None


@pytree_dataclass
class Control:
    """Per-step inputs, by component; None means none: particles (`ParticleControl`: force [n, 3] N on each
    particle, velocities [n, 3] m/s of the pinned ones), cloth (`ClothControl`: triangle activations [t] and
    offsets of the bending rest angles [e] rad), rigid
    (`RigidControl`: force [b, 3] N and torque [b, 3] N m on each body), fem (`FemControl`: tet activations
    [k]). A control is held over the substeps of a frame."""

    particles: Optional[ParticleControl] = None
    cloth: Optional[ClothControl] = None
    rigid: Optional[RigidControl] = None
    fem: Optional[FemControl] = None


def empty_rigid_state(dtype) -> RigidState:
    """The rigid branch of a scene without bodies.

    Args:
        dtype: the float dtype of the (empty) leaves.

    Returns:
        A `RigidState` of zero bodies.
    """
    return RigidState(x=jnp.zeros((0, 3), dtype), q=jnp.zeros((0, 4), dtype), v=jnp.zeros((0, 3), dtype),
                      w=jnp.zeros((0, 3), dtype))


def particle_state(x, v) -> State:
    """The State of a scene of particles only (an empty rigid branch).

    Args:
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.

    Returns:
        The `State`.
    """
    dtype = jnp.result_type(x, v) if jnp.issubdtype(jnp.result_type(x, v), jnp.floating) else jnp.zeros(()).dtype
    return State(particles=ParticleState(x=x, v=v), rigid=empty_rigid_state(dtype))
