"""Scene files: a TOML description of a recording of a cloth, rigid bodies or both, for `gradsim-jax fit`
and `gradsim-jax render`.

One table, `SCHEMA`, lists every section and key with its type, default and meaning. The loader
validates against it (unknown section or key, wrong type, missing file or required key: `SceneFileError`
naming the file and the key) and `help_text()` prints it, so the documentation cannot drift from the
checks. Relative paths are relative to the scene file's folder. Example: examples/cloth_scene.toml.

[[body]] (an array of tables: one per rigid body) and [[body_push]] (known forces on bodies) are the
sections `ARRAY_SECTIONS`; a single [body] table reads as one body. A scene has a cloth ([scene] grid or
mesh), bodies, or both (one video; the bodies collide with the ground only, never with the cloth).

Values in [material] are the scene's known physical values (what `gradsim-jax render` uses to make a
synthetic target); [initial] overrides them as the starting guess of the quantities listed in
[fit] free. Both take a key for every fittable quantity of the registry (`initial_fields`,
`material_fields`): the builders' own keys, and for the others ([[soft_body]] and [[body]] values, masses,
densities) a value set over the built scene. [scene] ground governs the ground of every component.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import warnings
import tomllib
from pathlib import Path
from typing import Any, Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry import cloth_grid, cloth_mesh, obj, rigid_body
from gradsim_jax.geometry import rigid as rigid_geometry
from gradsim_jax.geometry.scene import combine, quat_rotate
from gradsim_jax.fit.transforms import Bounded
from gradsim_jax.render.blur import BLUR_MAX
from gradsim_jax.physics import SemiImplicitEuler, get_path, replace_paths
from gradsim_jax.render.mesh import scene_faces, scene_vertices
from gradsim_jax.sysid import (LOSSES, QUANTITIES, Experiment, FitConfig, canonical, check_config, default_theta,
                                with_camera_pose)


class SceneFileError(ValueError):
    """A scene file is malformed: the message names the file and the offending key."""


@dataclasses.dataclass(frozen=True)
class Field:
    type: str  # "int", "float", "bool", "str", "float[3]", "int[2]", "int[]", "float[]", "str[]", "float[4x4]"
    default: Any
    doc: str
    required: bool = False


BODY_SHAPES = ("box", "sphere", "cylinder", "capsule", "cone")
SOFT_SHAPES = ("box", "sphere", "cylinder")
#: Limits that keep a body's mesh small enough to check and render (10 4^5 + 2 = 10242 vertices).
MAX_SUBDIVISIONS, MAX_SEGMENTS = 5, 256
RIGID_CONTACTS = ("penalty", "impulse", "none")

_QUANTITY_NAMES = ", ".join(sorted({a for q in QUANTITIES.values() for a in q.aliases}))

SCHEMA: dict[str, dict[str, Field]] = {
    "scene": {
        "grid": Field("int[2]", None, "cloth grid of [dim_x, dim_y] cells (give grid or mesh)"),
        "cell": Field("float[2]", [0.1, 0.1], "grid cell size [x, y] in m"),
        "mesh": Field("str", None, "path of a triangle mesh (.obj, v/f lines) instead of a grid"),
        "scale": Field("float", 1.0, "scale applied to the mesh's vertices"),
        "pos": Field("float[3]", [0.0, 0.0, 0.0], "translation of the cloth, m"),
        "rot": Field("float[4]", [1.0, 0.0, 0.0, 0.0], "rotation of the cloth, unit quaternion (w, x, y, z)"),
        "pinned": Field("int[]", [], "indices of pinned (fixed) vertices"),
        "fix": Field("str[]", [], "grid sides to pin: any of left, right, top, bottom"),
        "velocity": Field("float[3]", [0.0, 0.0, 0.0], "initial velocity of every particle, m/s"),
        "ground": Field("bool", None, "collide with the ground plane y = ground_height: every component (cloth, "
                                      "soft bodies, rigid bodies); default: true when the file has [[body]] tables"),
        "ground_height": Field("float", 0.0, "height of the ground plane, m"),
        "rigid_contact": Field("str", None, "ground contact of the [[body]] bodies: \"penalty\" (their "
                                            "contact_ke/kd/kf/mu; the default with a ground), \"impulse\" "
                                            "(restitution) or \"none\" (the default without one)"),
        "particle_radius": Field("float", 0.01, "contact radius of each particle, m: particles rest on the ground "
                                                "at y = ground_height + particle_radius (one placed lower is "
                                                "pushed out, fast)"),
    },
    "material": {
        "mass": Field("float", 0.01, "mass per particle, kg"),
        "tri_ke": Field("float", 100.0, "membrane stretch stiffness k_mu (quantity cloth.tri_ke, 'stiffness')"),
        "tri_ka": Field("float", 100.0, "membrane area stiffness k_lambda (keeps its ratio to tri_ke in fits)"),
        "tri_kd": Field("float", 1.0, "membrane damping (quantity cloth.tri_kd, 'damping')"),
        "bend_ke": Field("float", 0.0, "bending stiffness (quantity cloth.bend_ke, 'bending'; 0: no bending "
                                       "elements)"),
        "bend_kd": Field("float", 0.0, "bending damping"),
        "tri_drag": Field("float", 0.0, "aerodynamic drag coefficient (nonzero switches aerodynamics on)"),
        "tri_lift": Field("float", 0.0, "aerodynamic lift coefficient"),
        "aerodynamics": Field("bool", False, "force the drag/lift term on (to fit drag or lift from a guess)"),
        "contact_mu": Field("float", 0.5, "ground friction coefficient"),
        "contact_ke": Field("float", 1.0e3, "ground contact stiffness"),
        "contact_kd": Field("float", 10.0, "ground contact damping"),
        "contact_kf": Field("float", 100.0, "ground friction stiffness"),
        "gravity": Field("float[3]", [0.0, -9.81, 0.0], "gravity, m/s^2"),
    },
    "push": {
        "force": Field("float[3]", [0.0, 0.0, 0.0], "known force on each pushed particle, N"),
        "particles": Field("int[]", [], "indices of the pushed particles"),
        "frames": Field("int", 0, "number of leading frames the push lasts"),
    },
    "body": {
        "shape": Field("str", None, f"rigid body primitive: {', '.join(BODY_SHAPES)} (or give mesh)"),
        "mesh": Field("str", None, "closed triangle mesh file of the body (.obj, .stl, .ply) instead of shape"),
        "scale": Field("float", 1.0, "scale applied to the mesh's vertices"),
        "half_extents": Field("float[3]", None, "box: half extents, m"),
        "radius": Field("float", None, "sphere (circumradius), cylinder, capsule, cone: radius, m"),
        "height": Field("float", None, "cylinder, cone: height; capsule: length of its cylindrical part, m"),
        "subdivisions": Field("int", 2, f"sphere: icosphere subdivisions (0 to {MAX_SUBDIVISIONS})"),
        "segments": Field("int", 24, f"cylinder, capsule, cone: segments around the axis (3 to {MAX_SEGMENTS})"),
        "density": Field("float", None, "kg/m^3 (give density or mass; neither: 1000, water)"),
        "mass": Field("float", None, "kg (quantity body_mass)"),
        "pos": Field("float[3]", [0.0, 0.0, 0.0], "where the body's mesh origin starts (primitives: its centre of "
                                                  "mass), m"),
        "rot": Field("float[4]", [1.0, 0.0, 0.0, 0.0], "initial rotation, unit quaternion (w, x, y, z)"),
        "velocity": Field("float[3]", [0.0, 0.0, 0.0], "initial velocity of the centre of mass, m/s"),
        "omega": Field("float[3]", [0.0, 0.0, 0.0], "initial angular velocity (world frame), rad/s"),
        "contact_ke": Field("float", 1.0e4, "ground contact stiffness, N/m (penalty; quantity body_ke)"),
        "contact_kd": Field("float", 100.0, "ground contact damping, N s/m (penalty; quantity body_kd)"),
        "contact_kf": Field("float", 100.0, "ground friction stiffness, N s/m (penalty; quantity body_kf)"),
        "contact_mu": Field("float", 0.5, "ground friction coefficient (penalty; quantity body_mu)"),
        "restitution": Field("float", 0.5, "coefficient of restitution in [0, 1] (impulse; quantity restitution)"),
        "color": Field("float[3]", None, "uniform RGB of the body (default: [render] color or the checkerboard)"),
    },
    "soft_body": {
        "shape": Field("str", None, f"FEM soft body primitive: {', '.join(SOFT_SHAPES)} (or give mesh / surface)"),
        "mesh": Field("str", None, "tet mesh file: gradSim's .tet, or .msh/.vtk/.vtu/... through meshio"),
        "surface": Field("str", None, "closed triangle mesh file (.obj, .stl, .ply) filled with tets by TetGen "
                                      "(pip install 'gradsim-jax[tetra]')"),
        "max_volume": Field("float", None, "surface: largest tet volume, m^3 (default: TetGen's choice)"),
        "scale": Field("float", 1.0, "scale applied to a mesh's or surface's vertices"),
        "size": Field("float[3]", None, "box: extent along x, y, z, m (centred on pos)"),
        "cells": Field("int[3]", None, "box: cells along x, y, z (default 2 2 2); sphere: cells per axis, "
                                       "first entry (default 4)"),
        "pattern": Field("int", 6, "box: tets per cell, 5 or 6"),
        "radius": Field("float", None, "sphere, cylinder: radius, m"),
        "height": Field("float", None, "cylinder: height (axis y), m"),
        "segments": Field("int", 12, "cylinder: segments around the axis"),
        "density": Field("float", 1000.0, "kg/m^3 (lumped: density V0 / 4 per tet vertex)"),
        "mass_model": Field("str", "lumped", "how density makes the particles' masses: \"lumped\" (density V0 / 4 "
                                             "from each tet to each of its vertices) or \"cell\" (box: a whole "
                                             "cell's mass to every particle, as Warp's add_soft_grid)"),
        "masses": Field("float[]", None, "the mass of every particle of this body's mesh, kg, instead of "
                                         "density's (a fitted density would replace them)"),
        "k_mu": Field("float", 1.0e5, "shear stiffness (Lame mu), Pa (quantity fem_mu)"),
        "k_lambda": Field("float", 1.0e5, "volume stiffness (Lame lambda), Pa (quantity fem_lambda)"),
        "k_damp": Field("float", 10.0, "damping, Pa s (quantity fem_damping)"),
        "pos": Field("float[3]", [0.0, 0.0, 0.0], "where the mesh origin starts (primitives: their centre), m"),
        "rot": Field("float[4]", [1.0, 0.0, 0.0, 0.0], "initial rotation, unit quaternion (w, x, y, z)"),
        "velocity": Field("float[3]", [0.0, 0.0, 0.0], "initial velocity of every vertex, m/s"),
        "pinned": Field("int[]", [], "indices of kinematic vertices (of this body's mesh)"),
    },
    "body_push": {
        "body": Field("int", None, "index of the pushed body (0: the first [[body]])", required=True),
        "force": Field("float[3]", None, "known force, N (world frame)", required=True),
        "point": Field("float[3]", [0.0, 0.0, 0.0], "where it acts, m (body frame, from the centre of mass)"),
        "start": Field("float", 0.0, "when it starts, s"),
        "end": Field("float", None, "when it ends, s (default: never)"),
    },
    "camera": {
        "distance": Field("float", None, "look-at camera: distance from the look-at point, m (default 2)"),
        "elevation": Field("float", None, "look-at camera: elevation, degrees (default 20)"),
        "azimuth": Field("float", None, "look-at camera: azimuth, degrees (default 0: eye on -z looking along +z)"),
        "at": Field("float[3]", [0.0, 0.0, 0.0], "look-at point, m"),
        "up": Field("float[3]", [0.0, 1.0, 0.0], "look-at camera: world direction shown upwards"),
        "eye": Field("float[3]", None, "camera centre, m (a look-at pose towards 'at' instead of the angles)"),
        "view_angle": Field("float", None, "half vertical field of view, degrees (default 30; not with fx/fy)"),
        "fx": Field("float", None, "focal length in pixels (a calibrated camera; with fy, cx, cy)"),
        "fy": Field("float", None, "focal length in pixels, vertical"),
        "cx": Field("float", None, "principal point column in pixels, top-left pixel centre = 0 (default: centre)"),
        "cy": Field("float", None, "principal point row in pixels (default: centre)"),
        "image_size": Field("int[2]", None, "[width, height] the intrinsics refer to (default: the target's "
                                             "frames, else the render size); scaled to the render size"),
        "distortion": Field("float[]", None, "OpenCV distortion k1, k2, p1, p2[, k3...]: target frames are "
                                              "undistorted before the fit"),
        "calibration": Field("str", None, "OpenCV calibration file (.yml/.yaml/.xml/.json): intrinsics, "
                                          "distortion, size, optional pose"),
        "pose": Field("float[4x4]", None, "world-to-camera matrix [R | t] (OpenCV axes: x right, y down, z forward)"),
        "rvec": Field("float[3]", None, "OpenCV Rodrigues rotation vector of the pose (with tvec)"),
        "tvec": Field("float[3]", None, "OpenCV translation of the pose, m (with rvec)"),
        "near": Field("float", None, "nearest depth rendered, m (default: 0.1 x distance, at most 1; else 0.05)"),
        "far": Field("float", None, "farthest depth rendered, m (default 100 x distance, else 100)"),
    },
    "render": {
        "width": Field("int", 64, "render width in pixels (the target is resized to it)"),
        "height": Field("int", 64, "render height in pixels"),
        "background": Field("float[3]", [0.0, 0.0, 0.0], "background RGB in [0, 1]"),
        "background_image": Field("str", None, "picture of the static background behind the scene, or "
                                               "\"median\": the per-pixel median of the target's frames"),
        "color": Field("float[3]", None, "uniform cloth RGB (default: a colourful checkerboard)"),
        "ambient": Field("float", 0.45, "ambient light"),
        "directional": Field("float", 0.6, "directional light"),
        "light_direction": Field("float[3]", [0.4, 1.0, -0.6], "direction towards the light"),
        "tile_capacity": Field("int", None, "faces kept per 8x8 tile (default: all faces, exact)"),
        "pixel_capacity": Field("int", None, "faces kept per pixel (default: all faces, exact)"),
        "coverage": Field("str", "box", "edge model: \"box\" (the covered fraction of each pixel, as a camera "
                                        "sees it) or \"softras\" (SoftRas's soft silhouette)"),
    },
    "simulation": {
        "fps": Field("float", 60.0, "frames per second of the video"),
        "substeps": Field("int", 16, "integration steps per frame"),
        "frames": Field("int", None, "frames to simulate (default: target frames - 1)"),
        "contact": Field("str", "implicit", "how the ground contact's damping and friction are integrated: "
                                            "\"implicit\" (backward: stable, smooth gradients through sliding "
                                            "to rest) or \"explicit\" (as Warp 1.8 does: chatters and loses its "
                                            "gradient when dt kd / m or dt kf / m nears 1)"),
    },
    "target": {
        "video": Field("str", None, "target video: .mp4, .gif, or a folder of images (--target overrides)"),
        "mask": Field("str", None, "alpha mask video or folder (else the file's alpha or the key color)"),
        "key_color": Field("float[3]", None, "background RGB of the target: alpha from the distance to it"),
        "tolerance": Field("float", 0.1, "key color tolerance"),
    },
    "fit": {
        "free": Field("str[]", None, f"quantities to estimate: {_QUANTITY_NAMES}", required=True),
        "iterations": Field("int", 100, "Adam iterations"),
        "learning_rate": Field("float", 0.05, "Adam learning rate (cosine-decayed; log space for positive values)"),
        "loss": Field("str", None, f"image loss: {', '.join(LOSSES)} (default: rgba when the target's alpha "
                                   "is observed, else rgb against the render over the known background)"),
        "frame_stride": Field("int", 1, "use every k-th frame in the loss"),
        "horizon": Field("int", None, "fit the first frames first, growing to all over half the iterations"),
        "polish": Field("int", 10, "Levenberg-Marquardt steps after Adam (few free scalars only)"),
        "rounds": Field("int", 1, "up to this many rounds of Adam then the polish, while the loss stays over 4 x "
                                  "the target's noise floor"),
        "round_iterations": Field("int", None, "Adam iterations of each later round (default: half of iterations)"),
        "window": Field("int", None, "long recordings: truncated backpropagation, gradients reach back at most "
                                     "this many frames (see `gradsim-jax horizon`)"),
        "density_first": Field("int", 0, "with particle_mass free: first fit a density field of the soft bodies in "
                                         "this many Adam iterations, then every mass from there (0: none)"),
        "density_learning_rate": Field("float", 0.1, "Adam learning rate of the density field stage"),
        "blur": Field("str|float", None, "a Gaussian blur of the rendered frames (the target's softer edges: a "
                                         "lens's, another renderer's): \"auto\" (fitted when the target's edges "
                                         "measure blurrier than the render's at the start), \"fit\", \"off\", or "
                                         "a fixed width in pixels (default: auto, off with --true)"),
        "edge_model": Field("str", None, "\"auto\" (when the loss left lies on the outlines, try the other [render] "
                                         "coverage at the estimate and continue with it if it explains the video "
                                         "better) or \"fixed\" (default: auto, fixed with --true)"),
    },
    # [initial]: one key per fittable quantity of the registry (`initial_fields`).
}


def _file_quantities():
    """The registry's quantities that scene files name ([material] and [initial]), in registry order."""
    return [q for q in QUANTITIES.values() if q.file_key and q.read is not None]


