"""Static and kinematic colliders as `Scene` pieces (`physics.colliders`): planes, spheres, boxes and capsules that the cloth
and the soft bodies of a scene collide with."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.rigid import check_closed_mesh
from gradsim_jax.geometry.scene import Scene, as_floats
from gradsim_jax.physics.collider_motion import Keyframes
from gradsim_jax.physics.mesh_collider import StaticMesh
from gradsim_jax.physics.colliders import COLLIDER_KINDS


@dataclasses.dataclass(frozen=True, eq=False)
class Collider:
    """One collider as a `Scene` holds it (host side; `Scene.build` stacks them into `ColliderParams`).

    kind: one of COLLIDER_KINDS ("plane", "sphere", "box", "capsule", "mesh").
    position: [3] m, a point of the plane; the centre of the others (a keyframed collider: its first key's).
    rotation: [4] quaternion w, x, y, z (need not be normalized).
    size: [3] m, the shape's size (`physics.colliders`' table: radius, half extents, radius and half height; a
      mesh's scale).
    ke: N/m, the contact's normal stiffness.
    kd: N s/m, its approach damping.
    kf: N s/m, friction's viscous slope.
    mu: Coulomb friction coefficient.
    """

    kind: str
    position: np.ndarray
    rotation: np.ndarray
    size: np.ndarray
    ke: float
    kd: float
    kf: float
    mu: float

    def param_values(self) -> dict:
        """The collider's values of the `ColliderParams` fields (position, rotation, size, ke, kd, kf, mu)."""
        return {"position": self.position, "rotation": self.rotation, "size": self.size, "ke": self.ke,
                "kd": self.kd, "kf": self.kf, "mu": self.mu}


def collider(kind: str, position=(0.0, 0.0, 0.0), *, rotation=(1.0, 0.0, 0.0, 0.0), size=(1.0, 1.0, 1.0),
             radius=None, half_extents=None, half_height=None, ke: float = 1.0e3, kd: float = 10.0,
             kf: float = 10.0, mu: float = 0.5, keyframes=None, vertices=None, faces=None, segments=None) -> Scene:
    """A collider as a `Scene` piece (`physics.colliders`): kind "plane" (through `position`, normal the
    rotated +y), "sphere" (`radius`), "box" (`half_extents` [3]) or "capsule" (`radius`, `half_height` along the
    rotated y axis); `rotation` a quaternion w, x, y, z; contact coefficients ke N/m, kd N s/m, kf N s/m, mu
    (defaults: Warp's soft contact). `size` [3] may be given instead of radius / half_extents / half_height.
    `combine` it with the cloth or soft body that meets it. Kind "mesh": a closed triangle mesh `vertices` [v, 3],
    `faces` [f, 3] in the collider's frame, scaled by `size` (default 1), checked closed and oriented outward
    (`geometry.rigid.check_closed_mesh`: an open mesh has no inside and is refused, an inward one flipped with a
    warning; `physics.mesh_collider`). `keyframes`: a kinematic collider's path, a list of
    (time s, position [3]) or (time, position, rotation [4]) keys (`physics.collider_motion`: linear between
    keys, at rest before the first and after the last); None: static at `position`, `rotation`.

    Args:
        kind: one of COLLIDER_KINDS.
        position: [3] m, a point of the plane; the centre of the others.
        rotation: [4] quaternion w, x, y, z.
        size: [3] m, the shape's size (`physics.colliders`' table), or a mesh's scale.
        radius: m, a sphere's or capsule's radius (over size[0]).
        half_extents: [3] m, a box's half extents (over size).
        half_height: m, a capsule's half height (over size[1]).
        ke: N/m, the contact's normal stiffness.
        kd: N s/m, its approach damping.
        kf: N s/m, friction's viscous slope.
        mu: Coulomb friction coefficient.
        keyframes: the kinematic collider's keys (above), or None.
        vertices: [v, 3] m, a "mesh" collider's vertices in its frame.
        faces: [f, 3] int, its triangles.
        segments: a sphere's UV tessellation (segments, rings) as Blender builds it (`physics.colliders.uv_sphere`:
            what it is drawn with and what Blender's collision response meets, `physics.impulse_contact`); None:
            an icosphere.

    Returns:
        a `Scene` piece holding one `Collider` (its `collider_motion` the `Keyframes` or None, its
        `collider_meshes` the `StaticMesh` or None).
    """
    if kind not in COLLIDER_KINDS:
        raise ValueError(f"collider kind must be one of {', '.join(COLLIDER_KINDS)}, got {kind!r}")
    size = list(as_floats(size, (3,), "size"))
    if half_extents is not None:
        size = list(as_floats(half_extents, (3,), "half_extents"))
    if radius is not None:
        size[0] = float(radius)
    if half_height is not None:
        size[1] = float(half_height)
    position, rotation = as_floats(position, (3,), "position"), as_floats(rotation, (4,), "rotation")
    mesh = None
    if kind == "mesh":
        if vertices is None or faces is None:
            raise ValueError("a \"mesh\" collider needs vertices [v, 3] and faces [f, 3]")
        mesh = StaticMesh(np.asarray(vertices, np.float64), check_closed_mesh(vertices, faces, name="mesh collider"))
    elif vertices is not None or faces is not None:
        raise ValueError(f"a {kind!r} collider takes no vertices or faces (only kind \"mesh\" does)")
    if segments is not None:
        if kind != "sphere":
            raise ValueError(f"segments (a UV tessellation) is a sphere's; a {kind!r} collider takes none")
        segments = tuple(int(s) for s in segments)
        if len(segments) != 2 or min(segments) < 3:
            raise ValueError(f"segments must be (segments, rings), each at least 3; got {segments}")
    motion = _keyframes(keyframes, position, rotation)
    if motion is not None:  # where it starts: its first key
        position, rotation = motion.positions[0], motion.rotations[0]
    record = Collider(kind, position, rotation, np.array(size, np.float64), float(ke), float(kd), float(kf), float(mu))
    empty = np.zeros((0, 3))
    return Scene(x=empty, v=empty, mass=np.zeros(0), pinned=np.zeros(0, bool), colliders=(record,),
                 collider_motion=(motion,), collider_meshes=(mesh,), collider_segments=(segments,))


def _keyframes(keyframes, position, rotation):
    """The `Keyframes` (times [K], positions [K, 3], rotations [K, 4]) of `collider(keyframes=...)`, or None (static).
    Each keyframe is (time s, position [3]) or (time, position, rotation [4]); rotation defaults to the
    collider's `rotation`. Times must increase; at least one key."""
    if keyframes is None:
        return None
    keys = list(keyframes)
    if not keys:
        raise ValueError("keyframes must hold at least one (time, position[, rotation]) key")
    times, positions, rotations = [], [], []
    for i, key in enumerate(keys):
        if not isinstance(key, (tuple, list)) or len(key) not in (2, 3):
            raise ValueError(f"keyframe {i} must be (time, position) or (time, position, rotation); got {key!r}")
        times.append(float(key[0]))
        positions.append(as_floats(key[1], (3,), f"keyframe {i} position"))
        q = as_floats(key[2], (4,), f"keyframe {i} rotation") if len(key) == 3 else np.asarray(rotation, np.float64)
        if not np.isfinite(q).all() or np.linalg.norm(q) == 0:
            raise ValueError(f"keyframe {i} rotation must be a finite nonzero quaternion; got {q.tolist()}")
        rotations.append(q)
    times = np.asarray(times)
    if not np.isfinite(times).all() or not np.isfinite(np.asarray(positions)).all():
        raise ValueError("keyframe times and positions must be finite")
    if np.any(np.diff(times) <= 0):
        raise ValueError(f"keyframe times must increase; got {times.tolist()}")
    return Keyframes(times, np.asarray(positions), np.asarray(rotations))
