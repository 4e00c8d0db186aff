"""Cloth builders: a triangle mesh (`cloth_mesh`) or a rectangular grid (`cloth_grid`) as a host-side `Scene`,
with membrane elements, bending elements across interior edges (rest angles from the given shape) and
optional aerodynamics; `cloth_grid_counts` sizes a grid before building it."""

from __future__ import annotations

import dataclasses
import operator
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry.scene import (
    DEFAULT_BEND_KD, DEFAULT_BEND_KE, DEFAULT_TRI_KA, DEFAULT_TRI_KD, DEFAULT_TRI_KE, Scene, require_finite,
    as_floats, as_indices, pinned_mask, as_points, particles
)
from gradsim_jax.geometry.rotations import quat_rotate
from gradsim_jax.physics.validate import check_index_rows


def interior_edges(triangles) -> np.ndarray:
    """Bending edges [e, 4] = (o1, o2, a, b) for every edge shared by exactly two triangles.

    a -> b follows the winding of the triangle opposite o1, so that the dihedral normals of both
    triangles agree with their windings. Boundary and non-manifold edges get no bending element.

    Args:
        triangles: [t, 3] int, vertex indices of each triangle.

    Returns:
        [e, 4] int32, (o1, o2, a, b) per interior edge: the two opposite vertices, then the edge's ends.
    """
    seen: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for tri in np.asarray(triangles).tolist():
        for k in range(3):
            a, b, o = tri[k], tri[(k + 1) % 3], tri[(k + 2) % 3]
            seen.setdefault((min(a, b), max(a, b)), []).append((a, b, o))
    edges = [(r[0][2], r[1][2], r[0][0], r[0][1]) for r in seen.values() if len(r) == 2]
    return np.asarray(edges, np.int32).reshape(-1, 4)


def mesh_edges(triangles) -> np.ndarray:
    """Every edge of a triangle mesh once: [e, 2] int32 (lower index first, sorted), boundary edges included; on a
    `cloth_grid` the cells' sides and the diagonal each cell is split along (Blender's cloth puts a structural
    spring on each of them, `[material] spring_ke`).

    Args:
        triangles: [t, 3] int, vertex indices of each triangle.

    Returns:
        [e, 2] int32, the two vertex indices of each edge.
    """
    tri = np.asarray(triangles, np.int64).reshape(-1, 3)
    pairs = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    return np.unique(np.sort(pairs, axis=1), axis=0).astype(np.int32)


def _rest_angles(x, edges) -> np.ndarray:
    from gradsim_jax.physics.cloth import dihedral_angle

    if len(edges) == 0:
        return np.zeros(0)
    with jax.enable_x64(True):  # rest angles exact whatever precision the simulation later runs in
        pts = [jnp.asarray(np.asarray(x, np.float64)[edges[:, k]]) for k in range(4)]
        return np.asarray(jax.vmap(dihedral_angle)(*pts), np.float64)


def cloth_mesh(
    vertices,
    faces,
    *,
    density: float = 0.1,
    vel=(0.0, 0.0, 0.0),
    pinned=None,
    tri_ke: float = DEFAULT_TRI_KE,
    tri_ka: float = DEFAULT_TRI_KA,
    tri_kd: float = DEFAULT_TRI_KD,
    tri_drag: float = 0.0,
    tri_lift: float = 0.0,
    bend_ke: float = DEFAULT_BEND_KE,
    bend_kd: float = DEFAULT_BEND_KD,
    **renamed,
) -> Scene:
    """A cloth from a triangle mesh with lumped mass: each triangle gives density * area / 3 (kg) to each
    of its vertices (`density` in kg/m^2). `pinned` is an optional [n] bool mask or index list.

    Args:
        vertices: [n, 3] m, the particles' positions (also the rest shape).
        faces: [t, 3] int, vertex indices of each triangle.
        density: kg/m^2, the cloth's areal density.
        vel: [3] or [n, 3] m/s, initial velocities.
        pinned: None, an [n] bool mask, or an index list of kinematic particles.
        tri_ke: membrane stiffness k_mu (N/m, scaled by rest area), one value or [t].
        tri_ka: membrane area stiffness k_lambda, one value or [t].
        tri_kd: membrane damping k_damp, one value or [t].
        tri_drag: aerodynamic drag coefficient, one value or [t] (0: none).
        tri_lift: aerodynamic lift coefficient, one value or [t] (0: none).
        bend_ke: N m/rad, bending stiffness per interior edge, one value or [e].
        bend_kd: bending damping per interior edge, one value or [e].
        **renamed: only the old names `edge_ke` / `edge_kd` (read as bend_ke / bend_kd with a
            DeprecationWarning); any other keyword is a TypeError.

    Returns:
        A `Scene` piece with the particles, triangles and bending edges (none when bend_ke = bend_kd = 0).
    """
    x = as_points(vertices, "vertices")
    require_finite("vertices", x)
    tris = as_indices(faces, 3, "faces")
    n = x.shape[0]
    check_index_rows("faces", tris, n)
    tris = tris.astype(np.int32)
    area = 0.5 * np.linalg.norm(np.cross(x[tris[:, 1]] - x[tris[:, 0]], x[tris[:, 2]] - x[tris[:, 0]]), axis=1)
    mass = np.zeros(n)
    np.add.at(mass, tris.reshape(-1), np.repeat(density * area / 3.0, 3))
    mask = pinned_mask(pinned, n)
    bend_ke, bend_kd = _renamed_bending(renamed, bend_ke, bend_kd, "cloth_mesh")
    return _with_cloth(particles(x, as_floats(vel, (n, 3), "vel"), mass, mask), tris, tri_ke, tri_ka, tri_kd, tri_drag,
                       tri_lift, bend_ke, bend_kd)