def _values_doc(q) -> str:
    one = {"float[3]": " (one for every particle)", "float[]": " (one per particle, in the scene's order)"}
    return f"{q.doc}, {q.unit}{one.get(q.file_type, '')}"


def initial_fields() -> dict:
    """[initial]: the initial guess of every quantity a fit can estimate, from the registry."""
    return {q.file_key: Field(q.file_type, None, f"initial guess of {q.name}: {_values_doc(q)}")
            for q in _file_quantities()}


def material_fields(builder: dict) -> dict:
    """[material]: the builder's keys, then every other fittable quantity of the registry, which sets its
    value in the built scene (over what the builders made)."""
    extra = {q.file_key: Field(q.file_type, None, f"{q.name}: {_values_doc(q)}; sets it in the built scene "
                                                  "(default: the builders' values)")
             for q in _file_quantities() if q.file_key not in builder}
    return {**builder, **extra}


#: [material] keys that set a registered quantity in the built scene (the builders' own keys apart).
MATERIAL_QUANTITIES = {q.file_key: q.name for q in _file_quantities() if q.file_key not in SCHEMA["material"]}
SCHEMA["material"] = material_fields(SCHEMA["material"])
SCHEMA["initial"] = initial_fields()


def check_quantity_value(where: str, key: str, value) -> np.ndarray:
    """float64 array of a [material] or [initial] value of a quantity, checked: finite, positive for those fitted
    in log space, strictly inside a bounded one's range (SceneFileError naming `where` and the key)."""
    q = QUANTITIES[canonical(key)]
    a = np.asarray(value, np.float64)
    if q.transform == "log" and not np.all(np.isfinite(a) & (a > 0)):
        raise SceneFileError(f"{where} {key} must be positive and finite ({q.doc}, {q.unit}; fitted in log space), "
                             f"got {value}")
    if not np.all(np.isfinite(a)):
        raise SceneFileError(f"{where} {key} must be finite, got {value}")
    if isinstance(q.transform, Bounded) and not np.all((q.transform.lo < a) & (a < q.transform.hi)):
        raise SceneFileError(f"{where} {key} must be strictly between {q.transform.lo:g} and {q.transform.hi:g} "
                             f"({q.doc}; fitted through a logistic map), got {value}")
    return a

