"""[[collider]]: a scene file's colliders, static or moved by keyframes (`physics.colliders`), as `Scene` pieces, and their colours."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from gradsim_jax.geometry.colliders import collider
from gradsim_jax.geometry.rigid import load_mesh
from gradsim_jax.physics.colliders import (COLLIDER_KINDS, ColliderParams, ColliderTopology, collider_faces,
                                            validate_colliders)
from gradsim_jax.scenefile.schema import SceneFileError

#: The size keys each shape needs.
SIZE_KEYS = {"plane": (), "sphere": ("radius",), "box": ("half_extents",), "capsule": ("radius", "half_height"),
             "mesh": ("mesh",)}


class Colliders(NamedTuple):
    """What [[collider]] gives: the colliders as `Scene` pieces, and their colours."""

    #: One `Scene` piece per [[collider]] table, each holding one `geometry.colliders.Collider`, in file order.
    pieces: list
    #: One entry per collider: [3] RGB in [0, 1], or None (grey).
    colors: tuple
    #: One entry per collider: whether the render draws it.
    drawn: tuple = ()


def read_colliders(spec) -> Colliders:
    """The colliders of the [[collider]] tables (the one reader of the section; SceneFileError naming the table
    and key when one is wrong).

    Args:
        spec: the parsed scene file (its "collider" tables, its path to resolve mesh files against).

    Returns:
        `Colliders`: a `Scene` piece per table, in the tables' order, and each one's colour.
    """
    pieces = []
    tables = [dataclasses.asdict(t) for t in spec.sections.collider]
    for i, t in enumerate(tables):
        where = f"{spec.path}: [[collider]] {i}"
        if t["shape"] not in COLLIDER_KINDS:
            raise SceneFileError(f"{where}: shape must be one of {', '.join(COLLIDER_KINDS)}, got {t['shape']!r}")
        missing = [k for k in SIZE_KEYS[t["shape"]] if t[k] is None]
        if missing:
            raise SceneFileError(f"{where}: a {t['shape']} needs {' and '.join(missing)}")
        extra = [k for k in ("radius", "half_extents", "half_height", "mesh") if t[k] is not None
                 and k not in SIZE_KEYS[t["shape"]]]
        if extra:
            raise SceneFileError(f"{where}: a {t['shape']} takes no {extra[0]}")
        keys = _keyframes(where, t)
        mesh = {}
        if t["shape"] == "mesh":
            path = spec.resolve(t["mesh"])
            if not path.is_file():
                raise SceneFileError(f"{where}: mesh file not found: {path}")
            try:
                vertices, faces = load_mesh(path)
            except ValueError as e:
                raise SceneFileError(f"{where}: mesh {path}: {e}") from None
            mesh = {"vertices": vertices, "faces": faces, "size": t["scale"]}
        try:
            piece = collider(t["shape"], t["pos"], rotation=t["rot"], radius=t["radius"],
                             half_extents=t["half_extents"], half_height=t["half_height"], ke=t["ke"], kd=t["kd"],
                             kf=t["kf"], mu=t["mu"], keyframes=keys, segments=t["segments"], **mesh)
            record = piece.colliders[0]
            validate_colliders(ColliderTopology((record.kind,), tuple(piece.collider_meshes),
                                                tuple(piece.collider_segments)),
                               ColliderParams(**{k: np.asarray(x)[None] for k, x in record.param_values().items()}))
        except ValueError as e:
            raise SceneFileError(f"{where}: {str(e).replace('colliders.', '').replace(' of collider 0', '')}") from None
        pieces.append(piece)
    return Colliders(pieces, tuple(t["color"] for t in tables), tuple(bool(t["drawn"]) for t in tables))


def _keyframes(where: str, t: dict):
    """`collider(keyframes=...)` of a [[collider]] table's key_times, key_pos, key_rot (None: static)."""
    times, pos, rot = (list(t[k] or []) for k in ("key_times", "key_pos", "key_rot"))
    if not times:
        if pos or rot:
            raise SceneFileError(f"{where}: key_pos and key_rot need key_times")
        return None
    if len(pos) != 3 * len(times):
        raise SceneFileError(f"{where}: key_pos must hold x, y, z for each of the {len(times)} key_times "
                             f"({3 * len(times)} numbers), got {len(pos)}")
    if rot and len(rot) != 4 * len(times):
        raise SceneFileError(f"{where}: key_rot must hold w, x, y, z for each of the {len(times)} key_times "
                             f"({4 * len(times)} numbers), got {len(rot)}")
    return [(times[i], pos[3 * i:3 * i + 3]) + ((rot[4 * i:4 * i + 4],) if rot else ()) for i in range(len(times))]


def _one(topology, i) -> ColliderTopology:
    """Collider i of a built scene's colliders alone (its faces: `collider_faces`)."""
    c = topology.colliders
    return ColliderTopology((c.kinds[i],), (c.meshes[i],), (c.segments[i],))


def hidden_collider_faces(drawn, topology, first: int) -> np.ndarray:
    """The faces of the colliders the render does not draw ([[collider]] drawn = false).

    Args:
        drawn: one bool per collider (`Colliders.drawn`).
        topology: the built scene's `Topology` (its colliders' meshes).
        first: the index of the colliders' first face.

    Returns:
        int array of face indices.
    """
    hidden = []
    for i, shown in enumerate(drawn):
        count = len(collider_faces(_one(topology, i)))
        if not shown:
            hidden.append(np.arange(first, first + count))
        first += count
    return np.concatenate(hidden) if hidden else np.zeros(0, int)


def collider_face_colors(colors, topology, rgb: np.ndarray, first: int) -> int:
    """Colour each collider's faces in rgb with its [[collider]] color (default grey 0.6).

    Args:
        colors: one entry per collider, [3] RGB in [0, 1] or None (`Colliders.colors`).
        topology: the built scene's `Topology` (its colliders' meshes).
        rgb: [F, 3] the scene's face colours in [0, 1], written in place from `first` on.
        first: the index of the colliders' first face.

    Returns:
        the index after the colliders' faces.
    """
    for i, color in enumerate(colors):
        count = len(collider_faces(_one(topology, i)))  # a plane has none
        rgb[first:first + count] = color if color is not None else 0.6
        first += count
    return first