def _renamed_bending(renamed: dict, bend_ke, bend_kd, where: str):
    """(bend_ke, bend_kd), taking the old names edge_ke / edge_kd from `renamed` with a DeprecationWarning;
    TypeError for any other unexpected keyword."""
    values = {"bend_ke": bend_ke, "bend_kd": bend_kd}
    for old, value in renamed.items():
        if old not in ("edge_ke", "edge_kd"):
            raise TypeError(f"{where}() got an unexpected keyword argument {old!r}")
        new = "bend_" + old[len("edge_"):]
        warnings.warn(f"{where}: {old} is now called {new}", DeprecationWarning, stacklevel=3)
        values[new] = value
    return values["bend_ke"], values["bend_kd"]


def _with_cloth(piece, tris, tri_ke, tri_ka, tri_kd, tri_drag, tri_lift, bend_ke, bend_kd) -> Scene:
    t = tris.shape[0]
    # With bend_ke = bend_kd = 0 bending exerts no force: leave its elements out so it costs nothing.
    bends = np.any(np.asarray(bend_ke) != 0) or np.any(np.asarray(bend_kd) != 0)
    edges = interior_edges(tris) if bends else np.zeros((0, 4), np.int32)
    e = edges.shape[0]
    return dataclasses.replace(
        piece,
        triangles=tris, tri_ke=as_floats(tri_ke, (t,), "tri_ke"), tri_ka=as_floats(tri_ka, (t,), "tri_ka"),
        tri_kd=as_floats(tri_kd, (t,), "tri_kd"), tri_drag=as_floats(tri_drag, (t,), "tri_drag"),
        tri_lift=as_floats(tri_lift, (t,), "tri_lift"),
        bend_edges=edges, bend_ke=as_floats(bend_ke, (e,), "bend_ke"), bend_kd=as_floats(bend_kd, (e,), "bend_kd"),
        bend_rest=_rest_angles(piece.x, edges),
    )