#: Sections that are arrays of tables ([[body]]): one entry per body or push.
ARRAY_SECTIONS = ("body", "soft_body", "body_push")
#: [scene] is required unless the file has bodies or soft bodies.
REQUIRED_SECTIONS = ("scene", "fit")

#: Keys renamed so that builders, scene files, Params and quantities say the same: {section: {old: new}}.
#: The old key still reads, with a DeprecationWarning.
RENAMED = {"material": {"edge_ke": "bend_ke", "edge_kd": "bend_kd", "drag": "tri_drag", "lift": "tri_lift"},
           "initial": {"stiffness": "tri_ke", "damping": "tri_kd", "bending": "bend_ke", "edge_ke": "bend_ke",
                       "drag": "tri_drag", "lift": "tri_lift", "friction": "contact_mu"}}


def help_text() -> str:
    """Every section and key of a scene file, generated from SCHEMA."""
    lines = ["Scene file (TOML). Sections and keys (type, default):"]
    for section, fields in SCHEMA.items():
        req = " (required)" if section in REQUIRED_SECTIONS else ""
        if section == "scene":
            req = " (required for a cloth: grid or mesh; a scene of [[body]] bodies only may leave it out)"
        if section in ARRAY_SECTIONS:
            what = {"body": "rigid body", "soft_body": "soft body"}.get(section, "push")
            lines.append(f"  [[{section}]]  (array of tables: repeat it, one per {what})")
            if section == "body":
                lines.append("    rigid bodies collide with the ground only: not with the cloth, nor each other")
            if section == "soft_body":
                lines.append("    soft bodies are particles: the ground ([scene] ground) and [material] contact_* apply; "
                             "they do not collide with the cloth, bodies or each other")
        else:
            lines.append(f"  [{section}]{req}")
        for key, f in fields.items():
            default = "required" if f.required else ("-" if f.default is None else repr(f.default))
            lines.append(f"    {key:<16} {f.type:<9} {default:<22} {f.doc}")
    return "\n".join(lines)


def _check_type(path, section, key, value, ftype):
    """SceneFileError unless `value` has the SCHEMA type `ftype`; `section` is a name ("fit") or, for a table
    of an array section, its label ("[[body]] 2:")."""
    where = section if section.startswith("[") else f"[{section}]"

    def fail(expected):
        raise SceneFileError(f"{path}: {where} {key} must be {expected}, got {value!r}")

    is_num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    is_int = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    if ftype == "int":
        if not is_int(value):
            fail("an integer")
    elif ftype == "float":
        if not is_num(value):
            fail("a number")
    elif ftype == "bool":
        if not isinstance(value, bool):
            fail("true or false")
    elif ftype == "str":
        if not isinstance(value, str):
            fail("a string")
    elif ftype == "str|float":
        if not (isinstance(value, str) or is_num(value)):
            fail("a string or a number")
    elif ftype == "float[4x4]":
        if not (isinstance(value, list) and len(value) == 4
                and all(isinstance(r, list) and len(r) == 4 and all(is_num(v) for v in r) for r in value)):
            fail("a 4 x 4 matrix (a list of 4 rows of 4 numbers)")
    elif ftype.endswith("[]"):
        elem = ftype[:-2]
        check = {"int": is_int, "float": is_num, "str": lambda v: isinstance(v, str)}[elem]
        if not isinstance(value, list) or not all(check(v) for v in value):
            fail(f"a list of {dict(int='integers', float='numbers', str='strings')[elem]}")
    else:
        elem, count = ftype[:-1].split("[")
        count = int(count)
        check = is_int if elem == "int" else is_num
        if not isinstance(value, list) or len(value) != count or not all(check(v) for v in value):
            fail(f"a list of {count} {'integers' if elem == 'int' else 'numbers'}")


def read_scene_file(path) -> dict:
    """Parse and validate a scene file: {section: {key: value}} with defaults filled in."""
    path = Path(path)
    if not path.is_file():
        raise SceneFileError(f"{path}: scene file not found")
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:  # TOML is UTF-8 text
        raise SceneFileError(f"{path}: not valid TOML: {e}") from e
    for section, value in raw.items():
        if section not in SCHEMA:
            raise SceneFileError(f"{path}: unknown section [{section}]; known sections: {', '.join(SCHEMA)}")
        if section in ARRAY_SECTIONS:
            if not (isinstance(value, dict) or (isinstance(value, list) and value
                                                and all(isinstance(t, dict) for t in value))):
                raise SceneFileError(f"{path}: {section} must be [[{section}]] tables (one per entry)")
        elif not isinstance(value, dict):
            raise SceneFileError(f"{path}: {section} must be a [{section}] table")
    for section in REQUIRED_SECTIONS:
        if section not in raw and not (section == "scene" and (raw.get("body") or raw.get("soft_body"))):
            raise SceneFileError(f"{path}: missing section [{section}]")
    out = {}
    for section in ARRAY_SECTIONS:
        tables = raw.get(section, [])
        if isinstance(tables, dict):  # a single [body] table: one body, named as written
            out[section] = [_read_table(path, section, f"[{section}]", tables)]
        else:
            out[section] = [_read_table(path, section, f"[[{section}]] {i}:", t) for i, t in enumerate(tables)]
    for section, fields in SCHEMA.items():
        if section in ARRAY_SECTIONS:
            continue
        given = dict(raw.get(section, {}))
        for old, new in RENAMED.get(section, {}).items():
            if old in given:
                if new in given:
                    raise SceneFileError(f"{path}: [{section}] gives both {old!r} and {new!r} (the new name of "
                                         f"{old!r}): keep {new!r}")
                warnings.warn(f"{path}: [{section}] {old!r} is now called {new!r}", DeprecationWarning,
                              stacklevel=2)
                given[new] = given.pop(old)
        for key, value in given.items():
            if key not in fields:
                raise SceneFileError(
                    f"{path}: unknown key {key!r} in [{section}]; known keys: {', '.join(fields)}")
            _check_type(path, section, key, value, fields[key].type)
        for key, f in fields.items():
            if f.required and key not in given:
                raise SceneFileError(f"{path}: missing key {key!r} in [{section}]")
        out[section] = {key: given.get(key, f.default) for key, f in fields.items()}
    return out


def _read_table(path, section: str, label: str, given: dict) -> dict:
    """One table of an array section, checked against SCHEMA[section] (messages name it by `label`, e.g.
    "[[body]] 2:"), with defaults filled in."""
    fields = SCHEMA[section]
    for key, value in given.items():
        if key not in fields:
            raise SceneFileError(f"{path}: {label} unknown key {key!r}; known keys: {', '.join(fields)}")
        _check_type(path, label, key, value, fields[key].type)
    for key, f in fields.items():
        if f.required and key not in given:
            raise SceneFileError(f"{path}: {label} missing key {key!r}")
    return {key: given.get(key, f.default) for key, f in fields.items()}


def read_obj(path) -> tuple[np.ndarray, np.ndarray]:
    """`geometry.obj.read_obj` for a scene file: its refusals are `SceneFileError`s, with the same message."""
    try:
        return obj.read_obj(path)
    except obj.MeshFileError as e:
        raise SceneFileError(str(e)) from e


