"""Static colliders as `Scene` pieces (`physics.colliders`): planes, spheres, boxes and capsules that the cloth
and the soft bodies of a scene collide with."""

from __future__ import annotations

import numpy as np

from gradsim_jax.geometry.scene import Scene, _f
from gradsim_jax.physics.colliders import COLLIDER_KINDS


def collider(kind: str, position=(0.0, 0.0, 0.0), *, rotation=(1.0, 0.0, 0.0, 0.0), size=(1.0, 1.0, 1.0),
             radius=None, half_extents=None, half_height=None, ke: float = 1.0e3, kd: float = 10.0,
             kf: float = 10.0, mu: float = 0.5) -> Scene:
    """A static collider as a `Scene` piece (`physics.colliders`): kind "plane" (through `position`, normal the
    rotated +y), "sphere" (`radius`), "box" (`half_extents` [3]) or "capsule" (`radius`, `half_height` along the
    rotated y axis); `rotation` a quaternion w, x, y, z; contact coefficients ke N/m, kd N s/m, kf N s/m, mu
    (defaults: Warp's soft contact). `size` [3] may be given instead of radius / half_extents / half_height.
    `combine` it with the cloth or soft body that meets it."""
    if kind not in COLLIDER_KINDS:
        raise ValueError(f"collider kind must be one of {', '.join(COLLIDER_KINDS)}, got {kind!r}")
    size = list(_f(size, (3,), "size"))
    if half_extents is not None:
        size = list(_f(half_extents, (3,), "half_extents"))
    if radius is not None:
        size[0] = float(radius)
    if half_height is not None:
        size[1] = float(half_height)
    position, rotation = _f(position, (3,), "position"), _f(rotation, (4,), "rotation")
    values = (position, rotation, np.array(size, np.float64), float(ke), float(kd), float(kf), float(mu))
    empty = np.zeros((0, 3))
    return Scene(x=empty, v=empty, mass=np.zeros(0), pinned=np.zeros(0, bool), colliders=((kind,) + values,))
