"""[[collider]]: a scene file's static colliders (`physics.colliders`), as `Scene` pieces, and their colours."""

from __future__ import annotations

import numpy as np

from gradsim_jax.geometry.colliders import collider
from gradsim_jax.physics.colliders import (COLLIDER_KINDS, ColliderParams, ColliderTopology, collider_faces,
                                            validate_colliders)
from gradsim_jax.scenefile.schema import SceneFileError

#: The size keys each shape needs.
SIZE_KEYS = {"plane": (), "sphere": ("radius",), "box": ("half_extents",), "capsule": ("radius", "half_height")}


def read_colliders(spec) -> list:
    """One `Scene` piece per [[collider]] table (SceneFileError naming the table and key when it is wrong)."""
    pieces = []
    for i, t in enumerate(spec.values["collider"]):
        where = f"{spec.path}: [[collider]] {i}"
        if t["shape"] not in COLLIDER_KINDS:
            raise SceneFileError(f"{where}: shape must be one of {', '.join(COLLIDER_KINDS)}, got {t['shape']!r}")
        missing = [k for k in SIZE_KEYS[t["shape"]] if t[k] is None]
        if missing:
            raise SceneFileError(f"{where}: a {t['shape']} needs {' and '.join(missing)}")
        extra = [k for k in ("radius", "half_extents", "half_height") if t[k] is not None
                 and k not in SIZE_KEYS[t["shape"]]]
        if extra:
            raise SceneFileError(f"{where}: a {t['shape']} takes no {extra[0]}")
        try:
            piece = collider(t["shape"], t["pos"], rotation=t["rot"], radius=t["radius"],
                             half_extents=t["half_extents"], half_height=t["half_height"], ke=t["ke"], kd=t["kd"],
                             kf=t["kf"], mu=t["mu"])
            kind, *values = piece.colliders[0]
            validate_colliders(ColliderTopology((kind,)), ColliderParams(*(np.asarray(x)[None] for x in values)))
        except ValueError as e:
            raise SceneFileError(f"{where}: {str(e).replace('colliders.', '').replace(' of collider 0', '')}") from None
        pieces.append(piece)
    return pieces


def collider_face_colors(spec, topology, rgb: np.ndarray, first: int) -> int:
    """Colour each collider's faces in rgb [F, 3] with its [[collider]] color (default grey 0.6), the colliders'
    faces starting at `first`; returns the index after them."""
    for t in spec.values["collider"]:
        count = len(collider_faces(ColliderTopology((t["shape"],))))  # a plane has none
        rgb[first:first + count] = t["color"] if t["color"] is not None else 0.6
        first += count
    return first
