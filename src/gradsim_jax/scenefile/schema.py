"""The scene file's schema: `SCHEMA` lists every section and key with its type, default and meaning; the reader
checks files against it and `help_text()` prints it, so the documentation cannot drift from the checks.
[material] and [initial] take a key for every fittable quantity of the registry (`initial_fields`,
`material_fields`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradsim_jax.sysid import LOSSES, QUANTITIES


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
        "pin_key_times": Field("float[]", [], "the pinned vertices move (a hand, a hook): keyframe times, s, "
                                              "increasing (empty: they stay); linear between keys, at rest outside"),
        "pin_key_offsets": Field("float[]", [], "the pinned vertices' offset from where they start at each key "
                                                "time: x, y, z per key, m (3 x the keys)"),
        "ground": Field("bool", None, "collide with the ground plane y = ground_height: every component (cloth, "
                                      "soft bodies, rigid bodies); default: true when the file has [[body]] tables"),
        "ground_height": Field("float", 0.0, "height of the ground plane, m: its offset along ground_normal"),
        "ground_size": Field("float", 0.0, "with [simulation] contact = \"impulse\": the side of the ground's square "
                                           "of two triangles, m (a Blender floor plane's size; 0: unbounded)"),
        "ground_normal": Field("float[3]", None, "normal of the ground plane, pointing out of it (default: the up "
                                                 "axis)"),
        "up": Field("str", "y", "the world's up axis, \"y\" or \"z\" (Blender, ROS): the default gravity "
                                "(down it), ground normal, camera up and light direction follow it"),
        "rigid_contact": Field("str", None, "ground contact of the [[body]] bodies: \"penalty\" (their "
                                            "contact_ke/kd/kf/mu; the default with a ground), \"impulse\" "
                                            "(restitution) or \"none\" (the default without one)"),
        "body_contact": Field("bool", None, "the [[body]] bodies collide with each other (penalty, the mean of the "
                                            "pair's contact coefficients; hulls must be closed and convex); "
                                            "default: true for two or more bodies with such hulls"),
        "particle_body_contact": Field("bool", None, "the particles (cloth, soft bodies) meet the [[body]] bodies, "
                                                     "both ways (penalty, the mean of [material] contact_* and the "
                                                     "body's; hulls must be closed and convex); default: true where "
                                                     "there are both and the hulls are"),
        "contact_smoothing": Field("float", 0.0, "smooth onset of every penalty contact, m: the force starts over "
                                                 "about this distance instead of with a kink (0: none)"),
        "particle_radius": Field("float", 0.01, "contact radius of each particle, m: particles rest on the ground "
                                                "at y = ground_height + particle_radius (one placed lower is "
                                                "pushed out, fast)"),
        "plugins": Field("str[]", [], "Python files imported (once) before the file is read, relative to it: "
                                      "each may register a body kind and its section "
                                      "(scenefile.extensions.register_body_kind)"),
    },
    "material": {
        "mass": Field("float", 0.01, "mass per particle, kg"),
        "tri_ke": Field("float", 100.0, "membrane stretch stiffness k_mu (quantity cloth.tri_ke, 'stiffness')"),
        "tri_ka": Field("float", 100.0, "membrane area stiffness k_lambda (keeps its ratio to tri_ke in fits)"),
        "tri_kd": Field("float", 1.0, "membrane damping (quantity cloth.tri_kd, 'damping')"),
        "bend_ke": Field("float", 0.0, "bending stiffness (quantity cloth.bend_ke, 'bending'; 0: no bending "
                                       "elements)"),
        "bend_kd": Field("float", 0.0, "bending damping"),
        "spring_ke": Field("float", 0.0, "stiffness of a spring along every edge of the cloth's mesh, N/m (Blender's "
                                         "structural springs; quantity springs.ke, 'spring_stiffness'; 0 with "
                                         "spring_kd 0: none)"),
        "spring_kd": Field("float", 0.0, "damping of those springs along their length, N s/m (quantity springs.kd, "
                                         "'spring_damping')"),
        "tri_drag": Field("float", 0.0, "aerodynamic drag coefficient (nonzero switches aerodynamics on)"),
        "tri_lift": Field("float", 0.0, "aerodynamic lift coefficient"),
        "aerodynamics": Field("bool", False, "force the drag/lift term on (to fit drag or lift from a guess)"),
        "membrane": Field("bool", None, "the membrane on or off (default: off when tri_ke, tri_ka and tri_kd are "
                                        "all 0, a cloth of springs, which then pays nothing for it; on to fit "
                                        "stiffness or damping from 0)"),
        "bending_model": Field("str", "dihedral", "\"dihedral\" (bend_ke N m/rad, Bridson et al.) or \"angular\" "
                                                  "(Blender's hinges, explicit in the implicit step: bend_ke N/rad per "
                                                  "m of edge = 0.1 fps^2 x Blender's bending, bend_kd N s/m = fps x "
                                                  "its bending damping)"),
        "contact_mu": Field("float", 0.5, "ground friction coefficient"),
        "contact_ke": Field("float", 1.0e3, "ground contact stiffness"),
        "contact_kd": Field("float", 10.0, "ground contact damping"),
        "contact_kf": Field("float", 100.0, "ground friction stiffness"),
        "gravity": Field("float[3]", None, "gravity, m/s^2 (default: 9.81 down the [scene] up axis)"),
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
    "pendulum": {
        "lengths": Field("float[]", None, "length of each link, m (one link: a simple pendulum; two: a double "
                                          "pendulum; quantity pendulum_length); required"),
        "theta": Field("float[]", None, "initial angle of each link from the downward vertical, rad "
                                        "(counter-clockwise seen from +z; it swings in the x-y plane); required"),
        "masses": Field("float[]", None, "mass of each bob, kg (default 1 each; quantity bob_mass)"),
        "omega": Field("float[]", None, "initial angular velocity of each link, rad/s (default 0)"),
        "damping": Field("float[]", None, "viscous damping of each joint, N m s/rad (default 0; quantity "
                                          "pendulum_damping)"),
        "pivot": Field("float[3]", [0.0, 0.0, 0.0], "where it hangs from, m"),
        "bob_radius": Field("float", 0.1, "radius of the spheres the bobs are drawn as, m"),
        "rod_radius": Field("float", 0.02, "half width of the rods drawn along the links, m (0: none)"),
        "color": Field("float[3]", None, "RGB of the bobs (default: red, blue, green, ... link by link)"),
    },
    "ball": {
        "pos": Field("float[3]", None, "initial centre, m", required=True),
        "velocity": Field("float[3]", [0.0, 0.0, 0.0], "initial velocity, m/s (quantity ball_speed: its length)"),
        "radius": Field("float", 0.5, "radius, m"),
        "restitution": Field("float", 0.8, "coefficient of restitution of its impacts in [0, 1] (quantity "
                                           "ball_restitution)"),
        "friction": Field("float", 0.0, "Coulomb friction with the ground (quantity ball_friction)"),
        "color": Field("float[3]", None, "RGB of the ball (default: [render] color or the checkerboard)"),
    },
    "collider": {
        "shape": Field("str", None, "\"plane\", \"sphere\", \"box\", \"capsule\" or \"mesh\": a shape the cloth, soft and rigid "
                                    "bodies collide with (static, or moved by key_times)", required=True),
        "pos": Field("float[3]", [0.0, 0.0, 0.0], "centre (a plane: a point on it), m"),
        "rot": Field("float[4]", [1.0, 0.0, 0.0, 0.0], "rotation, quaternion (w, x, y, z); a plane's normal and a "
                                                       "capsule's axis are the rotated +y"),
        "radius": Field("float", None, "sphere, capsule: radius, m"),
        "half_extents": Field("float[3]", None, "box: half extents, m"),
        "half_height": Field("float", None, "capsule: half the length of its axis segment, m"),
        "mesh": Field("str", None, "mesh: path of a closed triangle mesh (.obj, .stl, .ply), relative to the scene "
                                   "file"),
        "scale": Field("float[3]", [1.0, 1.0, 1.0], "mesh: scale of its vertices along x, y, z"),
        "segments": Field("int[2]", None, "sphere: a UV tessellation [segments, rings] as Blender builds one (poles "
                                          "on z), drawn and met by contact = \"impulse\"; match a Blender ball's "
                                          "(default: an icosphere)"),
        "ke": Field("float", 1.0e3, "contact stiffness with the particles, N/m (quantity collider_ke)"),
        "kd": Field("float", 10.0, "contact damping, N s/m (quantity collider_kd)"),
        "kf": Field("float", 10.0, "friction stiffness, N s/m (quantity collider_kf)"),
        "mu": Field("float", 0.5, "Coulomb friction coefficient (quantity collider_mu)"),
        "color": Field("float[3]", None, "RGB of its faces (default grey 0.6; planes are not drawn)"),
        "drawn": Field("bool", True, "whether the render draws it (false: it is in the background picture already, "
                                     "or a mask leaves it out); it collides either way"),
        "key_times": Field("float[]", [], "a kinematic collider's keyframe times, s, increasing (empty: static); "
                                          "linear motion between keys, at rest outside them"),
        "key_pos": Field("float[]", [], "its position at each key time: x, y, z per key, m (3 x the keys)"),
        "key_rot": Field("float[]", [], "its rotation at each key time: w, x, y, z per key (4 x the keys; empty: "
                                        "rot at every key)"),
    },
    "smoke": {
        "cells": Field("int[2]", None, "the grid: [ny, nx] cells (rows up, columns along x); required"),
        "width": Field("float", 1.0, "width of the grid along world x, m (cells are square: nx of them)"),
        "corner": Field("float[3]", None, "where the grid's bottom-left corner is, m: it is filmed as a thin slab in "
                                          "the plane z = corner[2] (default [-width / 2, 0, 0])"),
        "walls": Field("str", "closed", "\"closed\" (solid walls) or \"periodic\""),
        "advection": Field("str", "semi-lagrangian", "\"semi-lagrangian\" or \"maccormack\""),
        "solver": Field("str", "cg", "pressure solve: \"cg\" (conjugate gradients) or \"fft\" (periodic walls)"),
        "tolerance": Field("float", 1e-5, "relative residual the conjugate gradients stop at"),
        "slip": Field("str", "free", "velocity past a closed wall: \"free\" or \"no-slip\""),
        "substeps": Field("int", 1, "solver steps per frame"),
        "buoyancy": Field("float", 1.0, "upward acceleration per unit density, m/s^2 (quantity smoke_buoyancy)"),
        "dissipation": Field("float", 0.0, "decay rate of the density, 1/s (quantity smoke_dissipation)"),
        "vorticity": Field("float", 0.0, "vorticity confinement eps (quantity smoke_vorticity)"),
        "inflow_rate": Field("float", 0.0, "density added per second inside the source (quantity inflow_rate)"),
        "source": Field("float[3]", None, "the inflow: a disc [x, y, radius] in units of the width from the "
                                          "bottom-left corner (default: none)"),
        "fill_box": Field("float[4]", None, "initial smoke in the box [x0, y0, x1, y1] (units of the width)"),
        "fill_disc": Field("float[3]", None, "initial smoke in the disc [x, y, radius] (units of the width)"),
        "fill_density": Field("float", 1.0, "the density of the initial smoke"),
        "colormap": Field("str", "smoke", "colour map of the density: \"smoke\", \"grey\" or \"fire\""),
        "scale": Field("float", 1.0, "the density whose opacity is 1 - 1/e (head-on)"),
    },
    "wind": {
        "strength": Field("float", None, "a wind pushing the cloth's faces along their normals: the pressure on a "
                                         "face square to it, Pa (force p (w . n) A n per face; quantity wind); "
                                         "given, the file has a wind. A Blender wind field of strength S: "
                                         "0.02 fps S (900 Pa for 1500 at 30 fps)"),
        "direction": Field("float[3]", None, "where the wind blows to, in the scene's world axes ([scene] up: z "
                                             "for Blender's); normalized; required with strength"),
        "key_times": Field("float[]", [], "keyframe times of the strength, s, increasing (empty: the strength "
                                          "throughout); held before the first key and after the last"),
        "key_factors": Field("float[]", [], "the strength's factor at each key time (one per key; e.g. [0, 1] "
                                            "ramps it up)"),
        "ease": Field("str", "smooth", "between two keys: \"smooth\" (3 u^2 - 2 u^3, Blender's default Bezier "
                                       "keyframes between two keys) or \"linear\""),
    },
    "camera": {
        "distance": Field("float", None, "look-at camera: distance from the look-at point, m (default 2)"),
        "elevation": Field("float", None, "look-at camera: elevation, degrees (default 20)"),
        "azimuth": Field("float", None, "look-at camera: azimuth, degrees (default 0: eye on -z looking along +z)"),
        "at": Field("float[3]", [0.0, 0.0, 0.0], "look-at point, m"),
        "up": Field("float[3]", None, "look-at camera: world direction shown upwards (default: the [scene] up "
                                     "axis)"),
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
        "blender": Field("str", None, "a Blender camera's JSON file (lens_mm, sensor_width_mm, sensor_fit, "
                                      "resolution, shift_x/y, matrix_world: the docs' snippet writes it): "
                                      "intrinsics and pose, Blender's Z-up world converted to [scene] up"),
        "colmap": Field("str", None, "a COLMAP sparse model folder (cameras and images, .txt or .bin): "
                                     "intrinsics, distortion and pose of colmap_image"),
        "colmap_image": Field("str", None, "the registered image of the COLMAP model whose camera filmed the "
                                           "video (default: the first name)"),
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
        "appearance": Field("str", "flat", "\"flat\": the colours above under fixed lights; \"video\": each "
                                           "cloth and soft-body vertex's albedo read from the target's first frame, "
                                           "then fitted with the lights (quantities albedo, ambient, directional, "
                                           "light_direction) as nuisances: for footage of a textured, lit object"),
        "shadows": Field("bool", False, "draw the meshes' shadow on the ground plane (the light's direction; "
                                        "quantities shadow, shadow_blur, fitted as nuisances): for a video whose "
                                        "background photo lacks the object's shadow"),
        "ambient": Field("float", 0.45, "ambient light"),
        "directional": Field("float", 0.6, "directional light"),
        "light_direction": Field("float[3]", None, "direction towards the light (default [0.4, 1.0, -0.6] with "
                                                   "y up, the same turned with the world for z up)"),
        "tile_capacity": Field("int", None, "faces kept per 8x8 tile, the nearest (default: all faces, exact; "
                                            "fit prints a hint with measured numbers for more than 256 faces)"),
        "pixel_capacity": Field("int", None, "faces kept per pixel, the nearest (default: all faces, exact)"),
        "coverage": Field("str", "box", "edge model: \"box\" (the covered fraction of each pixel, as a camera "
                                        "sees it), \"softras\" (SoftRas's soft silhouette) or \"dibr\" "
                                        "(DIB-R: exact colours inside, soft silhouette outside)"),
    },
    "simulation": {
        "fps": Field("float", 60.0, "frames per second of the video"),
        "substeps": Field("int", 16, "integration steps per frame"),
        "frames": Field("int", None, "frames to simulate (default: target frames - 1)"),
        "contact": Field("str", "implicit", "the particles' contact: the penalty springs with their damping and "
                                            "friction integrated \"implicit\" (backward: stable, smooth gradients "
                                            "through sliding to rest) or \"explicit\" (as Warp 1.8 does: chatters "
                                            "and loses its gradient when dt kd / m or dt kf / m nears 1); or "
                                            "\"impulse\": Blender's collision response (integrator = "
                                            "\"implicit\"; velocity impulses between the cloth's and the "
                                            "colliders' triangles within particle_radius, Blender's cloth "
                                            "collision distance plus the collider's outer thickness; mu = "
                                            "Blender's cloth friction / 100; ke, kd, kf unused)"),
        "integrator": Field("str", "semi_implicit", "time step of the particles: \"semi_implicit\" (symplectic "
                                                    "Euler: fast, needs substeps the stiffness allows) or "
                                                    "\"implicit\" (linearized backward Euler, solved by conjugate "
                                                    "gradients: stable at any stiffness, and the step of Blender's "
                                                    "cloth, whose videos it matches at Blender's quality as "
                                                    "substeps)"),
        "cg_iterations": Field("int", 40, "conjugate-gradient iterations of each implicit step (integrator = "
                                          "\"implicit\"; too few leave a stiff cloth stretched; with "
                                          "cg_tolerance, at most this many)"),
        "cg_tolerance": Field("float", 0.0, "stop each implicit step's conjugate gradients at this relative "
                                            "residual (0: run every iteration; Blender's cloth: 0.01 with "
                                            "cg_iterations = 100)"),
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
        "shooting": Field("str", None, "with window: \"truncated\" (default) or \"multiple\" (multiple shooting: "
                                       "each window from its own start state, read off the video, joined by a "
                                       "penalty tightened over the iterations; polish: Gauss-Newton on all of them, ODE "
                                       "bodies)"),
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
    value in the built scene (over what the builders made).

    Args:
        builder: {key: Field}, the [material] keys the builders take.

    Returns:
        {key: Field}: `builder`'s, then one (default None) for each other quantity scene files name.
    """
    extra = {q.file_key: Field(q.file_type, None, f"{q.name}: {_values_doc(q)}; sets it in the built scene "
                                                  "(default: the builders' values)")
             for q in _file_quantities() if q.file_key not in builder}
    return {**builder, **extra}


