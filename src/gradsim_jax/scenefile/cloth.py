"""The cloth of [scene] and [material]: a grid or a triangle mesh, pinned vertices, as a host-side Scene."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from gradsim_jax.geometry import cloth_grid, cloth_mesh, mesh_edges, obj
from gradsim_jax.geometry.rotations import quat_rotate
from gradsim_jax.scenefile.schema import SceneFileError
from gradsim_jax.scenefile.world import read_material, read_scene


def read_obj(path) -> tuple[np.ndarray, np.ndarray]:
    """`geometry.obj.read_obj` for a scene file: its refusals are `SceneFileError`s, with the same message.

    Args:
        path: the OBJ file (v/f lines), a str or Path.

    Returns:
        (vertices [n, 3] float64 in the file's units, triangles [t, 3] int32 0-based vertex indices).
    """
    try:
        return obj.read_obj(path)
    except obj.MeshFileError as e:
        raise SceneFileError(str(e)) from e


def check_grid_fits(spec, dx: int, dy: int, bending: bool) -> None:
    """SceneFileError when the grid cannot even be built: more particles than int32 indices address, or
    more memory for one simulated step than the machine has (numpy would fail or the OS kill us).

    Args:
        spec: the validated scene file (`SceneSpec`), named in the message.
        dx: cells of the grid along x ([scene] grid[0]).
        dy: cells of the grid along y ([scene] grid[1]).
        bending: whether the cloth has bending elements ([material] bend_ke or bend_kd nonzero).

    Raises:
        SceneFileError: for a grid too large to index or to hold in memory.
    """
    from gradsim_jax.geometry import cloth_grid_counts
    from gradsim_jax.physics.cost import available_memory_bytes, estimate_cost, human_bytes

    counts = cloth_grid_counts(dx, dy, bending=bending)
    what = f"{spec.path}: [scene] grid = [{dx}, {dy}] has {counts['particles']} particles"
    if counts["particles"] > np.iinfo(np.int32).max:
        raise SceneFileError(f"{what}, more than int32 indices address (2**31 - 1); use a coarser grid")
    need, available = estimate_cost(counts, 1, 1).memory_bytes, available_memory_bytes()
    if available is not None and need > available:
        raise SceneFileError(f"{what}: building it needs about {human_bytes(need)} of memory, more than the "
                             f"{human_bytes(available)} available; use a coarser grid")


def read_cloth(spec):
    """The cloth of [scene] and [material] (a host-side Scene).

    Args:
        spec: the validated scene file (`SceneSpec`) with [scene] grid or mesh set.

    Returns:
        A host-side `Scene` of the cloth: particles of [material] mass kg each, [scene] pinned and fix pinned.

    Raises:
        SceneFileError: naming the file and the key, for a bad value, a missing or bad mesh, or every vertex
            pinned.
    """
    path = spec.path
    sc, mat = read_scene(spec).cloth, read_material(spec).cloth
    rot = np.asarray(sc.rot, np.float64)
    if not np.linalg.norm(rot) > 0:
        raise SceneFileError(f"{path}: [scene] rot must be a nonzero quaternion")
    common = dict(tri_ke=mat.tri_ke, tri_ka=mat.tri_ka, tri_kd=mat.tri_kd, tri_drag=mat.tri_drag,
                  tri_lift=mat.tri_lift, bend_ke=mat.bend_ke, bend_kd=mat.bend_kd)
    if not (math.isfinite(mat.mass) and mat.mass > 0):
        raise SceneFileError(f"{path}: [material] mass must be positive (kg per particle), got {mat.mass}; "
                             "to hold vertices still, pin them ([scene] fix or pinned)")
    if sc.grid is not None:
        bad = [s for s in sc.fix if s not in ("left", "right", "top", "bottom")]
        if bad:
            raise SceneFileError(f"{path}: [scene] fix has unknown side(s) {bad}; use left, right, top, bottom")
        (dx, dy), (cx, cy) = sc.grid, sc.cell
        if dx < 1 or dy < 1 or not (cx > 0 and cy > 0):
            raise SceneFileError(f"{path}: [scene] grid needs >= 1 cells and cell > 0")
        check_grid_fits(spec, dx, dy, mat.bend_ke != 0 or mat.bend_kd != 0)
        fix = {f"fix_{s}": True for s in sc.fix}
        try:
            scene = cloth_grid(dx, dy, cx, cy, pos=sc.pos, rot=rot, vel=sc.velocity, mass=mat.mass,
                               **fix, **common)
        except ValueError as e:
            raise SceneFileError(f"{path}: [scene]/[material]: {e}") from None
    else:
        if sc.fix:
            raise SceneFileError(f"{path}: [scene] fix applies to grids only; list mesh vertices in 'pinned'")
        mesh_path = sc.mesh_path
        if not mesh_path.is_file():
            raise SceneFileError(f"{path}: [scene] mesh file not found: {mesh_path}")
        verts, faces = read_obj(mesh_path)
        verts = quat_rotate(rot / np.linalg.norm(rot), verts * sc.scale) + np.asarray(sc.pos)
        try:
            scene = cloth_mesh(verts, faces, vel=sc.velocity, **common)
        except ValueError as e:
            raise SceneFileError(f"{path}: [scene] mesh {mesh_path}: {e}") from e
        scene = dataclasses.replace(scene, mass=np.full(scene.num_particles, float(mat.mass)))
    if mat.spring_ke or mat.spring_kd:
        if not (mat.spring_ke >= 0 and mat.spring_kd >= 0):
            raise SceneFileError(f"{path}: [material] spring_ke and spring_kd must be 0 or more, got "
                                 f"{mat.spring_ke}, {mat.spring_kd}")
        scene = scene.add_springs(mesh_edges(scene.triangles), mat.spring_ke, mat.spring_kd)
    n = scene.num_particles
    pinned = np.asarray(sc.pinned, int)
    if pinned.size and (pinned.min() < 0 or pinned.max() >= n):
        raise SceneFileError(f"{path}: [scene] pinned index out of range [0, {n}): {sc.pinned}")
    if pinned.size:
        mask = scene.pinned.copy()
        mask[pinned] = True
        scene = dataclasses.replace(scene, pinned=mask)
    if scene.pinned.all():
        raise SceneFileError(f"{path}: [scene] every vertex is pinned: nothing can move")
    return scene