@dataclasses.dataclass
class SceneSpec:
    """A validated scene file: `values` by section, `path`, and helpers to build what a fit needs."""

    path: Path
    values: dict

    def resolve(self, relative: str) -> Path:
        p = Path(relative).expanduser()
        return p if p.is_absolute() else self.path.parent / p

    @property
    def fit_config(self) -> FitConfig:
        f = self.values["fit"]
        try:
            free = tuple(canonical(n) for n in f["free"])
        except ValueError as e:
            raise SceneFileError(f"{self.path}: [fit] free: {e}") from None
        if not free:
            raise SceneFileError(f"{self.path}: [fit] free must name at least one quantity")
        if f["loss"] is not None and f["loss"] not in LOSSES:
            raise SceneFileError(f"{self.path}: [fit] loss must be one of {LOSSES}, got {f['loss']!r}")
        for key, least in (("iterations", 0), ("polish", 0), ("frame_stride", 1), ("horizon", 1), ("window", 1),
                           ("rounds", 1), ("round_iterations", 1), ("density_first", 0)):
            if f[key] is not None and f[key] < least:
                allowed = "0 or more" if least == 0 else f"at least {least}"
                raise SceneFileError(f"{self.path}: [fit] {key} must be {allowed}, got {f[key]}")
        if not (math.isfinite(f["learning_rate"]) and f["learning_rate"] > 0):
            raise SceneFileError(f"{self.path}: [fit] learning_rate must be a positive number (a negative one "
                                 f"climbs the loss), got {f['learning_rate']}")
        if f["blur"] is not None and not (f["blur"] in ("auto", "fit", "off") or (
                not isinstance(f["blur"], str) and 0.0 <= f["blur"] <= BLUR_MAX)):
            raise SceneFileError(f'{self.path}: [fit] blur must be "auto", "fit", "off" or a width in pixels in [0, '
                                 f'{BLUR_MAX:g}], got {f["blur"]!r}')
        if f["edge_model"] is not None and f["edge_model"] not in ("auto", "fixed"):
            raise SceneFileError(f'{self.path}: [fit] edge_model must be "auto" or "fixed", got {f["edge_model"]!r}')
        if not (math.isfinite(f["density_learning_rate"]) and f["density_learning_rate"] > 0):
            raise SceneFileError(f"{self.path}: [fit] density_learning_rate must be a positive number, got "
                                 f"{f['density_learning_rate']}")
        if f["density_first"] and "particle_mass" not in free:
            raise SceneFileError(f"{self.path}: [fit] density_first fits a density field before every particle's "
                                 f"mass: particle_mass must be in free")
        return FitConfig(free=free, iterations=f["iterations"], learning_rate=f["learning_rate"], loss=f["loss"] or "auto",
                         frame_stride=f["frame_stride"], horizon=f["horizon"], polish=f["polish"],
                         window=f["window"], rounds=f["rounds"], round_iterations=f["round_iterations"],
                         density_first=f["density_first"], density_learning_rate=f["density_learning_rate"],
                         **{k: f[k] for k in ("blur", "edge_model") if f[k] is not None})

    def content_sha256(self) -> str:
        """sha256 of the parsed values that describe the scene, i.e. all but [target], [fit] and [initial]
        (a fit records those apart: the target's frames, its settings and its initial guess)."""
        scene = {k: v for k, v in self.values.items() if k not in ("target", "fit", "initial")}
        return hashlib.sha256(json.dumps(scene, sort_keys=True).encode()).hexdigest()

    def check_initial(self) -> None:
        """[initial] values, and [material] values of registered quantities, must be finite, positive for the
        quantities fitted in log space, and inside a bounded quantity's range."""
        for section in ("initial", "material"):
            for key, value in self.values[section].items():
                if value is not None and (section == "initial" or key in MATERIAL_QUANTITIES):
                    check_quantity_value(f"{self.path}: [{section}]", key, value)

    def initial_theta(self, exp: Experiment) -> dict:
        """The experiment's theta with [initial] values for the free quantities."""
        theta = dict(exp.theta)
        for key, value in self.values["initial"].items():
            if value is None:
                continue
            name = canonical(key)
            theta[name] = jnp.asarray(self._scene_value("initial", key, value, exp.topology, exp.state0), exp.dtype)
        if "camera_pose" in self.fit_config.free:
            theta = with_camera_pose(exp, theta)
        return theta

    def _scene_value(self, section: str, key: str, value, topology, state0) -> np.ndarray:
        """A [material] or [initial] value of a quantity, in the shape theta holds it for this scene: a velocity
        [3] for every particle, one value per particle checked against their number; SceneFileError when the
        scene has nothing the quantity sets."""
        name = canonical(key)
        q = QUANTITIES[name]
        a = np.asarray(value, np.float64)
        n = int(np.shape(state0.particles.x)[0])
        if (q.applies is not None and not q.applies(topology)) or (q.field.startswith("particles.") and n == 0):
            raise SceneFileError(f"{self.path}: [{section}] {key}: the scene has no {q.doc}")
        if name == "velocity":
            return np.broadcast_to(a, (n, 3))
        if q.file_type == "float[]" and a.shape != (n,):
            raise SceneFileError(f"{self.path}: [{section}] {key} needs one value per particle: {n} (the cloth's, then "
                                 f"each soft body's in order), got {a.size}")
        return a

    def _material_quantities(self, topology, params, state0):
        """(params, state0) with the [material] values of registered quantities set (`MATERIAL_QUANTITIES`: the
        quantities the builders take no key for, e.g. fem_mu for every tet, body_mass for every body)."""
        from gradsim_jax.sysid.quantities import scene_context

        for key, name in MATERIAL_QUANTITIES.items():
            value = self.values["material"][key]
            if value is None:
                continue
            value = self._scene_value("material", key, value, topology, state0)
            q = QUANTITIES[name]
            ctx = scene_context(topology, params, state0)
            updates = q.expand(ctx, jnp.asarray(value, ctx.dtype))
            to_state = {k[len("state."):] if k.startswith("state.") else k: v for k, v in updates.items()
                        if k.startswith("state.") or q.container == "state"}
            to_params = {k: v for k, v in updates.items() if not (k.startswith("state.") or q.container == "state")}
            params = replace_paths(params, to_params) if to_params else params
            state0 = replace_paths(state0, to_state) if to_state else state0
        return params, state0

    def calibration(self):
        """The intrinsics of [camera] (fx, fy, cx, cy, distortion, image_size, or a calibration file) as a
        `Calibration`, or None for a look-at camera described by its field of view."""
        from gradsim_jax.render.calibration import CalibrationError, make_calibration, read_calibration

        cam, path = self.values["camera"], self.path
        numbers = {k: cam[k] for k in ("fx", "fy", "cx", "cy") if cam[k] is not None}
        try:
            if cam["calibration"] is not None:
                if numbers:
                    raise SceneFileError(f"{path}: [camera] give the intrinsics once: calibration or "
                                         f"{', '.join(numbers)}")
                cal = read_calibration(self.resolve(cam["calibration"]))
                if cam["distortion"] is not None:
                    cal = dataclasses.replace(cal, distortion=make_calibration(
                        cal.fx, cal.fy, cal.cx, cal.cy, cam["distortion"], source=f"{path}: [camera]").distortion)
            elif numbers:
                if "fx" not in numbers or "fy" not in numbers:
                    raise SceneFileError(f"{path}: [camera] a calibrated camera needs both fx and fy (pixels)")
                width, height = cam["image_size"] or (None, None)
                cx = numbers.get("cx", None if width is None else (width - 1) / 2.0)
                cy = numbers.get("cy", None if height is None else (height - 1) / 2.0)
                if cx is None or cy is None:
                    raise SceneFileError(f"{path}: [camera] give cx and cy, or image_size for a centred "
                                         "principal point")
                cal = make_calibration(numbers["fx"], numbers["fy"], cx, cy, cam["distortion"] or (), None,
                                       source=f"{path}: [camera]")
            elif cam["distortion"] is not None or cam["image_size"] is not None:
                raise SceneFileError(f"{path}: [camera] distortion and image_size need intrinsics "
                                     "(fx, fy, cx, cy or a calibration file)")
            else:
                return None
        except CalibrationError as e:
            reason = str(e) if str(e).startswith(str(path)) else f"{path}: [camera] calibration: {e}"
            raise SceneFileError(reason) from None
        if cam["image_size"] is not None:
            cal = dataclasses.replace(cal, image_size=tuple(cam["image_size"]))
        if cam["view_angle"] is not None:
            raise SceneFileError(f"{path}: [camera] view_angle describes a look-at camera; a calibrated camera "
                                 "has fx and fy instead")
        return cal

    def camera(self, native_size=None):
        """The render camera of [camera] at the [render] size. native_size: (height, width) of the target's
        frames, which the intrinsics refer to unless image_size (or the calibration file) says otherwise."""
        try:
            return self._camera(native_size)
        except SceneFileError:
            raise
        except ValueError as e:  # the camera code's own checks (up parallel to the view, depth range)
            raise SceneFileError(f"{self.path}: [camera] {str(e).removeprefix('camera ')}") from None

    def _camera(self, native_size=None):
        from gradsim_jax.render import Camera, camera_from_eye, look_at_camera
        from gradsim_jax.render.calibration import CalibrationError, check_rotation

        cam, ren, path = self.values["camera"], self.values["render"], self.path
        width, height = ren["width"], ren["height"]
        if not (width > 0 and height > 0):
            raise SceneFileError(f"{path}: [render] width and height must be positive")
        cal = self.calibration()
        spherical = any(cam[k] is not None for k in ("distance", "elevation", "azimuth"))
        forms = {"distance/elevation/azimuth": spherical, "eye": cam["eye"] is not None,
                 "pose": cam["pose"] is not None, "rvec/tvec": cam["rvec"] is not None or cam["tvec"] is not None}
        if cal is not None and (cal.rvec is not None or cal.world_to_camera is not None):
            forms["the calibration file's pose"] = True
        given = [k for k, on in forms.items() if on]
        if len(given) > 1:
            raise SceneFileError(f"{path}: [camera] give one pose, not {' and '.join(given)}")
        if forms["rvec/tvec"] and (cam["rvec"] is None or cam["tvec"] is None):
            raise SceneFileError(f"{path}: [camera] give both rvec and tvec")
        distance = cam["distance"] if cam["distance"] is not None else 2.0
        if not distance > 0:
            raise SceneFileError(f"{path}: [camera] distance must be positive, got {distance}")
        look_at = not given or spherical
        near = cam["near"] if cam["near"] is not None else (min(1.0, 0.1 * distance) if look_at else 0.05)
        far = cam["far"] if cam["far"] is not None else (100.0 * distance if look_at else 100.0)
        if not 0 < near < far:
            raise SceneFileError(f"{path}: [camera] needs 0 < near < far, got near={near}, far={far}")
        elevation = cam["elevation"] if cam["elevation"] is not None else 20.0
        azimuth = cam["azimuth"] if cam["azimuth"] is not None else 0.0
        at, up = tuple(cam["at"]), tuple(cam["up"])
        pose = {}
        try:
            if cam["pose"] is not None:
                m = np.asarray(cam["pose"], np.float64)
                check_rotation(m[:3, :3], f"{path}: [camera] pose")
                pose = {"world_to_camera": m}
            elif cam["rvec"] is not None:
                pose = {"rvec": cam["rvec"], "tvec": cam["tvec"]}
            elif cal is not None and cal.world_to_camera is not None:
                pose = {"world_to_camera": cal.world_to_camera}
            elif cal is not None and cal.rvec is not None:
                pose = {"rvec": cal.rvec, "tvec": cal.tvec}
        except CalibrationError as e:
            raise SceneFileError(str(e)) from None
        eye = cam["eye"]
        if look_at:
            from gradsim_jax.render.camera import eye_from_spherical

            eye = tuple(np.asarray(at) + np.asarray(eye_from_spherical(distance, elevation, azimuth)))
        if eye is not None and np.linalg.norm(np.subtract(eye, at)) == 0:
            raise SceneFileError(f"{path}: [camera] eye and at coincide")
        if cal is None:
            view_angle = cam["view_angle"] if cam["view_angle"] is not None else 30.0
            if not 0.0 < view_angle < 90.0:
                raise SceneFileError(f"{path}: [camera] view_angle must be in (0, 90) degrees, got {view_angle}")
            if look_at and not cam["eye"]:
                return look_at_camera(distance, elevation, azimuth, at=at, up=up, view_angle=view_angle, near=near,
                                      far=far, width=width, height=height)
            if eye is not None:
                return camera_from_eye(eye, at, up, view_angle=view_angle, near=near, far=far, width=width,
                                       height=height)
            f = height / (2.0 * np.tan(np.deg2rad(view_angle)))
            return Camera.from_intrinsics(f, f, (width - 1) / 2.0, (height - 1) / 2.0, width, height, near=near,
                                          far=far, **pose)
        size = cal.image_size
        if size is None:
            size = (native_size[1], native_size[0]) if native_size is not None else (width, height)
        elif native_size is not None and tuple(size) != (native_size[1], native_size[0]):
            sx, sy = native_size[1] / size[0], native_size[0] / size[1]
            if abs(sx / sy - 1.0) > 0.01:
                raise SceneFileError(
                    f"{path}: [camera] the intrinsics are for {size[0]} x {size[1]} px but the target's frames "
                    f"are {native_size[1]} x {native_size[0]} px, another aspect ratio: set image_size to the "
                    "size the camera was calibrated at, for this video")
        scaled = dataclasses.replace(cal, image_size=tuple(size)).scaled(width, height)
        if eye is not None:
            pose = {"eye": eye, "at": at, "up": up}
        return Camera.from_intrinsics(scaled.fx, scaled.fy, scaled.cx, scaled.cy, width, height, near=near,
                                      far=far, **pose)

    def _check_grid_fits(self, dx: int, dy: int, bending: bool) -> None:
        """SceneFileError when the grid cannot even be built: more particles than int32 indices address, or
        more memory for one simulated step than the machine has (numpy would fail or the OS kill us)."""
        from gradsim_jax.geometry import cloth_grid_counts
        from gradsim_jax.physics.cost import available_memory_bytes, estimate_cost, human_bytes

        counts = cloth_grid_counts(dx, dy, bending=bending)
        what = f"{self.path}: [scene] grid = [{dx}, {dy}] has {counts['particles']} particles"
        if counts["particles"] > np.iinfo(np.int32).max:
            raise SceneFileError(f"{what}, more than int32 indices address (2**31 - 1); use a coarser grid")
        need, available = estimate_cost(counts, 1, 1).memory_bytes, available_memory_bytes()
        if available is not None and need > available:
            raise SceneFileError(f"{what}: building it needs about {human_bytes(need)} of memory, more than the "
                                 f"{human_bytes(available)} available; use a coarser grid")

    def check_numbers(self) -> None:
        """Every number of a float key finite and within float32's range (simulations run in float32);
        [target] tolerance positive."""
        limit = float(np.finfo(np.float32).max)
        for section, fields in SCHEMA.items():
            if section in ARRAY_SECTIONS:
                tables = [(f"[[{section}]] {i}:", t) for i, t in enumerate(self.values[section])]
            else:
                tables = [(f"[{section}]", self.values[section])]
            for label, table in tables:
                for key, f in fields.items():
                    value = table[key]
                    if value is None or not f.type.startswith("float"):
                        continue
                    flat = np.asarray(value, np.float64).reshape(-1)
                    if not np.all(np.abs(flat) <= limit):  # NaN fails too
                        raise SceneFileError(f"{self.path}: {label} {key} must be finite (at most {limit:.3g} "
                                             f"in magnitude), got {value!r}")
        tolerance = self.values["target"]["tolerance"]
        if not tolerance > 0:
            raise SceneFileError(f"{self.path}: [target] tolerance must be positive (a distance in RGB), got "
                                 f"{tolerance}")

    def background_image(self, target_frames=None, undistort=None):
        """[H, W, 3] float32 picture behind the scene at the render size, from [render] background_image
        (a picture file, undistorted like the target; or "median" of `target_frames` [T, H, W, >=3]), or
        None when it is not set."""
        from gradsim_jax.render.video import load_target

        name, ren = self.values["render"]["background_image"], self.values["render"]
        if name is None:
            return None
        if name == "median":
            if target_frames is None:
                raise SceneFileError(f"{self.path}: [render] background_image = \"median\" needs a target video")
            return np.median(np.asarray(target_frames)[..., :3], axis=0).astype(np.float32)
        picture = self.resolve(name)
        if not picture.is_file():
            raise SceneFileError(f"{self.path}: [render] background_image not found: {picture}")
        try:
            frames = load_target(picture, (ren["height"], ren["width"]), undistort=undistort).frames
        except ValueError as e:
            raise SceneFileError(f"{self.path}: [render] background_image: {e}") from None
        return frames[0, ..., :3]

    def experiment(self, frames: Optional[int] = None, *, native_size=None, background_image=None) -> Experiment:
        """Build the Experiment; `frames` (from the target) is used unless [simulation] frames is set.

        native_size: (height, width) of the target's frames (what the intrinsics refer to by default).
        background_image: [H, W, 3] picture behind the scene at the render size (`background_image()`).
        """
        v, path = self.values, self.path
        sc, mat = v["scene"], v["material"]
        bodies = self._bodies()
        cloth = sc["grid"] is not None or sc["mesh"] is not None
        if sc["grid"] is not None and sc["mesh"] is not None:
            raise SceneFileError(f"{path}: [scene] needs exactly one of 'grid' or 'mesh'")
        if not cloth and not v["body"] and not v["soft_body"]:
            raise SceneFileError(f"{path}: [scene] needs exactly one of 'grid' or 'mesh' (a cloth), or the file "
                                 "[[body]] tables (rigid bodies) or [[soft_body]] tables")
        if sc["rigid_contact"] is not None and sc["rigid_contact"] not in RIGID_CONTACTS:
            raise SceneFileError(f"{path}: [scene] rigid_contact must be one of {', '.join(RIGID_CONTACTS)}, got "
                                 f"{sc['rigid_contact']!r}")
        ground = sc["ground"] if sc["ground"] is not None else bool(v["body"])
        if v["body"] and sc["rigid_contact"] is not None and (sc["rigid_contact"] != "none") != ground:
            raise SceneFileError(
                f"{path}: [scene] rigid_contact = {sc['rigid_contact']!r} contradicts ground = "
                f"{str(ground).lower()}{'' if sc['ground'] is not None else ' (the default with [[body]] tables)'}: "
                "one ground governs every component; set ground = true with \"penalty\" or \"impulse\", or "
                "ground = false with \"none\"")
        pieces = ([self._cloth()] if cloth else []) + [self._soft_body(i, t) for i, t in enumerate(v["soft_body"])]
        pieces += [bodies] if bodies is not None else []
        scene = combine(*pieces)  # particles: the cloth's, then each soft body's; then the rigid bodies
        scene = self._body_pushes(scene)
        n = scene.num_particles
        try:
            topology, params, state0 = scene.build(
                gravity=tuple(mat["gravity"]), ground=ground, ground_height=sc["ground_height"],
                particle_radius=sc["particle_radius"],
                contact_mu=mat["contact_mu"], contact_ke=mat["contact_ke"], contact_kd=mat["contact_kd"],
                contact_kf=mat["contact_kf"], aerodynamics=True if mat["aerodynamics"] else None,
                rigid_contact=sc["rigid_contact"])
        except ValueError as e:
            raise SceneFileError(f"{path}: [material]/[scene]: {e}") from e
        params, state0 = self._material_quantities(topology, params, state0)
        theta = default_theta(topology, params, state0)
        self._check_free(topology, params)
        push = v["push"]
        if push["particles"]:
            idx = np.asarray(push["particles"], int)
            if idx.min() < 0 or idx.max() >= n:
                raise SceneFileError(f"{path}: [push] particles index out of range [0, {n})")
            force = np.zeros((n, 3), np.float32)
            force[idx] = push["force"]
            theta["push"] = jnp.asarray(force)
        return self._finish(topology, params, state0, theta, frames, native_size, background_image)

    def _cloth(self):
        """The cloth of [scene] and [material] (a host-side Scene)."""
        v, path = self.values, self.path
        sc, mat = v["scene"], v["material"]
        rot = np.asarray(sc["rot"], np.float64)
        if not np.linalg.norm(rot) > 0:
            raise SceneFileError(f"{path}: [scene] rot must be a nonzero quaternion")
        common = dict(tri_ke=mat["tri_ke"], tri_ka=mat["tri_ka"], tri_kd=mat["tri_kd"], tri_drag=mat["tri_drag"],
                      tri_lift=mat["tri_lift"], bend_ke=mat["bend_ke"], bend_kd=mat["bend_kd"])
        if not (math.isfinite(mat["mass"]) and mat["mass"] > 0):
            raise SceneFileError(f"{path}: [material] mass must be positive (kg per particle), got {mat['mass']}; "
                                 "to hold vertices still, pin them ([scene] fix or pinned)")
        if sc["grid"] is not None:
            bad = [s for s in sc["fix"] if s not in ("left", "right", "top", "bottom")]
            if bad:
                raise SceneFileError(f"{path}: [scene] fix has unknown side(s) {bad}; use left, right, top, bottom")
            (dx, dy), (cx, cy) = sc["grid"], sc["cell"]
            if dx < 1 or dy < 1 or not (cx > 0 and cy > 0):
                raise SceneFileError(f"{path}: [scene] grid needs >= 1 cells and cell > 0")
            self._check_grid_fits(dx, dy, mat["bend_ke"] != 0 or mat["bend_kd"] != 0)
            fix = {f"fix_{s}": True for s in sc["fix"]}
            try:
                scene = cloth_grid(dx, dy, cx, cy, pos=sc["pos"], rot=rot, vel=sc["velocity"], mass=mat["mass"],
                                   **fix, **common)
            except ValueError as e:
                raise SceneFileError(f"{path}: [scene]/[material]: {e}") from None
        else:
            if sc["fix"]:
                raise SceneFileError(f"{path}: [scene] fix applies to grids only; list mesh vertices in 'pinned'")
            mesh_path = self.resolve(sc["mesh"])
            if not mesh_path.is_file():
                raise SceneFileError(f"{path}: [scene] mesh file not found: {mesh_path}")
            verts, faces = read_obj(mesh_path)
            verts = quat_rotate(rot / np.linalg.norm(rot), verts * sc["scale"]) + np.asarray(sc["pos"])
            try:
                scene = cloth_mesh(verts, faces, vel=sc["velocity"], **common)
            except ValueError as e:
                raise SceneFileError(f"{path}: [scene] mesh {mesh_path}: {e}") from e
            scene = dataclasses.replace(scene, mass=np.full(scene.num_particles, float(mat["mass"])))
        n = scene.num_particles
        pinned = np.asarray(sc["pinned"], int)
        if pinned.size and (pinned.min() < 0 or pinned.max() >= n):
            raise SceneFileError(f"{path}: [scene] pinned index out of range [0, {n}): {sc['pinned']}")
        if pinned.size:
            mask = scene.pinned.copy()
            mask[pinned] = True
            scene = dataclasses.replace(scene, pinned=mask)
        if scene.pinned.all():
            raise SceneFileError(f"{path}: [scene] every vertex is pinned: nothing can move")
        return scene

    def _bodies(self):
        """The rigid bodies of [[body]] combined in one host-side Scene, or None when there are none."""
        pieces = [self._body(i, table) for i, table in enumerate(self.values["body"])]
        if not pieces:
            return None
        return combine(*pieces)

    def _body(self, i: int, b: dict):
        where = f"{self.path}: [[body]] {i}:"
        if (b["shape"] is None) == (b["mesh"] is None):
            raise SceneFileError(f"{where} give exactly one of shape ({', '.join(BODY_SHAPES)}) or mesh (a file)")
        sizes = {"box": ("half_extents",), "sphere": ("radius", "subdivisions"),
                 "cylinder": ("radius", "height", "segments"), "capsule": ("radius", "height", "segments"),
                 "cone": ("radius", "height", "segments"), None: ("scale",)}
        if b["shape"] is not None and b["shape"] not in BODY_SHAPES:
            raise SceneFileError(f"{where} shape must be one of {', '.join(BODY_SHAPES)} (or give mesh), got "
                                 f"{b['shape']!r}")
        wanted = sizes[b["shape"]]
        for key in ("half_extents", "radius", "height", "subdivisions", "segments", "scale"):
            if key not in wanted and b[key] != SCHEMA["body"][key].default:
                what = f"shape {b['shape']!r}" if b["shape"] else "a mesh"
                raise SceneFileError(f"{where} {key} does not apply to {what} (it takes {', '.join(wanted)})")
        for key in wanted:
            if b[key] is None:
                raise SceneFileError(f"{where} shape {b['shape']!r} needs {key}")
        if b["subdivisions"] is not None and not 0 <= b["subdivisions"] <= MAX_SUBDIVISIONS:
            raise SceneFileError(f"{where} subdivisions must be in [0, {MAX_SUBDIVISIONS}], got {b['subdivisions']}")
        if b["segments"] is not None and not 3 <= b["segments"] <= MAX_SEGMENTS:
            raise SceneFileError(f"{where} segments must be in [3, {MAX_SEGMENTS}], got {b['segments']}")
        for key in ("radius", "height", "scale", "density", "mass"):
            if b[key] is not None and not (b[key] > 0 or (key == "height" and b["shape"] == "capsule"
                                                          and b[key] == 0)):
                raise SceneFileError(f"{where} {key} must be positive, got {b[key]}")
        if b["half_extents"] is not None and not min(b["half_extents"]) > 0:
            raise SceneFileError(f"{where} half_extents must be positive, got {b['half_extents']}")
        if b["density"] is not None and b["mass"] is not None:
            raise SceneFileError(f"{where} give density or mass, not both")
        if not np.linalg.norm(b["rot"]) > 0:
            raise SceneFileError(f"{where} rot must be a nonzero quaternion (w, x, y, z)")
        for key in ("contact_ke", "contact_kd", "contact_kf", "contact_mu", "restitution"):
            if not b[key] >= 0:
                raise SceneFileError(f"{where} {key} must be 0 or more, got {b[key]}")
        if b["restitution"] > 1:
            raise SceneFileError(f"{where} restitution must be in [0, 1], got {b['restitution']}")
        if b["color"] is not None and not all(0.0 <= c <= 1.0 for c in b["color"]):
            raise SceneFileError(f"{where} color must be RGB in [0, 1], got {b['color']}")
        g = rigid_geometry
        try:
            if b["mesh"] is not None:
                mesh_path = self.resolve(b["mesh"])
                verts, faces = g.load_mesh(mesh_path)
                verts = verts * b["scale"]
            elif b["shape"] == "box":
                verts, faces = g.box_mesh(*b["half_extents"])
            elif b["shape"] == "sphere":
                verts, faces = g.sphere_mesh(b["radius"], b["subdivisions"])
            else:
                build = {"cylinder": g.cylinder_mesh, "capsule": g.capsule_mesh, "cone": g.cone_mesh}[b["shape"]]
                verts, faces = build(b["radius"], b["height"], b["segments"])
            with warnings.catch_warnings():
                warnings.simplefilter("error", UserWarning)  # an inward mesh: say so rather than flip it quietly
                return rigid_body(verts, faces, density=b["density"], mass=b["mass"], pos=b["pos"], rot=b["rot"],
                                  vel=b["velocity"], omega=b["omega"], contact_ke=b["contact_ke"],
                                  contact_kd=b["contact_kd"], contact_kf=b["contact_kf"],
                                  contact_mu=b["contact_mu"], restitution=b["restitution"],
                                  name=b["mesh"] or b["shape"])
        except (ValueError, UserWarning, FloatingPointError) as e:  # MeshError is a ValueError
            raise SceneFileError(f"{where} {e}") from None

    def _soft_body(self, i: int, b: dict):
        """One [[soft_body]] table as a host-side Scene (FEM tets; `geometry.tets` and `soft_body`)."""
        from gradsim_jax.geometry import tets as tetmesh
        from gradsim_jax.geometry.scene import soft_body

        where = f"{self.path}: [[soft_body]] {i}:"
        given = [k for k in ("shape", "mesh", "surface") if b[k] is not None]
        if len(given) != 1:
            raise SceneFileError(f"{where} give exactly one of shape ({', '.join(SOFT_SHAPES)}), mesh (a tet file) "
                                 "or surface (a closed triangle mesh to fill with tets)")
        if b["shape"] is not None and b["shape"] not in SOFT_SHAPES:
            raise SceneFileError(f"{where} shape must be one of {', '.join(SOFT_SHAPES)}, got {b['shape']!r}")
        wanted = {"box": ("size",), "sphere": ("radius",), "cylinder": ("radius", "height")}.get(b["shape"], ())
        for key in wanted:
            if b[key] is None:
                raise SceneFileError(f"{where} shape {b['shape']!r} needs {key}")
        for key in ("radius", "height", "scale", "max_volume"):
            if b[key] is not None and not b[key] > 0:
                raise SceneFileError(f"{where} {key} must be positive, got {b[key]}")
        for key in ("density", "k_mu", "k_lambda", "k_damp"):
            if not b[key] >= 0:
                raise SceneFileError(f"{where} {key} must be 0 or more, got {b[key]}")
        if b["size"] is not None and not min(b["size"]) > 0:
            raise SceneFileError(f"{where} size must be positive, got {b['size']}")
        if b["cells"] is not None and not (min(b["cells"]) >= 1 and max(b["cells"]) <= 64):
            raise SceneFileError(f"{where} cells must be in [1, 64], got {b['cells']}")
        if not np.linalg.norm(b["rot"]) > 0:
            raise SceneFileError(f"{where} rot must be a nonzero quaternion (w, x, y, z)")
        if b["mass_model"] not in ("lumped", "cell"):
            raise SceneFileError(f'{where} mass_model must be "lumped" or "cell", got {b["mass_model"]!r}')
        if b["mass_model"] == "cell" and b["shape"] != "box":
            raise SceneFileError(f'{where} mass_model = "cell" gives every particle a box cell\'s mass: it needs '
                                 f'shape = "box"')
        if b["mass_model"] == "cell" and b["masses"] is not None:
            raise SceneFileError(f'{where} give masses or mass_model = "cell", not both')
        cell_volume = None
        try:
            if b["shape"] == "box":
                size = np.asarray(b["size"], np.float64)
                cells = b["cells"] or (2, 2, 2)
                verts, tets = tetmesh.box_tets(cells, size, pattern=b["pattern"], origin=-size / 2)
                if b["mass_model"] == "cell":
                    cell_volume = float(np.prod(size / np.asarray(cells, np.float64)))
            elif b["shape"] == "sphere":
                verts, tets = tetmesh.sphere_tets(b["radius"], (b["cells"] or (4,))[0])
            elif b["shape"] == "cylinder":
                verts, tets = tetmesh.cylinder_tets(b["radius"], b["height"], b["segments"])
            elif b["mesh"] is not None:
                verts, tets = tetmesh.load_tets(self.resolve(b["mesh"]))
                verts = verts * b["scale"]
            else:
                surf_v, surf_f = rigid_geometry.load_mesh(self.resolve(b["surface"]))
                verts, tets = tetmesh.tetrahedralize(surf_v * b["scale"], surf_f, max_volume=b["max_volume"],
                                                     name=b["surface"])
            if b["masses"] is not None and len(b["masses"]) != len(verts):
                raise SceneFileError(f"{where} masses needs one mass per particle of this body: {len(verts)}, got "
                                     f"{len(b['masses'])}")
            return soft_body(verts, tets, density=b["density"], k_mu=b["k_mu"], k_lambda=b["k_lambda"],
                             k_damp=b["k_damp"], pos=b["pos"], rot=b["rot"], vel=b["velocity"],
                             pinned=np.asarray(b["pinned"], int) if b["pinned"] else None,
                             particle_volume=cell_volume, masses=b["masses"],
                             name=b["mesh"] or b["surface"] or b["shape"])
        except (ValueError, ImportError) as e:  # MeshError is a ValueError
            raise SceneFileError(f"{where} {e}") from None

    def _body_pushes(self, scene):
        """`scene` with the known forces of [[body_push]] on its bodies."""
        for i, p in enumerate(self.values["body_push"]):
            where = f"{self.path}: [[body_push]] {i}:"
            count = scene.num_bodies
            if not 0 <= p["body"] < count:
                raise SceneFileError(f"{where} body must be the index of a [[body]], in [0, {count}), got {p['body']}")
            end = math.inf if p["end"] is None else p["end"]
            if not p["start"] < end:
                raise SceneFileError(f"{where} start ({p['start']} s) must come before end ({end} s)")
            scene = scene.add_push(p["body"], p["force"], point=p["point"], start=p["start"], end=end)
        return scene

    def _check_free(self, topology, params) -> None:
        """[fit] free names quantities this scene has; a body quantity fitted as one value for every body
        needs the bodies to share it."""
        for name in self.fit_config.free:
            q = QUANTITIES[name]
            if q.applies is not None and not q.applies(topology):
                what = "no rigid body ([[body]])" if name.startswith(("body_", "restitution")) else f"no {name}"
                raise SceneFileError(f"{self.path}: [fit] free: {name} does not apply to this scene ({what})")
            if name.startswith("body_") or name == "restitution":
                values = np.asarray(get_path(params, q.field))
                if values.size > 1 and not np.all(values == values[0]):
                    raise SceneFileError(f"{self.path}: [fit] free: {name} is fitted as one value for every body, "
                                         f"but the [[body]] tables give {values.tolist()}; make them equal")

    def _finish(self, topology, params, state0, theta, frames, native_size, background_image) -> Experiment:
        """The Experiment of a built scene: time grid, camera, colours and render settings."""
        from gradsim_jax.render import FaceColors, Lights, RenderSettings
        from gradsim_jax.render.colors import checker_colors

        v, path = self.values, self.path
        push = v["push"]
        sim, ren = v["simulation"], v["render"]
        if sim["frames"] is not None:
            if sim["frames"] < 1:
                raise SceneFileError(f"{path}: [simulation] frames must be at least 1 (frames simulated after the "
                                     f"initial state), got {sim['frames']}")
            frames = sim["frames"]
        elif frames is None:
            raise SceneFileError(f"{path}: [simulation] frames is needed (no target video to count them from)")
        elif frames < 1:
            raise SceneFileError(f"{path}: the target has {frames + 1} frame(s): a fit needs at least 2 (the initial "
                                 "state and one simulated frame)")
        if sim["contact"] not in ("implicit", "explicit"):
            raise SceneFileError(f'{path}: [simulation] contact must be "implicit" or "explicit", got {sim["contact"]!r}')
        for section, key in (("simulation", "fps"), ("simulation", "substeps")):  # render size: in camera()
            if not v[section][key] > 0:
                raise SceneFileError(f"{path}: [{section}] {key} must be positive, got {v[section][key]}")
        fps, push_frames = sim["fps"], push["frames"]
        if push_frames < 0:
            raise SceneFileError(f"{path}: [push] frames must be 0 or more (leading frames the push lasts), "
                                 f"got {push_frames}")
        if push["particles"] and push_frames > frames:
            raise SceneFileError(
                f"{path}: [push] frames = {push_frames} ({push_frames / fps:.3g} s) is longer than the simulation: "
                f"{frames} frames ({frames / fps:.3g} s); give at most {frames} (the push then lasts throughout)")
        for key, what in (("tile_capacity", "faces kept per 8x8 tile"), ("pixel_capacity", "faces kept per pixel")):
            if ren[key] is not None and ren[key] < 1:
                raise SceneFileError(f"{path}: [render] {key} must be at least 1 ({what}), got {ren[key]}; leave "
                                     "it out to keep every face")
        if ren["coverage"] not in ("box", "softras"):
            raise SceneFileError(f'{path}: [render] coverage must be "box" or "softras", got {ren["coverage"]!r}')
        camera = self.camera(native_size)
        faces = jnp.asarray(scene_faces(topology))
        if ren["color"] is not None:
            rgb = np.broadcast_to(np.asarray(ren["color"], np.float32), (faces.shape[0], 3)).copy()
        else:
            rgb = np.asarray(checker_colors(faces, scene_vertices(topology, params, state0)), np.float32).copy()
        # Body faces follow the cloth's and the soft bodies' surfaces in `scene_faces`, body by body.
        body_of_face = np.asarray(topology.rigid.vertex_body)[np.asarray(topology.rigid.faces)[:, 0]]
        first = len(np.asarray(topology.cloth.triangles).reshape(-1, 3)) + len(
            np.asarray(topology.fem.surface).reshape(-1, 3))
        for i, b in enumerate(v["body"]):
            if b["color"] is not None:
                rgb[first + np.flatnonzero(body_of_face == i)] = b["color"]
        colors = FaceColors(jnp.asarray(rgb))
        lights = Lights(ambient=jnp.asarray(ren["ambient"], jnp.float32),
                        directional=jnp.asarray(ren["directional"], jnp.float32),
                        direction=jnp.asarray(ren["light_direction"], jnp.float32))
        num_faces = int(faces.shape[0])
        tile_capacity = ren["tile_capacity"] if ren["tile_capacity"] is not None else num_faces
        pixel_capacity = ren["pixel_capacity"] if ren["pixel_capacity"] is not None else num_faces
        return Experiment(topology=topology, params=params, state0=state0, camera=camera, faces=faces,
                          colors=colors, lights=lights,
                          background=jnp.asarray(ren["background"] if background_image is None else background_image,
                                                 jnp.float32),
                          settings=RenderSettings(tile_capacity=tile_capacity,
                                                  pixel_capacity=pixel_capacity,
                                                  coverage=ren["coverage"]), frames=int(frames),
                          substeps=sim["substeps"], frame_dt=1.0 / sim["fps"], theta=theta,
                          push_frames=push["frames"] if push["particles"] else 0, name=path.stem,
                          integrator=SemiImplicitEuler(implicit_contact=sim["contact"] == "implicit"))


