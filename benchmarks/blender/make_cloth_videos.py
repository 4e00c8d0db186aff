"""Photoreal cloth videos made by Blender (bpy 5.0.1): Blender's own cloth solver, rendered by Cycles on the CPU.

Test data for gradsim-jax (issue 54, item 5). Blender is no dependency of the package: run this script with an
interpreter that has the `bpy` module (see benchmarks/blender/README.md):

    python3 -m venv /work/bpy-venv && /work/bpy-venv/bin/pip install bpy==5.0.1
    /work/bpy-venv/bin/python benchmarks/blender/make_cloth_videos.py --case all --out benchmarks/blender/data
    /work/bpy-venv/bin/python benchmarks/blender/make_cloth_videos.py --case all --small --out tests/data/blender

Every scene is built from code (procedural textures only, no downloaded asset): a checker fabric, a slate-tile
floor, a plaster wall, a sun with soft shadows and a sky gradient. The cloth is a 16 x 16-cell grid built in gradsim-jax's
grid order (particle (i, j) = j (dim_x + 1) + i, two triangles per cell as `cloth_grid` splits them), simulated by
Blender's cloth modifier; its evaluated vertices are recorded per frame, then the cloth's mesh is set to them
for the renders (so that the pictures show exactly vertices.npy).

Gravity: Blender's cloth works in frame units: an unpinned cloth with no air damping falls by a constant second
difference of 0.001 g m per frame^2 whatever the fps (`measure_free_fall` at 30 fps; the same free fall at 24, 25
and 60 fps and at quality 8 and 10 was tried by hand: the same positions per frame), so its effective gravity is 0.001 fps^2 g = 0.9 g at 30 fps. The scene's
gravity is therefore set to 9.81 / 0.9 = 10.9 m/s^2 (`SCENE_GRAVITY`), which gives an effective 9.81 m/s^2;
every case re-measures it with its own cloth settings and writes it to case.json.

Per case, in OUT/<case>/: frames/0000.png... (RGB), masks/0000.png... (8-bit grey, the cloth's visible coverage,
linear), background.png (cloth hidden), camera.json (Blender's camera, not converted), vertices.npy
(float32 [frames, 289, 3], Blender world, Z up), faces.npy (int32 [512, 3]), case.json (the scene's facts).
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import bpy
import numpy as np
from mathutils import Matrix, Vector

FPS = 30
G = 9.81
BLENDER_CLOTH_GRAVITY_FACTOR = 0.001 * FPS**2  # measured: Blender's cloth falls 0.001 g m per frame^2 (0.9 g at 30 fps)
SCENE_GRAVITY = round(G / BLENDER_CLOTH_GRAVITY_FACTOR, 6) # 10.9 m/s^2 -> an effective 9.81 m/s^2
DIM = 16  # cells per side
CELL = 0.05  # m -> a 0.8 m x 0.8 m cloth

# Blender's cloth settings shared by every case (Blender's own units: mass in kg per vertex, stiffness and
# damping in Blender's cloth units): Blender's defaults. A mass under ~0.15 kg per vertex makes its solver lose
# gravity (a free fall at 0.05 kg: 9.16 m/s^2, at 0.002 kg: 1.0), so the default 0.3 stays.
CLOTH = dict(quality=5, mass=0.3, air_damping=1.0, tension_stiffness=15.0, compression_stiffness=15.0,
             shear_stiffness=5.0, bending_stiffness=0.5, tension_damping=5.0, compression_damping=5.0,
             shear_damping=5.0, bending_damping=0.5)
COLLISION = dict(distance_min=0.015, collision_quality=3, use_self_collision=False)
COLLIDER = dict(thickness_outer=0.02, cloth_friction=5.0, damping=0.1)

CASES = {
    # cloth horizontal at z = 1.2, pinned along its column i = 0 (x = -0.4, a rod), released: swings down
    "swing": dict(frames=45, origin=(-0.4, -0.4, 1.2), u=(1, 0, 0), v=(0, 1, 0), pin="left", ball=None,
                  rod=True, hand=None, camera=dict(location=(0.75, -2.25, 1.55), target=(-0.3, 0.0, 0.8), lens=38.0)),
    # cloth dropped flat from z = 0.75 onto a ball (radius 0.2) resting on the floor, off-centre: slides, crumples
    "drape": dict(frames=60, origin=None, centre=(0.2, 0.07, 0.75), angle_deg=20.0, pin=None,
                  ball=dict(centre=(0.0, 0.0, 0.2), radius=0.2), rod=False, hand=None,
                  camera=dict(location=(1.25, -1.55, 1.15), target=(0.2, 0.08, 0.2), lens=35.0)),
    # cloth hanging in the plane y = 0, its top row (z = 1.25) held by a hand (kinematic pin) that moves it
    "hand": dict(frames=45, origin=(-0.4, 0.0, 0.45), u=(1, 0, 0), v=(0, 0, 1), pin="top", ball=None, rod=False,
                 hand=[(1, (0.0, 0.0, 0.0)), (14, (0.28, -0.22, 0.06)), (28, (-0.12, 0.12, 0.0)),
                       (40, (0.12, -0.05, 0.1))],
                 camera=dict(location=(1.3, -1.9, 1.5), target=(0.05, -0.02, 0.9), lens=35.0)),
    # cloth hanging in the plane y = 0 from a rod (top row pinned), blown by a wind force field towards +Y (turned
    # 15 deg towards +X) whose strength ramps from 0 (Blender frame 1) to 1500 (frame 10), then holds
    "wind": dict(frames=45, origin=(-0.4, 0.0, 0.45), u=(1, 0, 0), v=(0, 0, 1), pin="top", ball=None, rod=True,
                 hand=None, wind=dict(direction=(math.sin(math.radians(15)), math.cos(math.radians(15)), 0.0),
                                      location=(0.0, -1.0, 0.85), strength=[(1, 0.0), (10, 1500.0)]),
                 camera=dict(location=(1.75, -1.45, 1.5), target=(0.0, 0.2, 0.85), lens=35.0)),
    # a check on the swing's steps: another cloth (2.7x stiffer, more damped, twice the air damping), another
    # start and another camera (from the other side, wider), fitted with swing.toml's settings untouched
    "swing2": dict(frames=45, origin=(-0.4, -0.45, 1.15), u=(1, 0, 0), v=(0, 1, 0), pin="left", ball=None,
                   rod=True, hand=None,
                   cloth=dict(tension_stiffness=40.0, compression_stiffness=40.0, shear_stiffness=12.0,
                              air_damping=2.0, tension_damping=8.0, compression_damping=8.0, shear_damping=8.0),
                   camera=dict(location=(-1.5, -1.9, 2.35), target=(-0.1, 0.0, 0.75), lens=30.0)),
}


# ----------------------------------------------------------------------------------------------------- the grid
def grid_triangles(dim_x, dim_y):
    """Triangles of gradsim-jax's `cloth_grid` (reverse_winding=False): cell (ci, cj), cj outer, ci inner, split
    into (v00, v10, v01) and (v10, v11, v01).

    Args:
        dim_x: cells along the grid's first axis.
        dim_y: cells along the grid's second axis.

    Returns:
        int32 [2 dim_x dim_y, 3] vertex indices in our order.
    """
    row = dim_x + 1
    tris = []
    for cj in range(1, dim_y + 1):
        for ci in range(1, dim_x + 1):
            v00, v10 = (cj - 1) * row + ci - 1, (cj - 1) * row + ci
            v01, v11 = cj * row + ci - 1, cj * row + ci
            tris += [(v00, v10, v01), (v10, v11, v01)]
    return np.array(tris, np.int32)


def grid_pose(case):
    """The grid's world pose: vertex (0, 0)'s position and its two in-plane unit axes (Blender world, Z up).

    Args:
        case: one entry of CASES.

    Returns:
        (origin [3], u [3], v [3]) numpy float64.
    """
    if case.get("origin") is not None:
        return np.array(case["origin"], float), np.array(case["u"], float), np.array(case["v"], float)
    a = math.radians(case["angle_deg"])
    u = np.array([math.cos(a), math.sin(a), 0.0])
    v = np.array([-math.sin(a), math.cos(a), 0.0])
    half = DIM * CELL / 2
    return np.array(case["centre"], float) - half * u - half * v, u, v


def grid_vertices(origin, u, v):
    """Rest positions in our order: vertex j (DIM + 1) + i at origin + i CELL u + j CELL v.

    Args:
        origin: [3] m, vertex (0, 0).
        u: [3] unit, the grid's first in-plane axis (i).
        v: [3] unit, the grid's second in-plane axis (j).

    Returns:
        float64 [(DIM + 1)^2, 3] m.
    """
    jj, ii = np.meshgrid(np.arange(DIM + 1), np.arange(DIM + 1), indexing="ij")
    ii, jj = ii.reshape(-1, 1), jj.reshape(-1, 1)
    return origin + ii * CELL * u + jj * CELL * v


def pinned_indices(pin):
    """Indices (our order) of the pinned vertices: "left" = column i = 0, "top" = row j = DIM, None = none.

    Args:
        pin: "left", "top" or None.

    Returns:
        list of int.
    """
    row = DIM + 1
    if pin == "left":
        return [j * row for j in range(DIM + 1)]
    if pin == "top":
        return [DIM * row + i for i in range(DIM + 1)]
    return []


# ------------------------------------------------------------------------------------------------- the scene
def reset_scene(width, height, frames):
    """An empty scene: 30 fps, gravity SCENE_GRAVITY, Cycles on the CPU.

    Args:
        width: px.
        height: px.
        frames: frame count (Blender frames 1 .. frames).

    Returns:
        bpy.types.Scene.
    """
    bpy.ops.wm.read_factory_settings(use_empty=True)
    sc = bpy.context.scene
    sc.render.fps, sc.render.fps_base = FPS, 1.0
    sc.frame_start, sc.frame_end = 1, frames
    sc.use_gravity = True
    sc.gravity = (0.0, 0.0, -SCENE_GRAVITY)
    sc.render.engine = "CYCLES"
    sc.cycles.device = "CPU"
    sc.render.resolution_x, sc.render.resolution_y = width, height
    sc.render.resolution_percentage = 100
    sc.render.threads_mode = "FIXED"
    sc.render.threads = max(1, min(2, os.cpu_count() or 1))
    sc.render.dither_intensity = 0.5
    sc.render.image_settings.file_format = "PNG"
    sc.render.image_settings.color_depth = "8"
    sc.render.image_settings.compression = 90
    sc.cycles.max_bounces = 4
    sc.cycles.use_animated_seed = False
    return sc


def _nodes(material_or_world):
    tree = material_or_world.node_tree
    return tree.nodes, tree.links


def _principled(name, roughness, sheen=0.0):
    mat = bpy.data.materials.new(name)
    nodes, _ = _nodes(mat)
    bsdf = nodes["Principled BSDF"]
    bsdf.inputs["Roughness"].default_value = roughness
    if sheen:
        bsdf.inputs["Sheen Weight"].default_value = sheen
    return mat, bsdf


def fabric_material():
    """Checker fabric: 8 x 8 checks (red / cream) on the cloth's UVs, a fine noise weave as bump, some sheen.

    Returns:
        bpy.types.Material.
    """
    mat, bsdf = _principled("fabric", 0.85, sheen=0.4)
    nodes, links = _nodes(mat)
    uv = nodes.new("ShaderNodeTexCoord")
    checker = nodes.new("ShaderNodeTexChecker")
    checker.inputs["Scale"].default_value = 8.0
    checker.inputs["Color1"].default_value = (0.42, 0.025, 0.02, 1.0)
    checker.inputs["Color2"].default_value = (0.6, 0.55, 0.42, 1.0)
    links.new(uv.outputs["UV"], checker.inputs["Vector"])
    links.new(checker.outputs["Color"], bsdf.inputs["Base Color"])
    weave = nodes.new("ShaderNodeTexNoise")
    weave.inputs["Scale"].default_value = 180.0
    weave.inputs["Detail"].default_value = 2.0
    links.new(uv.outputs["UV"], weave.inputs["Vector"])
    bump = nodes.new("ShaderNodeBump")
    bump.inputs["Strength"].default_value = 0.15
    links.new(weave.outputs["Fac"], bump.inputs["Height"])
    links.new(bump.outputs["Normal"], bsdf.inputs["Normal"])
    return mat


def _ramp(nodes, a, b):
    ramp = nodes.new("ShaderNodeValToRGB")
    ramp.color_ramp.elements[0].color = a
    ramp.color_ramp.elements[1].color = b
    return ramp


def slate_material():
    """Slate tiles: a brick texture (30 cm tiles, dark mortar) whose tiles vary by a noise, with a bump.

    Returns:
        bpy.types.Material.
    """
    mat, bsdf = _principled("slate", 0.55)
    nodes, links = _nodes(mat)
    coord = nodes.new("ShaderNodeTexCoord")
    noise = nodes.new("ShaderNodeTexNoise")
    noise.inputs["Scale"].default_value = 6.0
    noise.inputs["Detail"].default_value = 8.0
    links.new(coord.outputs["Object"], noise.inputs["Vector"])
    ramp = _ramp(nodes, (0.03, 0.033, 0.04, 1.0), (0.09, 0.095, 0.1, 1.0))
    links.new(noise.outputs["Fac"], ramp.inputs["Fac"])
    ramp2 = _ramp(nodes, (0.05, 0.05, 0.055, 1.0), (0.13, 0.125, 0.12, 1.0))
    links.new(noise.outputs["Fac"], ramp2.inputs["Fac"])
    brick = nodes.new("ShaderNodeTexBrick")
    brick.offset = 0.0
    brick.inputs["Scale"].default_value = 1.0
    brick.inputs["Brick Width"].default_value = 0.3
    brick.inputs["Row Height"].default_value = 0.3
    brick.inputs["Mortar Size"].default_value = 0.006
    brick.inputs["Mortar"].default_value = (0.02, 0.02, 0.02, 1.0)
    links.new(coord.outputs["Object"], brick.inputs["Vector"])
    links.new(ramp.outputs["Color"], brick.inputs["Color1"])
    links.new(ramp2.outputs["Color"], brick.inputs["Color2"])
    brick.inputs["Bias"].default_value = 0.0
    links.new(brick.outputs["Color"], bsdf.inputs["Base Color"])
    bump = nodes.new("ShaderNodeBump")
    bump.inputs["Strength"].default_value = 0.3
    links.new(brick.outputs["Fac"], bump.inputs["Height"])
    links.new(bump.outputs["Normal"], bsdf.inputs["Normal"])
    return mat


def plaster_material():
    """A warm plaster wall: a low-contrast noise colour.

    Returns:
        bpy.types.Material.
    """
    mat, bsdf = _principled("plaster", 0.9)
    nodes, links = _nodes(mat)
    noise = nodes.new("ShaderNodeTexNoise")
    noise.inputs["Scale"].default_value = 3.0
    noise.inputs["Detail"].default_value = 10.0
    ramp = _ramp(nodes, (0.3, 0.25, 0.18, 1.0), (0.42, 0.36, 0.27, 1.0))
    links.new(noise.outputs["Fac"], ramp.inputs["Fac"])
    links.new(ramp.outputs["Color"], bsdf.inputs["Base Color"])
    return mat


def plain_material(name, color, roughness):
    """A one-colour Principled material.

    Args:
        name: the material's name.
        color: (r, g, b) linear.
        roughness: 0..1.

    Returns:
        bpy.types.Material.
    """
    mat, bsdf = _principled(name, roughness)
    bsdf.inputs["Base Color"].default_value = (*color, 1.0)
    return mat


def add_object(sc, name, mesh, material=None):
    ob = bpy.data.objects.new(name, mesh)
    sc.collection.objects.link(ob)
    if material is not None:
        mesh.materials.append(material)
    return ob


def plane_mesh(name, corners):
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([tuple(c) for c in corners], [], [(0, 1, 2, 3)])
    mesh.update()
    return mesh


def build_room(sc):
    """Floor (z = 0, slate, a collider), a wall behind the scene (y = 1.3), a sun with soft shadows, a sky.

    Args:
        sc: the scene.

    Returns:
        dict name -> object (floor, wall, sun).
    """
    floor = add_object(sc, "floor", plane_mesh("floor", [(-4, -4, 0), (4, -4, 0), (4, 4, 0), (-4, 4, 0)]),
                       slate_material())
    collide(floor)
    wall = add_object(sc, "wall", plane_mesh("wall", [(-4, 1.3, 0), (4, 1.3, 0), (4, 1.3, 4), (-4, 1.3, 4)]),
                      plaster_material())
    sun_data = bpy.data.lights.new("sun", "SUN")
    sun_data.energy = 3.0
    sun_data.angle = math.radians(6.0)  # soft shadow edges
    sun = bpy.data.objects.new("sun", sun_data)
    sc.collection.objects.link(sun)
    sun.rotation_euler = (math.radians(40.0), 0.0, math.radians(-50.0))
    world = bpy.data.worlds.new("sky")
    sc.world = world
    nodes, links = _nodes(world)
    # a sky gradient on the view direction's height (Blender's Sky Texture node costs ~3 s per render here)
    coord = nodes.new("ShaderNodeTexCoord")
    xyz = nodes.new("ShaderNodeSeparateXYZ")
    links.new(coord.outputs["Generated"], xyz.inputs["Vector"])
    sky = _ramp(nodes, (0.75, 0.78, 0.8, 1.0), (0.22, 0.38, 0.75, 1.0))
    links.new(xyz.outputs["Z"], sky.inputs["Fac"])
    nodes["Background"].inputs["Strength"].default_value = 0.5
    links.new(sky.outputs["Color"], nodes["Background"].inputs["Color"])
    return {"floor": floor, "wall": wall, "sun": sun}


def collide(ob):
    """Make `ob` a collider of Blender's cloth, with the COLLIDER settings.

    Args:
        ob: a mesh object.
    """
    ob.modifiers.new("Collision", "COLLISION")
    for key, value in COLLIDER.items():
        setattr(ob.collision, key, value)


def build_ball(sc, ball):
    """A UV sphere (64 x 32) resting on the floor, a collider.

    Args:
        sc: the scene.
        ball: dict(centre=[3] m, radius=m).

    Returns:
        the ball object.
    """
    import bmesh

    mesh = bpy.data.meshes.new("ball")
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=64, v_segments=32, radius=ball["radius"])
    bm.to_mesh(mesh)
    bm.free()
    for p in mesh.polygons:
        p.use_smooth = True
    ob = add_object(sc, "ball", mesh, plain_material("rubber", (0.05, 0.18, 0.45), 0.35))
    ob.location = ball["centre"]
    collide(ob)
    return ob


def build_rod(sc, a, b, radius=0.012):
    """A wooden rod (cylinder) from a to b (decor only: no collider).

    Args:
        sc: the scene.
        a: [3] m, one end.
        b: [3] m, the other end.
        radius: m.

    Returns:
        the rod object.
    """
    import bmesh

    a, b = Vector(a), Vector(b)
    mesh = bpy.data.meshes.new("rod")
    bm = bmesh.new()
    bmesh.ops.create_cone(bm, cap_ends=True, segments=24, radius1=radius, radius2=radius, depth=(b - a).length)
    bm.to_mesh(mesh)
    bm.free()
    for p in mesh.polygons:
        p.use_smooth = True
    ob = add_object(sc, "rod", mesh, plain_material("wood", (0.25, 0.13, 0.05), 0.5))
    ob.location = (a + b) / 2
    ob.rotation_euler = (b - a).to_track_quat("Z", "Y").to_euler()
    return ob


def build_cloth(sc, rest, pins, hand, settings=None):
    """The cloth: a mesh whose vertices and triangles are in our grid order, UVs, Blender's cloth modifier with
    the CLOTH settings (updated with `settings`, a case's own) and the COLLISION settings, the pinned vertices in the vertex group "pin"; with `hand`, a hook modifier
    (before the cloth) moves the pin group with an animated empty (a kinematic pin).

    Args:
        sc: the scene.
        rest: [V, 3] m, rest positions in our order (world; the object has the identity transform).
        pins: pinned vertex indices.
        hand: None or [(blender frame, (dx, dy, dz) m)] keyframes of the pin's displacement.

    Returns:
        (cloth object, hand empty or None).
    """
    mesh = bpy.data.meshes.new("cloth")
    mesh.from_pydata([tuple(p) for p in rest], [], [tuple(int(k) for k in t) for t in grid_triangles(DIM, DIM)])
    mesh.update()
    uv = mesh.uv_layers.new(name="UVMap")
    uvs = np.stack([(np.arange(len(rest)) % (DIM + 1)) / DIM, (np.arange(len(rest)) // (DIM + 1)) / DIM], 1)
    loop_vertex = np.zeros(len(mesh.loops), np.int64)
    mesh.loops.foreach_get("vertex_index", loop_vertex)
    uv.data.foreach_set("uv", uvs[loop_vertex].astype(np.float32).ravel())
    for p in mesh.polygons:
        p.use_smooth = True
    ob = add_object(sc, "cloth", mesh, fabric_material())
    empty = None
    if pins:
        group = ob.vertex_groups.new(name="pin")
        group.add(pins, 1.0, "REPLACE")
    if hand:
        empty = bpy.data.objects.new("hand", None)
        sc.collection.objects.link(empty)
        for frame, offset in hand:
            empty.location = offset
            empty.keyframe_insert("location", frame=frame)
        hook = ob.modifiers.new("hand", "HOOK")
        hook.object = empty
        hook.vertex_group = "pin"
        hook.falloff_type = "NONE"
        hook.matrix_inverse = Matrix.Identity(4)  # the empty rests at the origin: its location is the pin's offset
        hook.center = (0.0, 0.0, 0.0)
    cloth = ob.modifiers.new("Cloth", "CLOTH")
    for key, value in {**CLOTH, **(settings or {})}.items():
        setattr(cloth.settings, key, value)
    for key, value in COLLISION.items():
        setattr(cloth.collision_settings, key, value)
    if pins:
        cloth.settings.vertex_group_mass = "pin"
    cloth.point_cache.frame_start, cloth.point_cache.frame_end = sc.frame_start, sc.frame_end
    return ob, empty


def build_wind(wind):
    """A wind force field (Blender's effector, shape PLANE, no falloff, no noise) at wind["location"] blowing
    along wind["direction"] (its local +Z), its strength keyframed by wind["strength"] [(frame, strength)].

    Args:
        wind: dict(direction=[3], location=[3] m, strength=[(Blender frame, Blender's strength)]).

    Returns:
        the field's object.
    """
    bpy.ops.object.effector_add(type="WIND", location=wind["location"])
    ob = bpy.context.object
    ob.name = "wind"
    ob.rotation_euler = Vector(wind["direction"]).normalized().to_track_quat("Z", "Y").to_euler()
    ob.field.flow, ob.field.noise = 0.0, 0.0
    for frame, strength in wind["strength"]:
        ob.field.strength = strength
        ob.field.keyframe_insert("strength", frame=frame)
    return ob


def look_at_camera(sc, location, target, lens):
    """A perspective camera at `location` looking at `target` (its local -Z forward, +Y up), `lens` mm on
    Blender's default 36 mm sensor, sensor fit AUTO.

    Args:
        sc: the scene.
        location: [3] m.
        target: [3] m.
        lens: focal length, mm.

    Returns:
        the camera object.
    """
    data = bpy.data.cameras.new("camera")
    data.lens = lens
    data.clip_start, data.clip_end = 0.05, 50.0
    cam = bpy.data.objects.new("camera", data)
    sc.collection.objects.link(cam)
    cam.location = location
    cam.rotation_euler = (Vector(target) - Vector(location)).to_track_quat("-Z", "Y").to_euler()
    sc.camera = cam
    return cam


# ------------------------------------------------------------------------------------------------ simulation
def evaluated_vertices(sc, ob, frame):
    """The cloth's evaluated vertex positions at a Blender frame (world coordinates).

    Args:
        sc: the scene.
        ob: the cloth object.
        frame: Blender frame number.

    Returns:
        float64 [V, 3] m.
    """
    sc.frame_set(frame)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    co = np.zeros(len(ev.data.vertices) * 3)
    ev.data.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    mw = np.array(ev.matrix_world)
    return co @ mw[:3, :3].T + mw[:3, 3]


def simulate(sc, ob, frames):
    """Step Blender's cloth through frames 1 .. frames in order and record the evaluated vertices.

    Args:
        sc: the scene.
        ob: the cloth object.
        frames: count.

    Returns:
        float64 [frames, V, 3] m (video frame k = Blender frame k + 1, at t = k / FPS).
    """
    return np.stack([evaluated_vertices(sc, ob, f) for f in range(sc.frame_start, sc.frame_start + frames)])


def fit_free_fall(z, fps=FPS):
    """Fit a centroid height z(t) by z0 + v0 t - g t^2 / 2 and by z0 - g t^2 / 2 (t = k / fps).

    Args:
        z: [frames] m.
        fps: frames per second.

    Returns:
        dict with g_eff (with v0 free), v0, g_eff_no_v0 (the brief's model), their max residuals, and the mean
        second difference times fps^2.
    """
    t = np.arange(len(z)) / fps
    full = np.stack([np.ones_like(t), t, -0.5 * t**2], 1)
    c_full, *_ = np.linalg.lstsq(full, z, rcond=None)
    rest = np.stack([np.ones_like(t), -0.5 * t**2], 1)
    c_rest, *_ = np.linalg.lstsq(rest, z, rcond=None)
    return {"g_eff": float(c_full[2]), "v0": float(c_full[1]),
            "max_residual_m": float(np.abs(full @ c_full - z).max()),
            "g_eff_no_v0": float(c_rest[1]), "max_residual_no_v0_m": float(np.abs(rest @ c_rest - z).max()),
            "second_difference_g": float(-np.diff(z, 2).mean() * fps**2)}


def measure_free_fall(frames=30, settings=None):
    """The effective gravity of Blender's cloth in this script's setup: an unpinned 16 x 16 cloth with the CLOTH
    settings but no air damping, no colliders, falling from z = 50 m for `frames` frames under SCENE_GRAVITY;
    fits its centroid height (`fit_free_fall`). This is how SCENE_GRAVITY = 9.81 / 0.9 was found (at 9.81 the
    fit gives 8.83 = 0.9 x 9.81).

    Args:
        frames: frames to simulate.
        settings: a case's own cloth settings over CLOTH (None: CLOTH's).

    Returns:
        the dict of `fit_free_fall`, plus scene_gravity.
    """
    sc = reset_scene(16, 16, frames)
    origin, u, v = np.array([0.0, 0.0, 50.0]), np.array([1.0, 0, 0]), np.array([0, 1.0, 0])
    ob, _ = build_cloth(sc, grid_vertices(origin, u, v), [], None, settings)
    ob.modifiers["Cloth"].settings.air_damping = 0.0
    z = simulate(sc, ob, frames)[:, :, 2].mean(1)
    return {**fit_free_fall(z), "scene_gravity": SCENE_GRAVITY, "frames": frames}


# ------------------------------------------------------------------------------------------------- rendering
def set_cloth_vertices(ob, x):
    """Put the (modifier-free) cloth mesh at positions x (world = local: identity transform).

    Args:
        ob: the cloth object.
        x: [V, 3] m.
    """
    ob.data.vertices.foreach_set("co", np.asarray(x, np.float32).ravel())
    ob.data.update()


def strip_png_text(path):
    """Drop a PNG's tEXt chunks in place (Blender's and Cycles' metadata: date, render times), so that a
    re-run writes the same bytes; the pixels are untouched.

    Args:
        path: a PNG file.
    """
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [data[:8]], 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind != b"tEXt":
            out.append(data[pos:pos + 12 + length])
        pos += 12 + length
    with open(path, "wb") as f:
        f.write(b"".join(out))


def render_to(sc, path):
    sc.render.filepath = path
    bpy.ops.render.render(write_still=True)
    strip_png_text(path)


def colour_mode(sc, samples):
    """Settings of the photo pass: RGB PNG, AgX, `samples` per pixel, OpenImageDenoise.

    Args:
        sc: the scene.
        samples: Cycles samples per pixel.
    """
    sc.render.image_settings.color_mode = "RGB"
    sc.view_settings.view_transform = "AgX"
    sc.view_settings.exposure = -0.3
    sc.cycles.samples = samples
    sc.cycles.use_denoising = True
    sc.cycles.denoiser = "OPENIMAGEDENOISE"
    sc.cycles.denoising_prefilter = "FAST"
    sc.cycles.max_bounces = 4
    sc.view_layers[0].material_override = None
    sc.world = bpy.data.worlds["sky"]
    for ob in sc.objects:
        ob.is_holdout = False


def mask_mode(sc, cloth, samples=16):
    """Settings of the mask pass: every object but the cloth is a holdout (it still hides the cloth), the cloth
    emits white (1.0) on a black world, Raw view transform: a pixel's grey level is the cloth's visible coverage,
    linear, in 8 bits.

    Args:
        sc: the scene.
        cloth: the cloth object.
        samples: Cycles samples per pixel (no denoiser).
    """
    if "mask_white" not in bpy.data.materials:
        mat = bpy.data.materials.new("mask_white")
        nodes, links = _nodes(mat)
        nodes.remove(nodes["Principled BSDF"])
        emit = nodes.new("ShaderNodeEmission")
        emit.inputs["Strength"].default_value = 1.0
        emit.inputs["Color"].default_value = (1.0, 1.0, 1.0, 1.0)
        links.new(emit.outputs["Emission"], nodes["Material Output"].inputs["Surface"])
        black = bpy.data.worlds.new("black")
        nodes, _ = _nodes(black)
        nodes["Background"].inputs["Strength"].default_value = 0.0
    sc.render.image_settings.color_mode = "BW"
    sc.view_settings.view_transform = "Raw"
    sc.view_settings.exposure = 0.0
    sc.cycles.samples = samples
    sc.cycles.use_denoising = False
    sc.cycles.max_bounces = 0
    sc.view_layers[0].material_override = bpy.data.materials["mask_white"]
    sc.world = bpy.data.worlds["black"]
    for ob in sc.objects:
        ob.is_holdout = ob is not cloth and ob.type == "MESH"


# ------------------------------------------------------------------------------------------------- the files
def camera_json(sc, cam):
    """Blender's own camera description (not converted), for camera.json.

    Args:
        sc: the scene.
        cam: the camera object.

    Returns:
        dict.
    """
    d = cam.data
    return {"convention": "Blender: world Z up; the camera looks along its local -Z with local +Y up; "
                          "matrix_world maps camera-local to world coordinates (m)",
            "type": d.type, "lens_mm": d.lens, "sensor_width_mm": d.sensor_width, "sensor_height_mm": d.sensor_height,
            "sensor_fit": d.sensor_fit, "resolution": [sc.render.resolution_x, sc.render.resolution_y],
            "pixel_aspect": [sc.render.pixel_aspect_x, sc.render.pixel_aspect_y], "shift_x": d.shift_x,
            "shift_y": d.shift_y, "clip_start": d.clip_start, "clip_end": d.clip_end,
            "matrix_world": [list(map(float, r)) for r in cam.matrix_world], "fps": FPS}


def rna_values(settings):
    """The simple (number, bool, enum, string, short array) properties of a Blender settings struct.

    Args:
        settings: a bpy struct (ClothSettings, ClothCollisionSettings, CollisionSettings, FieldSettings).

    Returns:
        dict name -> value.
    """
    out = {}
    for prop in settings.bl_rna.properties:
        key = prop.identifier
        if key == "rna_type" or prop.type in {"POINTER", "COLLECTION"}:
            continue
        value = getattr(settings, key)
        if prop.type in {"FLOAT", "INT", "BOOLEAN"} and getattr(prop, "array_length", 0):
            value = [v for v in value]
        if isinstance(value, set):
            value = sorted(value)
        out[key] = value
    return out


def edge_strain(rest, verts):
    """The largest stretch of a triangle edge over all frames, |l| / |l0| - 1.

    Args:
        rest: [V, 3] m, rest positions.
        verts: [frames, V, 3] m.

    Returns:
        float.
    """
    tris = grid_triangles(DIM, DIM)
    edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    rest_len = np.linalg.norm(rest[edges[:, 0]] - rest[edges[:, 1]], axis=1)
    return float((np.linalg.norm(verts[:, edges[:, 0]] - verts[:, edges[:, 1]], axis=2) / rest_len - 1).max())


def case_json(name, case, rest, pins, verts, cloth, ball_ob, free_fall, frame0_diff, render_s, size, samples):
    """Everything a scene file needs to rebuild the case, in Blender world coordinates (Z up) and SI units.

    Args:
        name: the case's name.
        case: its CASES entry.
        rest: [V, 3] m, the built positions.
        pins: pinned indices.
        verts: [frames, V, 3] m, the evaluated positions.
        cloth: the cloth object (its modifier still on).
        ball_ob: the ball object or None.
        free_fall: `measure_free_fall`'s dict.
        frame0_diff: m, max |frame 0 - built positions|.
        render_s: s, wall time of the renders.
        size: (w, h) px.
        samples: Cycles samples of the photo pass.

    Returns:
        dict.
    """
    origin, u, v = grid_pose(case)
    mod = cloth.modifiers["Cloth"]
    frames = verts.shape[0]
    pin_offset = (verts[:, pins] - rest[pins]).mean(1) if pins else np.zeros((frames, 3))
    return {
        "case": name, "units": "SI (m, s, kg); Blender world coordinates, Z up",
        "fps": FPS, "frames": frames, "time_of_frame_k": "t = k / fps (frame k = Blender frame k + 1)",
        "resolution": list(size), "samples": samples,
        "grid": {"dim_x": DIM, "dim_y": DIM, "cell_x": CELL, "cell_y": CELL, "origin": origin.tolist(),
                 "axis_x": u.tolist(), "axis_y": v.tolist(), "normal": np.cross(u, v).tolist(),
                 "order": "particle (i, j) = j (dim_x + 1) + i at origin + i cell_x axis_x + j cell_y axis_y",
                 "triangles": "faces.npy: cloth_grid's split, (v00, v10, v01), (v10, v11, v01) per cell",
                 "frame0_max_abs_diff_m": frame0_diff, "initial_velocity": [0.0, 0.0, 0.0]},
        "pinned": {"indices": pins, "kind": ("kinematic (hook on an animated empty)" if case["hand"] else
                                             "fixed" if pins else "none"),
                   "keyframes": ([{"blender_frame": f, "offset": list(o)} for f, o in case["hand"]]
                                 if case["hand"] else None),
                   "offset_per_frame": pin_offset.tolist() if case["hand"] else None,
                   "max_abs_pin_error_m": (float(np.abs(verts[:, pins] - rest[pins] - pin_offset[:, None]).max())
                                           if pins else None),
                   "positions_per_frame": "vertices.npy[:, indices]"},
        "ball": ({"centre": list(case["ball"]["centre"]), "radius": case["ball"]["radius"],
                  "mesh": "UV sphere, 64 x 32 segments (faces inside the sphere by up to 0.5 mm)",
                  "collision": rna_values(ball_ob.collision)} if ball_ob else None),
        "floor": {"height": 0.0, "normal": [0.0, 0.0, 1.0], "collider": True,
                  "collision": rna_values(bpy.data.objects["floor"].collision)},
        "wind": None,
        "gravity": {"scene_gravity": [0.0, 0.0, -SCENE_GRAVITY],
                    "note": "Blender's cloth falls 0.001 g m per frame^2, 0.9 g at 30 fps: the scene's 10.9 gives 9.81",
                    "effective_measured": free_fall},
        "blender_cloth": {"settings": rna_values(mod.settings),
                          "collision_settings": rna_values(mod.collision_settings),
                          "mass_unit": "kg per vertex", "total_mass_kg": mod.settings.mass * len(rest),
                          "note": "settings.gravity is a legacy field the solver ignores (the scene's gravity "
                                  "applies: use_gravity on); stiffness and damping are in Blender's units",
                          "max_edge_strain": edge_strain(rest, verts),
                          "self_collision": mod.collision_settings.use_self_collision},
        "render": {"engine": "CYCLES (CPU)", "seconds": render_s, "blender": bpy.app.version_string,
                   "photo_view_transform": "AgX", "mask": "holdout pass: coverage of the visible cloth, linear"},
    }


def write_case(name, out_dir, width, height, frames, samples):
    """Build, simulate and render one case into out_dir/name.

    Args:
        name: a key of CASES.
        out_dir: the output folder.
        width: px.
        height: px.
        frames: frame count (None: the case's own).
        samples: Cycles samples per pixel of the photo pass.

    Returns:
        the case.json dict.
    """
    case = CASES[name]
    frames = frames or case["frames"]
    sim_frames = max(frames, case["frames"])  # the same simulation whatever --frames says
    free_fall = measure_free_fall(settings=case.get("cloth"))
    sc = reset_scene(width, height, sim_frames)
    build_room(sc)
    origin, u, v = grid_pose(case)
    rest = grid_vertices(origin, u, v)
    pins = pinned_indices(case["pin"])
    ball_ob = build_ball(sc, case["ball"]) if case["ball"] else None
    if case["rod"]:
        ends = rest[pins[0]], rest[pins[-1]]
        direction = (ends[1] - ends[0]) / np.linalg.norm(ends[1] - ends[0])
        build_rod(sc, ends[0] - 0.05 * direction + [0, 0, 0.014], ends[1] + 0.05 * direction + [0, 0, 0.014])
    wind_ob = build_wind(case["wind"]) if case.get("wind") else None
    cloth, _ = build_cloth(sc, rest, pins, case["hand"], case.get("cloth"))
    cam = look_at_camera(sc, **case["camera"])
    verts = simulate(sc, cloth, sim_frames)[:frames]
    frame0_diff = float(np.abs(verts[0] - rest).max())
    info = case_json(name, case, rest, pins, verts, cloth, ball_ob, free_fall, frame0_diff, None, (width, height),
                     samples)
    if wind_ob is not None:
        info["wind"] = {"direction": list(case["wind"]["direction"]), "location": list(case["wind"]["location"]),
                        "strength_keyframes": [{"blender_frame": f, "strength": w}
                                               for f, w in case["wind"]["strength"]],
                        "note": "Blender's wind field (effector), shape PLANE, no falloff, noise 0, flow 0; strength "
                                "in Blender's units, Bezier-eased between keyframes, held after; it pushes "
                                "faces along their normals (the direction's in-plane part has no visible effect)",
                        "blender_field": rna_values(wind_ob.field)}
        strengths = []
        for k in range(frames):
            sc.frame_set(sc.frame_start + k)
            strengths.append(wind_ob.field.strength)
        info["wind"]["strength_per_frame"] = strengths
    folder = os.path.join(out_dir, name)
    os.makedirs(os.path.join(folder, "frames"), exist_ok=True)
    os.makedirs(os.path.join(folder, "masks"), exist_ok=True)
    np.save(os.path.join(folder, "vertices.npy"), verts.astype(np.float32))
    np.save(os.path.join(folder, "faces.npy"), grid_triangles(DIM, DIM))
    cloth.modifiers.clear()  # the renders show the recorded vertices exactly
    t0 = time.time()
    colour_mode(sc, samples)
    cloth.hide_render = True
    render_to(sc, os.path.join(folder, "background.png"))
    cloth.hide_render = False
    for k in range(frames):
        sc.frame_set(sc.frame_start + k)
        set_cloth_vertices(cloth, verts[k])
        colour_mode(sc, samples)
        render_to(sc, os.path.join(folder, "frames", f"{k:04d}.png"))
        mask_mode(sc, cloth)
        render_to(sc, os.path.join(folder, "masks", f"{k:04d}.png"))
    info["render"]["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(folder, "camera.json"), "w") as f:
        json.dump(camera_json(sc, cam), f, indent=1)
    with open(os.path.join(folder, "case.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def main(argv=None):
    """Command line: --case NAME|all, --out DIR, --size WxH, --frames N, --samples N, --small.

    Args:
        argv: arguments (None: sys.argv).
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", default="all", help=f"one of {sorted(CASES)} or all")
    p.add_argument("--out", default="benchmarks/blender/data", help="output folder (one sub-folder per case)")
    p.add_argument("--size", default=None, help="WxH px (default 160x120; --small: 80x60)")
    p.add_argument("--frames", type=int, default=None, help="frames (default: the case's own; --small: 20)")
    p.add_argument("--samples", type=int, default=None, help="Cycles samples per pixel (default 32; --small 16)")
    p.add_argument("--small", action="store_true", help="the test-data version: 80x60, 20 frames, 16 samples")
    p.add_argument("--free-fall", action="store_true", help="only measure the effective gravity and print it")
    args = p.parse_args(argv)
    if args.free_fall:
        print(json.dumps(measure_free_fall(), indent=1))
        return
    size = args.size or ("80x60" if args.small else "160x120")
    width, height = (int(s) for s in size.lower().split("x"))
    frames = args.frames or (20 if args.small else None)
    samples = args.samples or (16 if args.small else 32)
    names = sorted(CASES) if args.case == "all" else [args.case]
    for name in names:
        info = write_case(name, args.out, width, height, frames, samples)
        ff = info["gravity"]["effective_measured"]
        print(f"{name}: {info['frames']} frames {width}x{height}, render {info['render']['seconds']} s, "
              f"g_eff {ff['g_eff']:.4f}, frame 0 order diff {info['grid']['frame0_max_abs_diff_m']:.2e} m",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else None)