#: [material] keys that set a registered quantity in the built scene (the builders' own keys apart).
MATERIAL_QUANTITIES = {q.file_key: q.name for q in _file_quantities() if q.file_key not in SCHEMA["material"]}


#: The [material] keys the builders take (before the registry's quantities are added).
BUILDER_MATERIAL = dict(SCHEMA["material"])


SCHEMA["material"] = material_fields(SCHEMA["material"])


SCHEMA["initial"] = initial_fields()


def refresh_quantity_fields() -> None:
    """[material], [initial] and `MATERIAL_QUANTITIES` made again from the registry, in place: after a body kind
    registered or removed its quantities (`scenefile.extensions`). The built-in quantities keep their keys and
    order."""
    SCHEMA["material"] = material_fields(BUILDER_MATERIAL)
    SCHEMA["initial"] = initial_fields()
    MATERIAL_QUANTITIES.clear()
    MATERIAL_QUANTITIES.update({q.file_key: q.name for q in _file_quantities() if q.file_key not in BUILDER_MATERIAL})


#: {section name: `scenefile.extensions.BodySection`} of the body kinds registered from outside the package
#: (`extensions.register_body_kind`): the sections a file may have besides SCHEMA's.
BODY_SECTIONS: dict = {}


#: Sections that are arrays of tables ([[body]]): one entry per body or push.
ARRAY_SECTIONS = ("body", "soft_body", "body_push", "ball", "collider")


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
            what = {"body": "rigid body", "soft_body": "soft body", "ball": "ball",
                    "collider": "collider"}.get(section, "push")
            lines.append(f"  [[{section}]]  (array of tables: repeat it, one per {what})")
            if section == "body":
                lines.append("    rigid bodies collide with the ground, the colliders, each other ([scene] "
                             "body_contact) and the particles of the cloth and soft bodies ([scene] particle_body_contact)")
            if section == "ball":
                lines.append("    bouncing balls with exact impacts on the ground plane y = ground_height (not with "
                             "anything else); a file holds [[ball]] tables or a [pendulum], not both")
            if section == "collider":
                lines.append("    static or keyframed shapes the cloth, the soft bodies and the rigid bodies "
                             "collide with (the ground's penalty contact, with the collider's ke, kd, kf, mu); not the balls")
            if section == "soft_body":
                lines.append("    soft bodies are particles: the ground ([scene] ground), the colliders and the rigid "
                             "bodies apply ([material] contact_*); they do not collide with the cloth or each other")
        else:
            lines.append(f"  [{section}]{req}")
            if section == "pendulum":
                lines.append("    a pendulum of len(lengths) links (an ODE in its angles): it touches nothing else")
            if section == "wind":
                lines.append("    a uniform wind on the cloth (physics.wind): each face feels p(t) (w . n) A n, a third "
                             "on each vertex; p(t) = strength x the keyed factor")
        for key, f in fields.items():
            default = "required" if f.required else ("-" if f.default is None else repr(f.default))
            lines.append(f"    {key:<16} {f.type:<9} {default:<22} {f.doc}")
    for name, section in BODY_SECTIONS.items():
        lines.append(f"  [{name}]  (a registered body kind{': ' + section.doc if section.doc else ''})")
        for key, f in section.fields.items():
            default = "required" if f.required else ("-" if f.default is None else repr(f.default))
            lines.append(f"    {key:<16} {f.type:<9} {default:<22} {f.doc}")
    return "\n".join(lines)