@dataclasses.dataclass
class FitJob:
    """Everything `gradsim-jax fit` needs, built once from a scene file and the command line
    (`load_fit_job`): the experiment, the target frames, the fit configuration, the initial guess, the
    truth (None unless the target was rendered from [material]), what was done to the target (`notes`),
    warnings to show, and what the report records about the inputs (`extra`)."""

    spec: SceneSpec
    experiment: Experiment
    frames: np.ndarray
    config: FitConfig
    initial: dict
    truth: Optional[dict]
    notes: list
    warnings: list
    extra: dict


def load_target_video(spec: SceneSpec, *, target=None, mask=None, key_color=None):
    """The target video of `spec` (or `target`, `mask`, `key_color` given on the command line) at the render
    size, undistorted when [camera] has distortion: (TargetVideo, undistort function or None)."""
    from gradsim_jax.render.calibration import undistorter
    from gradsim_jax.render.video import load_target

    tv, ren = spec.values["target"], spec.values["render"]
    video = target or (str(spec.resolve(tv["video"])) if tv["video"] else None)
    if video is None:
        raise SceneFileError(f"{spec.path}: no target video: pass --target or set [target] video")
    mask = mask or (str(spec.resolve(tv["mask"])) if tv["mask"] else None)
    key = key_color if key_color is not None else tv["key_color"]
    cal = spec.calibration()
    undistort = undistorter(cal) if cal is not None else None
    frames = spec.values["simulation"]["frames"]
    video_ = load_target(video, (ren["height"], ren["width"]), background=key, mask=mask,
                         tolerance=tv["tolerance"], undistort=undistort,
                         expected_frames=None if frames is None else frames + 1)
    return video_, undistort


