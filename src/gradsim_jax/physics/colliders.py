"""Shapes that particles (cloth and soft-body vertices) collide with: planes, spheres, boxes, capsules and closed
triangle meshes (`physics.mesh_collider`).

A collider is a shape at a pose: `ColliderTopology.kinds` (static: one of COLLIDER_KINDS per collider) and
`ColliderParams` (data: position [k, 3] m, rotation [k, 4] unit quaternions w, x, y, z, size [k, 3] m, and the
contact's ke, kd, kf, mu [k]). In its own frame (p = R^T (x - position)):

| kind      | size                         | signed distance d(p) (m; < 0 inside)                               |
|-----------|------------------------------|--------------------------------------------------------------------|
| "plane"   | unused                       | p_y: the plane y = 0 of the frame, its normal the frame's +y        |
| "sphere"  | (radius, -, -)               | abs(p) - radius                                                    |
| "box"     | (half extents x, y, z)       | abs(max(q, 0)) + min(max_i q_i, 0), q = abs(p) - half extents      |
| "capsule" | (radius, half height, -)     | distance to the segment (0, +-half height, 0), less the radius      |
| "mesh"    | (scale x, y, z)              | distance to the closed triangle mesh, negative inside (winding)     |

Each is the exact Euclidean signed distance of its shape (a box's too, inside and out), and its outward
normal is the distance's gradient, written out in closed form with a fixed choice where the gradient is
undefined (the sphere's centre: +y; a capsule's axis: +x; inside a box, the face of the largest q; a tie:
the first axis), so that forces and their derivatives stay finite everywhere.

Contact is the ground's penalty model (`physics.contact`, PHYSICS.md "Ground contact") against the shape's
surface, with the collider's own coefficients: penetration c = min(d - particle radius, 0), normal force
c ke with approach damping kd, isotropic Coulomb friction of viscous slope kf up to mu |fn|; damping and
friction integrated backward over the step when the integrator asks (`implicit_penalty_force`). A particle
touching several colliders gets the sum of their forces. The coefficients are those of the pair: NVIDIA Warp
averages a particle's and a shape's (`0.5 (particle_ke + shape_ke)` and likewise for kd, kf, mu); give the
average to match it. One law differs from Warp 1.8.1's particle-shape kernel (`eval_particle_contacts`, which
also serves its particles against rigid bodies): it caps friction at mu |c ke|, the elastic force alone, where
this module (and Warp's ground kernel) caps it at mu |c ke + kd min(vn, 0)|. The two agree except while the
contact damps an approach (vn < 0 with kd > 0) and the cap binds (kf |vt| > mu |c ke|): on Warp's cloth-on-
sphere scene with friction (docs: concepts/physics, "Colliders"), 48 of 41107 particle-steps in contact.

A collider is static (it stays where `ColliderParams` puts them) or kinematic, moved by keyframes
(`physics.collider_motion`: damping and friction then act on the velocity relative to its surface). Every float
in `ColliderParams` is data a fit may differentiate (e.g. `colliders.mu`, a keyframe's position).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_norm, safe_normalize
from gradsim_jax.physics.collider_motion import surface_velocity
from gradsim_jax.physics.collider_templates import capsule_template, icosphere, uv_sphere
from gradsim_jax.physics.contact import implicit_penalty_force, max_stable_dt, penalty_force
from gradsim_jax.physics.mesh_collider import mesh_distance
from gradsim_jax.physics.quaternion import quat_conjugate, quat_rotate
from gradsim_jax.typing import Array, is_concrete, pytree_dataclass

COLLIDER_KINDS = ("plane", "sphere", "box", "capsule", "mesh")


@dataclasses.dataclass(frozen=True)
class ColliderTopology:
    """The colliders' kinds, one of COLLIDER_KINDS each, and for each "mesh" its `StaticMesh` (`meshes`: one entry
    per collider, None for the other kinds; static, hashable); `segments`, one entry per collider: a sphere's UV
    tessellation (segments, rings) as Blender builds it (`collider_templates.uv_sphere`: what it is drawn with and what
    `physics.impulse_contact` meets), or None (a sphere's icosphere; the other kinds)."""

    kinds: tuple
    meshes: tuple = ()
    segments: tuple = ()

    def __post_init__(self):
        kinds = tuple(self.kinds)
        unknown = [k for k in kinds if k not in COLLIDER_KINDS]
        if unknown:
            raise ValueError(f"collider kinds must be among {', '.join(COLLIDER_KINDS)}; got {unknown[0]!r}")
        object.__setattr__(self, "kinds", kinds)
        meshes = tuple(self.meshes) or (None,) * len(kinds)
        if len(meshes) != len(kinds) or any((m is not None) != (k == "mesh") for k, m in zip(kinds, meshes)):
            raise ValueError("ColliderTopology.meshes must hold a StaticMesh for each \"mesh\" collider and None "
                             "for the others")
        object.__setattr__(self, "meshes", meshes)
        segments = tuple(None if s is None else (int(s[0]), int(s[1])) for s in self.segments) or (None,) * len(kinds)
        if len(segments) != len(kinds) or any(s is not None and (k != "sphere" or min(s) < 3)
                                              for k, s in zip(kinds, segments)):
            raise ValueError("ColliderTopology.segments must hold, per collider, None or a sphere's UV tessellation "
                             "(segments, rings), each at least 3")
        object.__setattr__(self, "segments", segments)

    def indices(self, kind: str) -> np.ndarray:
        """The colliders of `kind` (int32 indices, static).

        Args:
            kind: one of COLLIDER_KINDS.

        Returns:
            [m] int32 numpy array, the positions in `kinds` of the colliders of that kind (increasing).
        """
        return np.array([i for i, k in enumerate(self.kinds) if k == kind], np.int32)


@pytree_dataclass
class ColliderParams:
    """position [k, 3] m (a point of the plane; the centre of the others), rotation [k, 4] (w, x, y, z; need not
    be normalized), size [k, 3] m (module table), and the contact's ke [k] N/m, kd [k] N s/m, kf [k] N s/m
    (friction's viscous slope), mu [k] (Coulomb). Kinematic colliders (`physics.collider_motion`): key_times [K] s,
    key_position [k, K, 3] m, key_rotation [k, K, 4]; velocity [k, 3] m/s and omega [k, 3] rad/s, the pose's rates
    at the current step (set by the integrator). None (the default) for static colliders."""

    position: Array
    rotation: Array
    size: Array
    ke: Array
    kd: Array
    kf: Array
    mu: Array
    velocity: Optional[Array] = None
    omega: Optional[Array] = None
    key_times: Optional[Array] = None
    key_position: Optional[Array] = None
    key_rotation: Optional[Array] = None


def collider_params(count: int, *, position=None, rotation=None, size=None, ke=1.0e3, kd=10.0, kf=10.0, mu=0.5,
                    dtype=jnp.float32) -> ColliderParams:
    """ColliderParams of `count` colliders: each field broadcast to its shape (defaults: at the origin,
    unrotated, unit size; Warp's soft-contact ke 1e3, kd 10, kf 10 and mu 0.5).

    Args:
        count: k, the number of colliders.
        position: [k, 3] or broadcastable, m, a point of each plane, the centre of the other shapes; None: the
            origin.
        rotation: [k, 4] or broadcastable, quaternions (w, x, y, z), need not be normalized; None: unrotated.
        size: [k, 3] or broadcastable, m (a mesh's: dimensionless scale), as in the module's table; None: 1.
        ke: [k] or scalar, N/m, contact stiffness.
        kd: [k] or scalar, N s/m, contact damping.
        kf: [k] or scalar, N s/m, friction's viscous slope.
        mu: [k] or scalar, dimensionless Coulomb friction coefficient.
        dtype: the floating dtype of every field.

    Returns:
        The ColliderParams (static: no keyframes, velocity or omega).
    """
    def field(value, shape, default):
        return jnp.broadcast_to(jnp.asarray(default if value is None else value, dtype), shape)

    return ColliderParams(
        position=field(position, (count, 3), 0.0), rotation=field(rotation, (count, 4), [1.0, 0.0, 0.0, 0.0]),
        size=field(size, (count, 3), 1.0), ke=field(ke, (count,), 0.0), kd=field(kd, (count,), 0.0),
        kf=field(kf, (count,), 0.0), mu=field(mu, (count,), 0.0))


def _unit(rotation):
    return rotation / jnp.maximum(safe_norm(rotation, keepdims=True), 1e-30)


def _axis(index, like):
    """The unit vector along local axis `index` [...] (int), shaped like `like` [..., 3]."""
    return (jnp.arange(3) == index[..., None]).astype(like.dtype)


def local_distance(kind: str, p, size):
    """(signed distance [...] m, outward unit normal [..., 3]) of points p [..., 3] in a collider's frame; size
    [..., 3] broadcasts against p (the module's table).

    Args:
        kind: "plane", "sphere", "capsule" or "box" (ValueError otherwise; meshes go through `mesh_distance`).
        p: [..., 3] m, points in the collider's frame.
        size: [..., 3] m, the collider's size as in the module's table, broadcasting against `p`.

    Returns:
        (distance [...] m, negative inside; normal [..., 3] unit outward normals in the collider's frame).
    """
    up = jnp.zeros_like(p).at[..., 1].set(1.0)
    if kind == "plane":
        return p[..., 1], up
    if kind == "sphere":
        r = safe_norm(p)
        return r - size[..., 0], jnp.where((r > 0.0)[..., None], safe_normalize(p), up)
    if kind == "capsule":
        half = size[..., 1]
        rel = p - jnp.clip(p[..., 1], -half, half)[..., None] * up
        r = safe_norm(rel)
        side = jnp.zeros_like(p).at[..., 0].set(1.0)
        return r - size[..., 0], jnp.where((r > 0.0)[..., None], safe_normalize(rel), side)
    if kind == "box":
        sign = jnp.where(p >= 0.0, 1.0, -1.0).astype(p.dtype)
        q = jnp.abs(p) - size
        out = jnp.maximum(q, 0.0)
        largest = jnp.max(q, axis=-1)
        distance = safe_norm(out) + jnp.minimum(largest, 0.0)
        inside = _axis(jnp.argmax(q, axis=-1), p) * sign
        return distance, jnp.where((largest > 0.0)[..., None], safe_normalize(out * sign), inside)
    raise ValueError(f"unknown collider kind {kind!r}")


def collider_distance(topology: ColliderTopology, params: ColliderParams, x):
    """(signed distance [n, k] m, outward unit normal [n, k, 3] in world axes) of points x [n, 3] to every
    collider, in the order of `topology.kinds`.

    Args:
        topology: the colliders' kinds and meshes.
        params: the colliders' poses and sizes (position [k, 3] m, rotation [k, 4], size [k, 3]).
        x: [n, 3] m, world points.

    Returns:
        (distance [n, k] m, negative inside; normal [n, k, 3] unit outward normals in world axes).
    """
    k = len(topology.kinds)
    n = x.shape[0]
    distance = jnp.zeros((n, k), x.dtype)
    normal = jnp.zeros((n, k, 3), x.dtype)
    for i in topology.indices("mesh"):  # one at a time: each its own triangles
        q = _unit(params.rotation[i])
        local = quat_rotate(quat_conjugate(q)[None], x - params.position[i][None])
        d, nl = mesh_distance(topology.meshes[i], local, params.size[i])
        distance, normal = distance.at[:, i].set(d), normal.at[:, i].set(quat_rotate(q[None], nl))
    for kind in COLLIDER_KINDS[:-1]:
        idx = topology.indices(kind)
        if idx.size == 0:
            continue
        q = _unit(params.rotation[idx])  # [m, 4]
        local = quat_rotate(quat_conjugate(q)[None], x[:, None, :] - params.position[idx][None])  # [n, m, 3]
        d, nl = local_distance(kind, local, params.size[idx][None])
        if idx.size == k:  # one kind, no scatter: 100 spheres on a 64 x 64 cloth 15.6 -> 6.7 ms a step
            return d, quat_rotate(q[None], nl)
        distance = distance.at[:, idx].set(d)
        normal = normal.at[:, idx].set(quat_rotate(q[None], nl))
    return distance, normal


def collider_contact(topology, params, x, v, *, v_free=None, inv_mass=None, dt=None):
    """Contact forces [n, 3] N of the scene's colliders (`Topology.colliders`, `Params.colliders`) on particles
    at x [n, 3] m: explicit at the velocities v (v_free None), else with damping and friction integrated
    backward over dt (`implicit_penalty_force`; v_free [n, 3], inv_mass [n]). Summed over colliders.

    Args:
        topology: the scene's Topology; uses `topology.colliders`.
        params: the scene's Params; uses `params.colliders`, `params.particles.radius` (m) and
            `params.world.contact_smoothing`.
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities (used when `v_free` is None).
        v_free: [n, 3] m/s, the velocities at the end of the step without contact (implicit mode), or None for
            explicit forces.
        inv_mass: [n] 1/kg, inverse particle masses (implicit mode; 0 for kinematic particles).
        dt: () s, the step (implicit mode).

    Returns:
        [n, 3] N, the contact force on each particle, summed over colliders.
    """
    col = params.colliders
    d, normal = collider_distance(topology.colliders, col, x)
    c = d - params.particles.radius
    surface = surface_velocity(col, x)  # moving colliders: velocities relative to their surface
    relative = (lambda u: u[:, None, :]) if surface is None else (lambda u: u[:, None, :] - surface)
    if v_free is None:
        f = penalty_force(normal, c, relative(v), col.ke, col.kd, col.kf, col.mu, params.world.contact_smoothing)
    else:
        f = implicit_penalty_force(normal, c, relative(v_free), inv_mass[:, None], dt, col.ke, col.kd, col.kf,
                                   col.mu, params.world.contact_smoothing)
    return jnp.sum(f, axis=1)


def validate_colliders(topology: ColliderTopology, params: ColliderParams) -> None:
    """ValueError naming the field (and collider) for shapes that do not match the kinds, non-finite values,
    non-positive sizes (a sphere's or capsule's radius, a box's half extents; a capsule's half height may be 0),
    a zero rotation, or negative contact coefficients. Concrete params only (traced ones are not checked).

    Args:
        topology: the colliders' kinds (k of them).
        params: the colliders' parameters to check (shapes always, values when concrete).
    """
    k = len(topology.kinds)
    shapes = {"position": (k, 3), "rotation": (k, 4), "size": (k, 3), "ke": (k,), "kd": (k,), "kf": (k,),
              "mu": (k,)}
    for name, shape in shapes.items():
        got = tuple(np.shape(getattr(params, name)))
        if got != shape:
            raise ValueError(f"colliders.{name} must have shape {shape} for {k} collider(s); got {got}")
    if params.key_times is not None:
        K = int(np.shape(params.key_times)[0]) if np.ndim(params.key_times) == 1 else -1
        for name, shape in (("key_times", (K,)), ("key_position", (k, K, 3)), ("key_rotation", (k, K, 4))):
            got = tuple(np.shape(getattr(params, name)))
            if K < 1 or got != shape:
                raise ValueError(f"colliders.{name} must have shape {shape} for {k} collider(s) and {K} keys; got {got}")
    if not is_concrete(params):
        return
    if params.key_times is not None:
        times = np.asarray(params.key_times, np.float64)
        keys = [np.asarray(getattr(params, n), np.float64) for n in ("key_position", "key_rotation")]
        if not (np.isfinite(times).all() and all(np.isfinite(a).all() for a in keys)):
            raise ValueError("colliders' keyframes (key_times, key_position, key_rotation) must be finite")
        if np.any(np.diff(times) <= 0):
            raise ValueError(f"colliders.key_times must increase; got {times.tolist()}")
        if np.any(np.linalg.norm(keys[1], axis=-1) == 0):
            raise ValueError("colliders.key_rotation holds a zero quaternion")
    values = {name: np.asarray(getattr(params, name), np.float64) for name in shapes}
    for name, value in values.items():
        bad = np.flatnonzero(~np.isfinite(value).reshape(k, -1).all(axis=1))
        if bad.size:
            raise ValueError(f"colliders.{name} of collider {bad[0]} ({topology.kinds[bad[0]]}) is not finite")
    for name in ("ke", "kd", "kf", "mu"):
        bad = np.flatnonzero(values[name] < 0.0)
        if bad.size:
            raise ValueError(f"colliders.{name} of collider {bad[0]} must be >= 0; got {values[name][bad[0]]:.4g}")
    bad = np.flatnonzero(np.linalg.norm(values["rotation"], axis=1) == 0.0)
    if bad.size:
        raise ValueError(f"colliders.rotation of collider {bad[0]} is the zero quaternion")
    needs = {"sphere": ((0, "radius"),), "box": ((0, "half extent x"), (1, "half extent y"), (2, "half extent z")),
             "mesh": ((0, "scale x"), (1, "scale y"), (2, "scale z")),
             "capsule": ((0, "radius"),)}
    for i, kind in enumerate(topology.kinds):
        for axis, what in needs.get(kind, ()):
            if values["size"][i, axis] <= 0.0:
                raise ValueError(f"colliders.size of collider {i} ({kind}): its {what} must be > 0; got "
                                 f"{values['size'][i, axis]:.4g}")
        if kind == "capsule" and values["size"][i, 1] < 0.0:
            raise ValueError(f"colliders.size of collider {i} (capsule): its half height must be >= 0; got "
                             f"{values['size'][i, 1]:.4g}")


# ------------------------------------------------------------------------------------------------
# Meshes that show the colliders in a video (`render.mesh.scene_vertices`). Planes are not drawn (unbounded).
# ------------------------------------------------------------------------------------------------

#: Triangles of a collider's mesh: the sphere an icosphere split twice (320 faces; with `segments`, Blender's UV
#: sphere), the capsule's hemispheres and cylinder (`collider_templates`), the box its 12 triangles.


def _templates():
    box = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64)
    quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    box_faces = np.array([t for a, b, c, d in quads for t in ([a, b, c], [a, c, d])], np.int32)
    sphere, sphere_faces = icosphere(2)
    capsule, sides, capsule_faces = capsule_template()
    return {"sphere": (sphere, np.zeros(len(sphere)), sphere_faces), "box": (box, np.zeros(8), box_faces),
            "capsule": (capsule, sides, capsule_faces)}


