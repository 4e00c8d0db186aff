"""[scene] and [material], each read once: [scene] into the cloth's layout and the ground and contact settings of
every component (`read_scene` -> `SceneOptions`), [material] into the cloth's material, the world's contact and
gravity, and the registry quantities it sets (`read_material` -> `MaterialOptions`). The cloth reader
(`scenefile.cloth`), the builder (`scenefile.build`), the quantities (`scenefile.quantities`) and `load_scene`
take these records."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import numpy as np

from gradsim_jax.scenefile.schema import MATERIAL_QUANTITIES, SceneFileError

#: The world's up axes a scene file may name, and the rotation taking a y-up vector to the same vector in a world
#: with that axis up ((x, y, z) -> (x, -z, y) for z: y-up's up becomes +z, its +z (towards a default camera)
#: becomes -y), the convention of Blender's glTF exchange.
UP_ROTATIONS = {"y": np.eye(3), "z": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])}

#: The defaults written for a y-up world, turned with the world for another up axis (`world_vector`).
Y_UP_GRAVITY, Y_UP_LIGHT = (0.0, -9.81, 0.0), (0.4, 1.0, -0.6)


@dataclasses.dataclass(frozen=True)
class ClothLayout:
    """The cloth of [scene] (a grid or a mesh; neither: no cloth).

    Attributes:
        grid: [dim_x, dim_y] cells of a cloth grid, or None.
        cell: [x, y] grid cell size, m.
        mesh: the triangle mesh (.obj) as written, or None.
        mesh_path: `mesh` resolved against the scene file's folder, or None.
        scale: scale applied to the mesh's vertices.
        pos: [3] translation of the cloth, m.
        rot: [4] rotation of the cloth, quaternion (w, x, y, z).
        pinned: indices of pinned vertices.
        fix: grid sides to pin (left, right, top, bottom).
        velocity: [3] initial velocity of every particle, m/s.
        pin_key_times: keyframe times of the pinned vertices' path, s (empty: they stay).
        pin_key_offsets: their offset from the start at each key, x, y, z per key, m.
    """

    grid: Optional[list]
    cell: list
    mesh: Optional[str]
    mesh_path: Optional[Path]
    scale: float
    pos: list
    rot: list
    pinned: list
    fix: list
    velocity: list
    pin_key_times: list = dataclasses.field(default_factory=list)
    pin_key_offsets: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class GroundOptions:
    """The ground and the contacts of [scene], for every component.

    Attributes:
        ground: collide with the ground plane, or None for the default (true with [[body]] tables).
        ground_height: height of the ground plane, m.
        rigid_contact: "penalty", "impulse" or "none" for the rigid bodies' ground contact, or None (default).
        body_contact: the rigid bodies collide with each other, or None (default).
        particle_body_contact: the particles and the rigid bodies meet, or None (default).
        contact_smoothing: smooth onset of every penalty contact, m (0: none).
        particle_radius: contact radius of each particle, m.
        ground_normal: [3] the ground plane's normal (the up axis unless [scene] ground_normal says otherwise).
        up: the world's up axis, "y" or "z".
        ground_size: m, the side of the ground's square of two triangles for Blender's collision response (0:
            unbounded).
    """

    ground: Optional[bool]
    ground_height: float
    rigid_contact: Optional[str]
    body_contact: Optional[bool]
    particle_body_contact: Optional[bool]
    contact_smoothing: float
    particle_radius: float
    ground_normal: tuple = (0.0, 1.0, 0.0)
    up: str = "y"
    ground_size: float = 0.0


@dataclasses.dataclass(frozen=True)
class SceneOptions:
    """[scene] read.

    Attributes:
        cloth: the `ClothLayout`.
        ground: the `GroundOptions`.
    """

    cloth: ClothLayout
    ground: GroundOptions


@dataclasses.dataclass(frozen=True)
class ClothMaterial:
    """The cloth's material of [material].

    Attributes:
        mass: mass per particle, kg.
        tri_ke: membrane stretch stiffness k_mu.
        tri_ka: membrane area stiffness k_lambda.
        tri_kd: membrane damping.
        tri_drag: aerodynamic drag coefficient.
        tri_lift: aerodynamic lift coefficient.
        bend_ke: bending stiffness (0: no bending elements).
        bend_kd: bending damping.
        spring_ke: N/m, stiffness of a spring along every mesh edge (0 with spring_kd 0: none).
        spring_kd: N s/m, those springs' damping along their length.
    """

    mass: float
    tri_ke: float
    tri_ka: float
    tri_kd: float
    tri_drag: float
    tri_lift: float
    bend_ke: float
    bend_kd: float
    spring_ke: float = 0.0
    spring_kd: float = 0.0


@dataclasses.dataclass(frozen=True)
class MaterialOptions:
    """[material] read.

    Attributes:
        cloth: the `ClothMaterial`.
        gravity: [3] gravity, m/s^2.
        contact_mu: ground friction coefficient of the particles.
        contact_ke: ground contact stiffness of the particles.
        contact_kd: ground contact damping of the particles.
        contact_kf: ground friction stiffness of the particles.
        aerodynamics: force the drag/lift term on.
        membrane: the membrane on (True), off (False) or as its coefficients say (None).
        bending: the bending model, "dihedral" or "angular".
        quantities: {key: value or None} for every key of `MATERIAL_QUANTITIES` (registry quantities set over
            the built scene), in the schema's order.
    """

    cloth: ClothMaterial
    gravity: list
    contact_mu: float
    contact_ke: float
    contact_kd: float
    contact_kf: float
    aerodynamics: bool
    quantities: dict
    membrane: Optional[bool] = None
    bending: str = "dihedral"


def read_scene(spec) -> SceneOptions:
    """[scene] as `SceneOptions` (the one reader of the section; values are checked where they are built).

    Args:
        spec: the validated scene file (`SceneSpec`); the mesh's path is relative to its folder.

    Returns:
        The `SceneOptions`.
    """
    sc = spec.sections.scene
    cloth = ClothLayout(grid=sc.grid, cell=sc.cell, mesh=sc.mesh,
                        mesh_path=None if sc.mesh is None else spec.resolve(sc.mesh), scale=sc.scale, pos=sc.pos,
                        rot=sc.rot, pinned=sc.pinned, fix=sc.fix, velocity=sc.velocity,
                        pin_key_times=sc.pin_key_times, pin_key_offsets=sc.pin_key_offsets)
    up = sc.up
    if up not in UP_ROTATIONS:
        raise SceneFileError(f"{spec.path}: [scene] up must be one of {', '.join(map(repr, UP_ROTATIONS))}, got "
                             f"{up!r}")
    normal = turned(up, (0.0, 1.0, 0.0)) if sc.ground_normal is None else tuple(sc.ground_normal)
    if not np.all(np.isfinite(normal)) or np.linalg.norm(normal) == 0.0:
        raise SceneFileError(f"{spec.path}: [scene] ground_normal must be a finite nonzero vector, got "
                             f"{list(sc.ground_normal)}")
    ground = GroundOptions(ground=sc.ground, ground_height=sc.ground_height, rigid_contact=sc.rigid_contact,
                           body_contact=sc.body_contact, particle_body_contact=sc.particle_body_contact,
                           contact_smoothing=sc.contact_smoothing, particle_radius=sc.particle_radius,
                           ground_normal=tuple(float(v) for v in normal), up=up, ground_size=float(sc.ground_size))
    if not ground.ground_size >= 0.0:
        raise SceneFileError(f"{spec.path}: [scene] ground_size must be >= 0 (m), got {sc.ground_size}")
    return SceneOptions(cloth=cloth, ground=ground)


def world_up(spec) -> str:
    """[scene] up: the world's up axis (read by `read_scene`).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        "y" or "z".
    """
    return read_scene(spec).ground.up


def world_vector(spec, y_up) -> tuple:
    """A vector written for a y-up world, turned into the file's world ([scene] up; `turned`).

    Args:
        spec: the validated scene file (`SceneSpec`).
        y_up: [3] the vector in a y-up world (a default gravity, light direction, camera up or eye offset).

    Returns:
        [3] tuple of floats, the same vector in the file's world.
    """
    return turned(world_up(spec), y_up)


def turned(up: str, y_up) -> tuple:
    """A vector written for a y-up world, in a world whose up axis is `up` (`UP_ROTATIONS`).

    Args:
        up: the world's up axis, "y" or "z".
        y_up: [3] the vector in a y-up world.

    Returns:
        [3] tuple of floats.
    """
    return tuple(float(v) for v in UP_ROTATIONS[up] @ np.asarray(y_up, np.float64))


def read_material(spec) -> MaterialOptions:
    """[material] as `MaterialOptions` (the one reader of the section; values are checked where they are used).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `MaterialOptions`.
    """
    mat = spec.sections.material
    cloth = ClothMaterial(mass=mat.mass, tri_ke=mat.tri_ke, tri_ka=mat.tri_ka, tri_kd=mat.tri_kd,
                          tri_drag=mat.tri_drag, tri_lift=mat.tri_lift, bend_ke=mat.bend_ke, bend_kd=mat.bend_kd,
                          spring_ke=mat.spring_ke, spring_kd=mat.spring_kd)
    values = dataclasses.asdict(mat)
    gravity = world_vector(spec, Y_UP_GRAVITY) if mat.gravity is None else mat.gravity
    return MaterialOptions(cloth=cloth, gravity=gravity, contact_mu=mat.contact_mu, contact_ke=mat.contact_ke,
                           contact_kd=mat.contact_kd, contact_kf=mat.contact_kf, aerodynamics=mat.aerodynamics,
                           quantities={key: values[key] for key in MATERIAL_QUANTITIES}, membrane=mat.membrane,
                           bending=mat.bending_model)
