"""[[body]] (rigid bodies: primitives or closed meshes), [[soft_body]] (FEM tets: primitives, tet files or
surfaces filled by TetGen) and [[body_push]] (known forces on bodies), each table as a host-side Scene."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from gradsim_jax.geometry import rigid_body
from gradsim_jax.geometry import rigid as rigid_geometry
from gradsim_jax.geometry.scene import combine
from gradsim_jax.scenefile.schema import BODY_SHAPES, MAX_SEGMENTS, MAX_SUBDIVISIONS, SCHEMA, SOFT_SHAPES, SceneFileError


@dataclasses.dataclass(frozen=True)
class RigidBodies:
    """[[body]] read.

    Attributes:
        scene: a host-side `Scene` of every [[body]] in file order.
        colors: one entry per body: [3] RGB in [0, 1] ([[body]] color), or None for the [render] colour.
    """

    scene: object
    colors: tuple


def read_bodies(spec):
    """The rigid bodies of [[body]] (the one reader of the section), or None when there are none.

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `RigidBodies` (their `Scene` and colours), or None.
    """
    tables = spec.sections.body
    pieces = [read_body(spec, i, table) for i, table in enumerate(tables)]
    if not pieces:
        return None
    return RigidBodies(scene=combine(*pieces), colors=tuple(b.color for b in tables))


def read_soft_bodies(spec) -> list:
    """One host-side Scene per [[soft_body]] table, in file order (`read_soft_body`).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The list of soft bodies' `Scene` pieces (empty without [[soft_body]] tables).
    """
    return [read_soft_body(spec, i, t) for i, t in enumerate(spec.sections.soft_body)]


def read_body(spec, i: int, b):
    """One [[body]] table as a host-side Scene: a rigid primitive or closed mesh (`geometry.rigid_body`).

    Args:
        spec: the validated scene file (`SceneSpec`); mesh paths are relative to its folder.
        i: index of the table among the file's [[body]] tables (named in messages).
        b: the table, a `sections.BodyTable` (the schema's defaults filled in).

    Returns:
        A host-side `Scene` of one rigid body.

    Raises:
        SceneFileError: naming the table and the key, for a bad value or an unreadable or inward mesh.
    """
    where = f"{spec.path}: [[body]] {i}:"
    if (b.shape is None) == (b.mesh is None):
        raise SceneFileError(f"{where} give exactly one of shape ({', '.join(BODY_SHAPES)}) or mesh (a file)")
    sizes = {"box": ("half_extents",), "sphere": ("radius", "subdivisions"),
             "cylinder": ("radius", "height", "segments"), "capsule": ("radius", "height", "segments"),
             "cone": ("radius", "height", "segments"), None: ("scale",)}
    if b.shape is not None and b.shape not in BODY_SHAPES:
        raise SceneFileError(f"{where} shape must be one of {', '.join(BODY_SHAPES)} (or give mesh), got "
                             f"{b.shape!r}")
    wanted = sizes[b.shape]
    for key in ("half_extents", "radius", "height", "subdivisions", "segments", "scale"):
        if key not in wanted and getattr(b, key) != SCHEMA["body"][key].default:
            what = f"shape {b.shape!r}" if b.shape else "a mesh"
            raise SceneFileError(f"{where} {key} does not apply to {what} (it takes {', '.join(wanted)})")
    for key in wanted:
        if getattr(b, key) is None:
            raise SceneFileError(f"{where} shape {b.shape!r} needs {key}")
    if b.subdivisions is not None and not 0 <= b.subdivisions <= MAX_SUBDIVISIONS:
        raise SceneFileError(f"{where} subdivisions must be in [0, {MAX_SUBDIVISIONS}], got {b.subdivisions}")
    if b.segments is not None and not 3 <= b.segments <= MAX_SEGMENTS:
        raise SceneFileError(f"{where} segments must be in [3, {MAX_SEGMENTS}], got {b.segments}")
    for key in ("radius", "height", "scale", "density", "mass"):
        if getattr(b, key) is not None and not (getattr(b, key) > 0 or (key == "height" and b.shape == "capsule"
                                                      and getattr(b, key) == 0)):
            raise SceneFileError(f"{where} {key} must be positive, got {getattr(b, key)}")
    if b.half_extents is not None and not min(b.half_extents) > 0:
        raise SceneFileError(f"{where} half_extents must be positive, got {b.half_extents}")
    if b.density is not None and b.mass is not None:
        raise SceneFileError(f"{where} give density or mass, not both")
    if not np.linalg.norm(b.rot) > 0:
        raise SceneFileError(f"{where} rot must be a nonzero quaternion (w, x, y, z)")
    for key in ("contact_ke", "contact_kd", "contact_kf", "contact_mu", "restitution"):
        if not getattr(b, key) >= 0:
            raise SceneFileError(f"{where} {key} must be 0 or more, got {getattr(b, key)}")
    if b.restitution > 1:
        raise SceneFileError(f"{where} restitution must be in [0, 1], got {b.restitution}")
    if b.color is not None and not all(0.0 <= c <= 1.0 for c in b.color):
        raise SceneFileError(f"{where} color must be RGB in [0, 1], got {b.color}")
    g = rigid_geometry
    try:
        if b.mesh is not None:
            mesh_path = spec.resolve(b.mesh)
            verts, faces = g.load_mesh(mesh_path)
            verts = verts * b.scale
        elif b.shape == "box":
            verts, faces = g.box_mesh(*b.half_extents)
        elif b.shape == "sphere":
            verts, faces = g.sphere_mesh(b.radius, b.subdivisions)
        else:
            build = {"cylinder": g.cylinder_mesh, "capsule": g.capsule_mesh, "cone": g.cone_mesh}[b.shape]
            verts, faces = build(b.radius, b.height, b.segments)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # an inward mesh: say so rather than flip it quietly
            return rigid_body(verts, faces, density=b.density, mass=b.mass, pos=b.pos, rot=b.rot,
                              vel=b.velocity, omega=b.omega, contact_ke=b.contact_ke,
                              contact_kd=b.contact_kd, contact_kf=b.contact_kf,
                              contact_mu=b.contact_mu, restitution=b.restitution,
                              name=b.mesh or b.shape)
    except (ValueError, UserWarning, FloatingPointError) as e:  # MeshError is a ValueError
        raise SceneFileError(f"{where} {e}") from None


def read_soft_body(spec, i: int, b):
    """One [[soft_body]] table as a host-side Scene (FEM tets; `geometry.tets` and `soft_body`).

    Args:
        spec: the validated scene file (`SceneSpec`); mesh and surface paths are relative to its folder.
        i: index of the table among the file's [[soft_body]] tables (named in messages).
        b: the table, a `sections.SoftBodyTable` (the schema's defaults filled in).

    Returns:
        A host-side `Scene` of the soft body's particles and tets.

    Raises:
        SceneFileError: naming the table and the key, for a bad value or a mesh that cannot be read or filled.
    """
    from gradsim_jax.geometry import tet_files
    from gradsim_jax.geometry import tet_shapes as tetmesh
    from gradsim_jax.geometry.soft import soft_body

    where = f"{spec.path}: [[soft_body]] {i}:"
    given = [k for k in ("shape", "mesh", "surface") if getattr(b, k) is not None]
    if len(given) != 1:
        raise SceneFileError(f"{where} give exactly one of shape ({', '.join(SOFT_SHAPES)}), mesh (a tet file) "
                             "or surface (a closed triangle mesh to fill with tets)")
    if b.shape is not None and b.shape not in SOFT_SHAPES:
        raise SceneFileError(f"{where} shape must be one of {', '.join(SOFT_SHAPES)}, got {b.shape!r}")
    wanted = {"box": ("size",), "sphere": ("radius",), "cylinder": ("radius", "height")}.get(b.shape, ())
    for key in wanted:
        if getattr(b, key) is None:
            raise SceneFileError(f"{where} shape {b.shape!r} needs {key}")
    for key in ("radius", "height", "scale", "max_volume"):
        if getattr(b, key) is not None and not getattr(b, key) > 0:
            raise SceneFileError(f"{where} {key} must be positive, got {getattr(b, key)}")
    for key in ("density", "k_mu", "k_lambda", "k_damp"):
        if not getattr(b, key) >= 0:
            raise SceneFileError(f"{where} {key} must be 0 or more, got {getattr(b, key)}")
    if b.size is not None and not min(b.size) > 0:
        raise SceneFileError(f"{where} size must be positive, got {b.size}")
    if b.cells is not None and not (min(b.cells) >= 1 and max(b.cells) <= 64):
        raise SceneFileError(f"{where} cells must be in [1, 64], got {b.cells}")
    if not np.linalg.norm(b.rot) > 0:
        raise SceneFileError(f"{where} rot must be a nonzero quaternion (w, x, y, z)")
    if b.mass_model not in ("lumped", "cell"):
        raise SceneFileError(f'{where} mass_model must be "lumped" or "cell", got {b.mass_model!r}')
    if b.mass_model == "cell" and b.shape != "box":
        raise SceneFileError(f'{where} mass_model = "cell" gives every particle a box cell\'s mass: it needs '
                             f'shape = "box"')
    if b.mass_model == "cell" and b.masses is not None:
        raise SceneFileError(f'{where} give masses or mass_model = "cell", not both')
    cell_volume = None
    try:
        if b.shape == "box":
            size = np.asarray(b.size, np.float64)
            cells = b.cells or (2, 2, 2)
            verts, tets = tetmesh.box_tets(cells, size, pattern=b.pattern, origin=-size / 2)
            if b.mass_model == "cell":
                cell_volume = float(np.prod(size / np.asarray(cells, np.float64)))
        elif b.shape == "sphere":
            verts, tets = tetmesh.sphere_tets(b.radius, (b.cells or (4,))[0])
        elif b.shape == "cylinder":
            verts, tets = tetmesh.cylinder_tets(b.radius, b.height, b.segments)
        elif b.mesh is not None:
            verts, tets = tet_files.load_tets(spec.resolve(b.mesh))
            verts = verts * b.scale
        else:
            surf_v, surf_f = rigid_geometry.load_mesh(spec.resolve(b.surface))
            verts, tets = tet_files.tetrahedralize(surf_v * b.scale, surf_f, max_volume=b.max_volume,
                                                 name=b.surface)
        if b.masses is not None and len(b.masses) != len(verts):
            raise SceneFileError(f"{where} masses needs one mass per particle of this body: {len(verts)}, got "
                                 f"{len(b.masses)}")
        return soft_body(verts, tets, density=b.density, k_mu=b.k_mu, k_lambda=b.k_lambda,
                         k_damp=b.k_damp, pos=b.pos, rot=b.rot, vel=b.velocity,
                         pinned=np.asarray(b.pinned, int) if b.pinned else None,
                         particle_volume=cell_volume, masses=b.masses,
                         name=b.mesh or b.surface or b.shape)
    except (ValueError, ImportError) as e:  # MeshError is a ValueError
        raise SceneFileError(f"{where} {e}") from None


def add_body_pushes(spec, scene):
    """`scene` with the known forces of [[body_push]] on its bodies.

    Args:
        spec: the validated scene file (`SceneSpec`).
        scene: the host-side `Scene` of every piece combined; [[body_push]] body indexes its rigid bodies.

    Returns:
        The `Scene` with one push (force N, point m, start and end s) per [[body_push]] table.
    """
    for i, p in enumerate(spec.sections.body_push):
        where = f"{spec.path}: [[body_push]] {i}:"
        count = scene.num_bodies
        if not 0 <= p.body < count:
            raise SceneFileError(f"{where} body must be the index of a [[body]], in [0, {count}), got {p.body}")
        end = math.inf if p.end is None else p.end
        if not p.start < end:
            raise SceneFileError(f"{where} start ({p.start} s) must come before end ({end} s)")
        scene = scene.add_push(p.body, p.force, point=p.point, start=p.start, end=end)
    return scene