_TEMPLATES = _templates()


def _template(topology, i):
    """(unit vertices, sides, faces) of collider i's drawn mesh, or None (a plane)."""
    kind = topology.kinds[i]
    if kind == "mesh":
        mesh = topology.meshes[i]
        return mesh.vertices, np.zeros(len(mesh.vertices)), mesh.faces
    if kind == "sphere" and topology.segments[i] is not None:
        vertices, faces = uv_sphere(*topology.segments[i])
        return vertices, np.zeros(len(vertices)), faces
    return _TEMPLATES.get(kind)


def collider_faces(topology: ColliderTopology) -> np.ndarray:
    """Faces [F, 3] int32 over `collider_vertices` (host side; planes have none).

    Args:
        topology: the colliders' kinds and meshes.

    Returns:
        [F, 3] int32 numpy array of vertex indices into `collider_vertices`.
    """
    parts, offset = [], 0
    for i in range(len(topology.kinds)):
        template = _template(topology, i)
        if template is not None:
            vertices, _, faces = template
            parts.append(faces + offset)
            offset += len(vertices)
    return np.concatenate(parts).astype(np.int32) if parts else np.zeros((0, 3), np.int32)


def collider_owners(topology: ColliderTopology) -> np.ndarray:
    """The collider of each row of `collider_faces` [F] int32 (host side).

    Args:
        topology: the colliders' kinds and meshes.

    Returns:
        [F] int32 numpy array of indices into `topology.kinds`.
    """
    parts = [np.full(len(t[2]), i, np.int32) for i, t in ((i, _template(topology, i)) for i in range(len(topology.kinds)))
             if t is not None]
    return np.concatenate(parts) if parts else np.zeros((0,), np.int32)