def cloth_grid(
    dim_x: int,
    dim_y: int,
    cell_x: float,
    cell_y: float,
    *,
    pos=(0.0, 0.0, 0.0),
    rot=(1.0, 0.0, 0.0, 0.0),
    vel=(0.0, 0.0, 0.0),
    mass: float = 0.1,
    fix_left: bool = False,
    fix_right: bool = False,
    fix_top: bool = False,
    fix_bottom: bool = False,
    reverse_winding: bool = False,
    tri_ke: float = DEFAULT_TRI_KE,
    tri_ka: float = DEFAULT_TRI_KA,
    tri_kd: float = DEFAULT_TRI_KD,
    tri_drag: float = 0.0,
    tri_lift: float = 0.0,
    bend_ke: float = DEFAULT_BEND_KE,
    bend_kd: float = DEFAULT_BEND_KD,
    **renamed,
) -> Scene:
    """A rectangular cloth of dim_x x dim_y cells (gradSim's / dflex's `add_cloth_grid` semantics).

    (dim_x + 1)(dim_y + 1) particles, row-major in y: particle (i, j) = j (dim_x + 1) + i sits at
    rot * (i cell_x, j cell_y, 0) + pos; `rot` is a unit quaternion (w, x, y, z); `mass` is per particle.
    2 dim_x dim_y triangles, two per cell, and one bending edge per interior (shared) edge (none when
    bend_ke = bend_kd = 0; `edge_ke` / `edge_kd`, dflex's names, still read with a DeprecationWarning). The fix_* flags
    pin the particles of the column i = 0 (left), i = dim_x (right), row j = dim_y (top), j = 0 (bottom).

    Args:
        dim_x: cells along the local x axis (int >= 1).
        dim_y: cells along the local y axis (int >= 1).
        cell_x: m, a cell's width along local x (finite > 0).
        cell_y: m, a cell's height along local y (finite > 0).
        pos: [3] m, where the grid's particle (0, 0) sits.
        rot: [4], a nonzero quaternion (w, x, y, z) rotating the grid (normalised here).
        vel: [3] or [(dim_x + 1)(dim_y + 1), 3] m/s, initial velocities.
        mass: kg per particle.
        fix_left: pin the column i = 0.
        fix_right: pin the column i = dim_x.
        fix_top: pin the row j = dim_y.
        fix_bottom: pin the row j = 0.
        reverse_winding: wind the two triangles of each cell the other way (their normals flip).
        tri_ke: membrane stiffness k_mu (N/m, scaled by rest area), one value or [t].
        tri_ka: membrane area stiffness k_lambda, one value or [t].
        tri_kd: membrane damping k_damp, one value or [t].
        tri_drag: aerodynamic drag coefficient, one value or [t] (0: none).
        tri_lift: aerodynamic lift coefficient, one value or [t] (0: none).
        bend_ke: N m/rad, bending stiffness per interior edge, one value or [e].
        bend_kd: bending damping per interior edge, one value or [e].
        **renamed: only the old names `edge_ke` / `edge_kd` (read as bend_ke / bend_kd with a
            DeprecationWarning); any other keyword is a TypeError.

    Returns:
        A `Scene` piece with the grid's particles, triangles and bending edges.
    """
    dims = []
    for name, dim in (("dim_x", dim_x), ("dim_y", dim_y)):
        try:
            if isinstance(dim, (bool, np.bool_)):
                raise TypeError
            dims.append(operator.index(dim))
        except TypeError:
            raise TypeError(f"cloth_grid needs an integer {name} (cells), got {dim!r}") from None
    dim_x, dim_y = dims
    if dim_x < 1 or dim_y < 1:
        raise ValueError(f"cloth_grid needs dim_x, dim_y >= 1, got {dim_x}, {dim_y}")
    count = (dim_x + 1) * (dim_y + 1)
    if count > np.iinfo(np.int32).max:
        raise ValueError(f"cloth_grid dim_x x dim_y = {dim_x} x {dim_y} has {count} particles, more than int32 "
                         "indices can address (2**31 - 1)")
    for name, size in (("cell_x", cell_x), ("cell_y", cell_y)):
        if not 0 < float(as_floats(size, (), name)) < np.inf:
            raise ValueError(f"cloth_grid needs a finite {name} > 0 (m), got {size!r}")
    rot = as_floats(rot, name="rot")
    if rot.shape != (4,) or not (np.all(np.isfinite(rot)) and 0 < np.linalg.norm(rot) < np.inf):
        raise ValueError(f"cloth_grid needs rot = a nonzero finite quaternion (w, x, y, z), got {rot.tolist()}")
    pos = as_floats(pos, (3,), "pos")
    jj, ii = np.meshgrid(np.arange(dim_y + 1), np.arange(dim_x + 1), indexing="ij")
    local = np.stack([ii * cell_x, jj * cell_y, np.zeros_like(ii, dtype=float)], -1).reshape(-1, 3)
    x = quat_rotate(rot / np.linalg.norm(rot), local) + pos
    ii, jj = ii.reshape(-1), jj.reshape(-1)
    pinned = (fix_left & (ii == 0)) | (fix_right & (ii == dim_x)) | (fix_top & (jj == dim_y)) | (
        fix_bottom & (jj == 0)
    )
    row = dim_x + 1
    cj, ci = np.meshgrid(np.arange(1, dim_y + 1), np.arange(1, dim_x + 1), indexing="ij")
    ci, cj = ci.reshape(-1), cj.reshape(-1)
    v00, v10 = (cj - 1) * row + ci - 1, (cj - 1) * row + ci
    v01, v11 = cj * row + ci - 1, cj * row + ci
    if reverse_winding:
        t1, t2 = np.stack([v00, v10, v11], 1), np.stack([v00, v11, v01], 1)
    else:
        t1, t2 = np.stack([v00, v10, v01], 1), np.stack([v10, v11, v01], 1)
    tris = np.stack([t1, t2], 1).reshape(-1, 3).astype(np.int32)
    bend_ke, bend_kd = _renamed_bending(renamed, bend_ke, bend_kd, "cloth_grid")
    return _with_cloth(particles(x, as_floats(vel, (x.shape[0], 3), "vel"), mass, pinned), tris, tri_ke, tri_ka, tri_kd,
                       tri_drag, tri_lift, bend_ke, bend_kd)


def cloth_grid_counts(dim_x: int, dim_y: int, *, bending: bool = True) -> dict:
    """Element counts of `cloth_grid(dim_x, dim_y, ...)` without building it (for `estimate_cost`):
    {"particles", "triangles", "bend_edges", "springs"}; `bending`: bend_ke or bend_kd nonzero.

    Args:
        dim_x: cells along the grid's x axis.
        dim_y: cells along the grid's y axis.
        bending: whether bend_ke or bend_kd is nonzero (False: no bending edges).

    Returns:
        dict of int counts with keys "particles", "triangles", "bend_edges", "springs" (always 0).
    """
    return {"particles": (dim_x + 1) * (dim_y + 1), "triangles": 2 * dim_x * dim_y,
            "bend_edges": 3 * dim_x * dim_y - dim_x - dim_y if bending else 0, "springs": 0}