def resolve_loss(requested, target) -> str:
    """The image loss: as asked, or rgba where the target's alpha was observed and rgb otherwise."""
    if requested in (None, "auto"):
        return "rgba" if target.alpha_observed else "rgb"
    if requested in ("rgba", "silhouette") and not target.alpha_observed:
        raise ValueError(
            f"the {requested} loss compares alpha, but the target has none (an RGB video: no alpha channel). "
            "Supply it in one of three ways: --mask VIDEO (or [target] mask), a target with an alpha channel "
            "(RGBA PNGs), or --key-color R G B (or [target] key_color) for a plain background; or use "
            "--loss rgb")
    return requested


def background_warning(spec: SceneSpec, target, exp: Experiment) -> Optional[str]:
    """A warning when the target's border does not look like the background the render composites over."""
    if target.alpha_observed or spec.values["render"]["background_image"] is not None:
        return None
    frames = target.frames[..., :3]
    border = np.concatenate([frames[:, 0], frames[:, -1], frames[:, :, 0], frames[:, :, -1]], axis=1)
    seen = np.median(border.reshape(-1, 3), axis=0)
    assumed = np.asarray(exp.background, np.float32).reshape(-1, 3).mean(axis=0)
    if np.max(np.abs(seen - assumed)) <= 0.1:
        return None
    return (f"the target's border is about RGB {np.round(seen, 2).tolist()} but the render's background is "
            f"{np.round(assumed, 2).tolist()}: set [render] background to the colour behind the scene, or "
            "background_image to a picture of it (or \"median\")")