def collider_vertex_count(topology: ColliderTopology) -> int:
    """The number of `collider_vertices` (static).

    Args:
        topology: the colliders' kinds and meshes.

    Returns:
        int, V, the rows of `collider_vertices`.
    """
    return sum(len(t[0]) for t in (_template(topology, i) for i in range(len(topology.kinds))) if t is not None)


def collider_vertices(topology: ColliderTopology, params: ColliderParams):
    """World vertices [V, 3] m of the colliders' meshes, in the order of `topology.kinds` (planes have none):
    each template scaled by its size (a capsule's hemispheres moved apart by its half height), rotated and
    placed; differentiable in position, rotation and size.

    Args:
        topology: the colliders' kinds and meshes.
        params: the colliders' poses and sizes (position [k, 3] m, rotation [k, 4], size [k, 3]).

    Returns:
        [V, 3] m, the vertices in world coordinates.
    """
    parts = []
    for i, kind in enumerate(topology.kinds):
        template = _template(topology, i)
        if template is None:
            continue
        unit, sides, _ = template
        size = params.size[i]
        unit = jnp.asarray(unit, size.dtype)
        if kind == "sphere":
            local = size[0] * unit
        elif kind in ("box", "mesh"):
            local = size * unit
        else:
            local = size[0] * unit + jnp.asarray(sides, size.dtype)[:, None] * size[1] * jnp.array([0.0, 1.0, 0.0],
                                                                                                     size.dtype)
        parts.append(params.position[i] + quat_rotate(_unit(params.rotation[i])[None], local))
    if not parts:
        return jnp.zeros((0, 3), params.position.dtype)
    return jnp.concatenate(parts)


