"""Tetrahedral meshes for FEM soft bodies: checks, rest volumes, lumped masses, surfaces.

Conventions
-----------
* Vertices `[n, 3]` float64 (m), tets `[k, 4]` integer vertex indices (0-based).
* A tet (a, b, c, d) is *positively oriented*: det[b - a, c - a, d - a] > 0, so its rest volume
  V0 = det / 6 is positive. `check_tets` refuses inverted (V0 < 0) and degenerate (V0 ~ 0) tets with the
  index of the first one; nothing downstream flips them silently.
* Lumped mass: each tet gives density * V0 / 4 (kg) to each of its four vertices (PHYSICS.md).
* The boundary (`tet_surface`): the tet faces used by exactly one tet, wound counter-clockwise seen from
  outside, so a renderer or a volume integral sees an outward-oriented closed surface.
* Generated primitives (`geometry.tet_shapes`) follow `geometry.rigid`: the axis of symmetry (cylinder, gear) is y; every generator
  returns (vertices float64 [n, 3], tets int32 [k, 4]), all tets positive, the mesh conforming (two tets
  meet in a whole shared face, an edge, a vertex or not at all).

Generated primitives (boxes, voxels, spheres, extrusions, cylinders, gears): `geometry.tet_shapes`.
Tet-mesh files and the tetrahedralization of closed surfaces: `geometry.tet_files`.
"""

from __future__ import annotations

import numpy as np

from gradsim_jax.geometry.rigid import MeshError
from gradsim_jax.physics.validate import check_index_rows, rest_tet_volumes

# The faces of a positive tet (a, b, c, d), each wound outward (right-hand normal away from the 4th vertex).
_FACES = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])


def as_tet_mesh(vertices, tets, name):
    """(vertices float64 [n, 3], tets int64 [k, 4]), shapes, finite values and indices checked (MeshError).

    Args:
        vertices: [n, 3] m, the mesh's vertices.
        tets: [k, 4] vertex indices (integers, or floats holding whole numbers; empty: no tets).
        name: what error messages call the mesh.
    """
    x = np.asarray(vertices, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise MeshError(f"{name}: vertices must be [n, 3], got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        at = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
        raise MeshError(f"{name}: vertices{list(at)} = {x[at]} is not finite")
    t = np.asarray(tets)
    if t.size == 0:
        t = np.zeros((0, 4), np.int64)
    if t.ndim != 2 or t.shape[1] != 4:
        raise MeshError(f"{name}: tets must be [k, 4] vertex indices, got shape {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        if not (np.all(np.isfinite(t)) and np.all(t == np.round(t))):
            raise MeshError(f"{name}: tets must be integer vertex indices")
        t = t.astype(np.int64)
    try:
        check_index_rows("tets", t, x.shape[0])
    except ValueError as err:
        raise MeshError(f"{name}: {err}") from None
    return x, t.astype(np.int64)


def tet_volumes(vertices, tets) -> np.ndarray:
    """Signed rest volumes [k] (m^3): det[b - a, c - a, d - a] / 6, positive for a positive tet.

    Args:
        vertices: [n, 3] m, the mesh's vertices.
        tets: [k, 4] int, vertex indices (a, b, c, d) of each tet.
    """
    return rest_tet_volumes(vertices, tets)[0]


def check_tets(vertices, tets, *, name: str = "tet mesh") -> tuple[np.ndarray, np.ndarray]:
    """(vertices float64 [n, 3], tets int32 [k, 4]) after checking them; MeshError naming the first
    repeated-vertex, inverted or degenerate tet (and the mesh `name`); every tet returned is positive.

    Args:
        vertices: [n, 3] m, the mesh's vertices.
        tets: [k, 4] int, vertex indices of each tet (k >= 1).
        name: what error messages call the mesh.
    """
    x, t = as_tet_mesh(vertices, tets, name)
    if t.shape[0] == 0:
        raise MeshError(f"{name}: has no tets")
    srt = np.sort(t, axis=1)
    repeated = np.any(srt[:, 1:] == srt[:, :-1], axis=1)
    if repeated.any():
        k = int(np.argmax(repeated))
        raise MeshError(f"{name}: tet {k} {t[k].tolist()} repeats a vertex")
    vol, degenerate = rest_tet_volumes(x, t)
    if degenerate.any():
        k = int(np.argmax(degenerate))
        raise MeshError(f"{name}: tet {k} {t[k].tolist()} is degenerate (volume {vol[k]:.3g} m^3, its four "
                        "vertices are (nearly) coplanar)")
    inverted = vol < 0
    if inverted.any():
        k = int(np.argmax(inverted))
        raise MeshError(f"{name}: tet {k} {t[k].tolist()} is inverted (volume {vol[k]:.3g} m^3 < 0; "
                        f"{int(inverted.sum())} of {len(t)} tets are): swap two of its vertices, or call "
                        "orient_tets to make every tet positive")
    return x, t.astype(np.int32)


def orient_tets(vertices, tets) -> np.ndarray:
    """tets [k, 4] with the last two vertices swapped wherever the volume is negative (a mesh file written
    with the other orientation convention).

    Args:
        vertices: [n, 3] m, the mesh's vertices.
        tets: [k, 4] int, vertex indices of each tet (not modified; the result is a new int32 array).
    """
    t = np.array(tets, dtype=np.int64, copy=True)
    neg = tet_volumes(vertices, t) < 0
    t[neg, 2], t[neg, 3] = t[neg, 3], t[neg, 2].copy()
    return t.astype(np.int32)


def lumped_masses(vertices, tets, density) -> np.ndarray:
    """Per-vertex masses [n] (kg): each tet gives density * V0 / 4 to each of its vertices.

    Args:
        vertices: [n, 3] m, the mesh's vertices.
        tets: [k, 4] int, vertex indices of each positive tet.
        density: kg/m^3, one value or one per tet [k].
    """
    x, t = np.asarray(vertices, np.float64), np.asarray(tets)
    share = np.broadcast_to(np.asarray(density, np.float64), (t.shape[0],)) * tet_volumes(x, t) / 4.0
    mass = np.zeros(x.shape[0])
    np.add.at(mass, t.reshape(-1), np.repeat(share, 4))
    return mass


def tet_surface(tets) -> np.ndarray:
    """Boundary triangles [f, 3] int32 of positive tets: faces used by one tet only, wound outward.

    Args:
        tets: [k, 4] int, vertex indices of each positive tet.
    """
    t = np.asarray(tets, np.int64).reshape(-1, 4)
    faces = t[:, _FACES].reshape(-1, 3)
    key = np.sort(faces, axis=1)
    _, inverse, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    return faces[counts[inverse.reshape(-1)] == 1].astype(np.int32)


def positive_value(fn, name, value) -> float:
    """`value` as a float, checked to be a finite number > 0 (not a bool); ValueError naming `fn` and `name`.

    Args:
        fn: the name of the calling function, for the error message.
        name: the argument's name, for the error message.
        value: the value to check (any unit; returned unchanged in it).
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{fn}: {name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not (np.isfinite(v) and v > 0):
        raise ValueError(f"{fn}: {name} must be finite and > 0, got {value!r}")
    return v