def load_fit_job(scene, *, target=None, mask=None, key_color=None, true_values: bool = False,
                 **overrides) -> FitJob:
    """Read the scene file, load and prepare the target video, build the experiment and the fit
    configuration ([fit] with the command line's `overrides`: iterations, learning_rate, polish, rounds,
    round_iterations, loss, frame_stride, horizon, window, checkpoint_dir, checkpoint_every, resume,
    resume_anyway, progress; None keeps the scene's) and the initial guess. SceneFileError or ValueError on any problem, before anything compiles."""
    from gradsim_jax.sysid import with_camera_pose

    spec = load_scene(scene)
    video_, undistort = load_target_video(spec, target=target, mask=mask, key_color=key_color)
    background = spec.background_image(video_.frames, undistort)
    exp = spec.experiment(frames=video_.frames.shape[0] - 1, native_size=video_.native_size,
                          background_image=background)
    base = spec.fit_config
    given = {k: v for k, v in overrides.items() if v is not None}
    loss = resolve_loss(given.pop("loss", None) or base.loss, video_)
    # A recorded video's edges are measured against the render's (blur, edge model); a target rendered from
    # [material] by this renderer (--true) has the render's own.
    fit = spec.values["fit"]
    edges = {"blur": "off" if true_values else "auto", "edge_model": "fixed" if true_values else "auto"}
    edges = {k: v for k, v in edges.items() if fit[k] is None and k not in given}
    config = dataclasses.replace(base, loss=loss, scene_file_sha256=spec.content_sha256(), **edges, **given)
    check_config(config)  # combinations of settings (e.g. window with horizon), before anything compiles
    notes = [f"alpha: {video_.alpha_source or 'not observed'}", f"loss: {loss}"]
    if undistort is not None:
        notes.append("frames undistorted with the [camera] distortion coefficients")
    if background is not None:
        notes.append(f"background image: {spec.values['render']['background_image']}")
    warning = background_warning(spec, video_, exp)
    extra = {"command": "fit", "scene": str(spec.path),
             "target": {"path": str(target or spec.values["target"]["video"]), "alpha": video_.alpha_source,
                        "native_size": list(video_.native_size), "undistorted": undistort is not None,
                        "background_image": spec.values["render"]["background_image"]}}
    return FitJob(spec=spec, experiment=exp, frames=np.asarray(video_.frames), config=config,
                  initial=spec.initial_theta(exp),
                  truth=dict(with_camera_pose(exp, exp.theta)) if true_values else None, notes=notes,
                  warnings=[warning] if warning else [], extra=extra)


def load_scene(path) -> SceneSpec:
    """Read and validate a scene file (SceneFileError on any problem)."""
    spec = SceneSpec(path=Path(path), values=read_scene_file(path))
    spec.fit_config  # validates [fit] now rather than after the target is loaded
    spec.check_initial()
    spec.check_numbers()  # after the checks above, whose messages say more about their keys
    if spec.values["scene"]["mesh"] is not None and not spec.resolve(spec.values["scene"]["mesh"]).is_file():
        raise SceneFileError(f"{path}: [scene] mesh file not found: {spec.resolve(spec.values['scene']['mesh'])}")
    return spec


__all__ = ["SCHEMA", "FitJob", "SceneFileError", "SceneSpec", "background_warning", "help_text", "load_fit_job",
           "load_scene", "load_target_video", "read_obj", "read_scene_file", "resolve_loss"]