#: An initial state counts as starting deep inside a collider when a free particle is deeper than its sag
#: m g / ke plus this fraction of the particle radius (as for the ground: `physics.contact.DEEP_FRACTION`).
DEEP_FRACTION = 0.1


def collider_message(topology, params, state, dt=None, *, implicit: bool = True) -> str:
    """What is wrong with the colliders of a concrete initial `state` (and step `dt` s), or "": free particles
    starting deep inside a collider (the penalty spring would throw them out), or a collider's contact too stiff
    for the step (dt^2 ke / m < 4, with explicit damping + 2 dt kd / m). Host side.

    Args:
        topology: the scene's Topology (colliders, particles.pinned).
        params: the scene's Params (colliders, particles' mass kg and radius m, world.gravity m/s^2).
        state: the scene's concrete initial State (particles.x [n, 3] m).
        dt: s, the step; None skips the stiffness check.
        implicit: True when the integrator integrates contact damping and friction backward (the stiffness
            limit then ignores kd).

    Returns:
        The problems joined by "; ", or "" when there is none.
    """
    if topology.colliders is None or not topology.colliders.kinds:
        return ""
    mass = np.asarray(params.particles.mass, np.float64)
    free = ~np.asarray(topology.particles.pinned) & (mass > 0.0)
    if not free.any():
        return ""
    col = params.colliders
    x = np.asarray(state.particles.x, np.float64)[free]
    d, _ = collider_distance(topology.colliders, col, jnp.asarray(x))
    depth = np.maximum(float(np.asarray(params.particles.radius)) - np.asarray(d, np.float64), 0.0)  # [p, k]
    ke, kd = np.asarray(col.ke, np.float64), np.asarray(col.kd, np.float64)
    m = mass[free]
    weight = float(np.linalg.norm(np.asarray(params.world.gravity, np.float64))) * m
    sag = weight[:, None] / np.where(ke > 0, ke, np.inf)[None]
    deep = depth - sag > DEEP_FRACTION * float(np.asarray(params.particles.radius))
    parts = []
    if deep.any():
        p, k = np.unravel_index(np.argmax(np.where(deep, depth, -1.0)), depth.shape)
        particle = int(np.flatnonzero(free)[p])
        speed = float(np.max(np.where(deep, depth * np.sqrt(ke[None] / m[:, None]), 0.0)))
        parts.append(f"the initial state starts inside collider {k} ({topology.colliders.kinds[k]}): "
                     f"{int(deep.any(axis=1).sum())} free particle(s) deeper than its surface + particle_radius, "
                     f"particle {particle} by {depth[p, k]:.3g} m; the contact force will throw them out at up to "
                     f"{speed:.2g} m/s. Move the collider or the particles apart")
    if dt is not None:
        lightest = float(m.min())
        limit = max_stable_dt(ke, kd, lightest, implicit)
        k = int(np.argmin(limit))
        if float(dt) >= limit[k]:
            factor = int(np.ceil(float(dt) / (0.8 * limit[k])))
            parts.append(f"collider {k} ({topology.colliders.kinds[k]}) is too stiff for the time step: ke "
                         f"{ke[k]:.4g} on a {lightest:.3g} kg particle needs a step below {limit[k]:.3g} s, the step "
                         f"is {float(dt):.3g} s: use {factor} times as many substeps, or a smaller ke")
    return "; ".join(parts)
