"""[render]: read once (`read_render` -> `RenderOptions`: size, background, colours, lights, render settings), then
the picture behind the scene (`read_background_image`) and the look of the faces (`read_look`)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.render import FaceColors, Lights, RenderSettings
from gradsim_jax.render.colors import checker_colors
from gradsim_jax.render.coverage_models import COVERAGE_MODELS
from gradsim_jax.render.mesh import face_ranges, scene_faces, scene_vertices
from gradsim_jax.scenefile.colliders import collider_face_colors, hidden_collider_faces, read_colliders
from gradsim_jax.scenefile.ode import ode_face_colors
from gradsim_jax.scenefile.schema import SceneFileError
from gradsim_jax.scenefile.world import Y_UP_LIGHT, world_vector


@dataclasses.dataclass(frozen=True)
class RenderOptions:
    """[render] read: what the camera, the target's loading, the background and the look use.

    Attributes:
        height: render height, pixels (the target is resized to it).
        width: render width, pixels.
        background: [3] RGB in [0, 1] behind the scene.
        background_image: the picture behind the scene as written (a path relative to the scene file, or
            "median" of the target's frames), or None.
        color: [3] uniform RGB in [0, 1] of the cloth and the soft bodies, or None for a checkerboard.
        lights: the `Lights` (ambient, directional, direction towards the light).
        tile_capacity: faces kept per 8x8 tile, or None for every face.
        pixel_capacity: faces kept per pixel, or None for every face.
        coverage: the edge model ("box", "softras" or "dibr"; checked by `read_look`).
        appearance: "flat" or "video" (checked by `appearance_theta`).
        shadows: draw the meshes' shadow on the ground (`render.shadows`).
    """

    height: int
    width: int
    background: list
    background_image: Optional[str]
    color: Optional[list]
    lights: Lights
    tile_capacity: Optional[int]
    pixel_capacity: Optional[int]
    coverage: str
    appearance: str = "flat"
    shadows: bool = False


def read_render(spec) -> RenderOptions:
    """[render] as `RenderOptions` (the one reader of the section; its values are checked where they are used:
    the size by `camera.read_camera`, the capacities and coverage by `read_look`).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `RenderOptions`.
    """
    ren = spec.sections.render
    lights = Lights(ambient=jnp.asarray(ren.ambient, jnp.float32),
                    directional=jnp.asarray(ren.directional, jnp.float32),
                    direction=jnp.asarray(world_vector(spec, Y_UP_LIGHT) if ren.light_direction is None
                                          else ren.light_direction, jnp.float32))
    return RenderOptions(height=ren.height, width=ren.width, background=ren.background,
                         background_image=ren.background_image, color=ren.color, lights=lights,
                         tile_capacity=ren.tile_capacity, pixel_capacity=ren.pixel_capacity, coverage=ren.coverage,
                         appearance=ren.appearance, shadows=ren.shadows)


#: [render] appearance's values.
APPEARANCES = ("flat", "video")

#: Where a fit of [render] shadows starts: the share of the light the shadow holds back, its softness in pixels.
SHADOW_START = (0.5, 1.0)


def shadow_start(exp, first_frame) -> dict:
    """Where a fit of the shadow starts (`SHADOW_START`), its light's direction read off the first frame
    (`render.shadows.light_from_shadow`: from the shadow's centre on the ground to the meshes' centre) when the
    frame shows a shadow, else [render]'s light.

    Args:
        exp: the built `Experiment` (camera, background, ground, lights, first render vertices).
        first_frame: [H, W, 4] RGBA in [0, 1], the target's first frame at the render size.

    Returns:
        {"shadow", "shadow_blur", "light_direction": [3]}.
    """
    from gradsim_jax.render.shadows import light_from_shadow

    world = exp.params.world
    x0 = np.asarray(scene_vertices(exp.topology, exp.params, exp.state0))
    towards = light_from_shadow(exp.camera, np.asarray(first_frame), np.asarray(exp.background), x0,
                                np.asarray(world.ground_normal), float(np.asarray(world.ground_height)))
    direction = np.asarray(exp.lights.direction) if towards is None else towards
    return {"shadow": jnp.asarray(SHADOW_START[0], exp.dtype), "shadow_blur": jnp.asarray(SHADOW_START[1], exp.dtype),
            "light_direction": jnp.asarray(direction, exp.dtype)}


def appearance_theta(spec, exp, first_frame) -> dict:
    """The appearance quantities a fit of [render] appearance = "video" starts from: every cloth and soft-body
    face's albedo read off the target's first frame (`render.video_appearance.albedo_from_frame`), the other
    parts' colours as the file gives them, and [render]'s lights; with [render] shadows, the shadow's strength and
    softness (`SHADOW_START`) and the light's direction; {} for "flat" without shadows.

    Args:
        spec: the validated scene file (`SceneSpec`).
        exp: the built `Experiment` (its camera, faces, colours, lights, first render vertices).
        first_frame: [H, W, 4] RGBA in [0, 1], the target's first frame at the render size.

    Returns:
        {"albedo": [F, 3], "ambient", "directional", "light_direction": [3], "shadow", "shadow_blur"}, the part
        that applies, or {}.

    Raises:
        SceneFileError: for another [render] appearance.
    """
    from gradsim_jax.render.video_appearance import albedo_from_frame

    ren = read_render(spec)
    mode = ren.appearance
    if mode not in APPEARANCES:
        raise SceneFileError(f"{spec.path}: [render] appearance must be one of {', '.join(map(repr, APPEARANCES))}, "
                             f"got {mode!r}")
    shadow = shadow_start(exp, first_frame) if ren.shadows else {}
    if mode == "flat":
        return shadow
    faces = np.asarray(exp.faces)
    first, end = face_ranges(exp.topology)["particles"]
    read = np.zeros(len(faces), bool)
    read[first:end] = True
    if not read.any():
        raise SceneFileError(f"{spec.path}: [render] appearance = \"video\" reads the albedo of a cloth or soft "
                             "body from the video, and the scene has none")
    x0 = np.asarray(scene_vertices(exp.topology, exp.params, exp.state0))
    albedo = albedo_from_frame(exp.camera, x0, faces, np.asarray(first_frame), exp.lights, read,
                               np.asarray(exp.colors.rgb))
    lights = exp.lights
    return {"albedo": jnp.asarray(albedo, exp.dtype), "ambient": jnp.asarray(lights.ambient, exp.dtype),
            "directional": jnp.asarray(lights.directional, exp.dtype),
            "light_direction": jnp.asarray(lights.direction, exp.dtype), **shadow}


def read_background_image(spec, target_frames=None, undistort=None):
    """[H, W, 3] float32 picture behind the scene at the render size, from [render] background_image
    (a picture file, undistorted like the target; or "median" of `target_frames` [T, H, W, >=3]), or
    None when it is not set.

    Args:
        spec: the validated scene file (`SceneSpec`); the picture's path is relative to its folder.
        target_frames: [T, H, W, >=3] float frames in [0, 1] of the target at the render size, for "median";
            or None.
        undistort: the function removing lens distortion from one frame [H, W, C] (the target's), or None.

    Returns:
        [H, W, 3] float32 RGB in [0, 1], or None.

    Raises:
        SceneFileError: for "median" without target frames, or a missing or unreadable picture.
    """
    from gradsim_jax.render.video import load_target

    ren = read_render(spec)
    name = ren.background_image
    if name is None:
        return None
    if name == "median":
        if target_frames is None:
            raise SceneFileError(f"{spec.path}: [render] background_image = \"median\" needs a target video")
        return np.median(np.asarray(target_frames)[..., :3], axis=0).astype(np.float32)
    picture = spec.resolve(name)
    if not picture.is_file():
        raise SceneFileError(f"{spec.path}: [render] background_image not found: {picture}")
    try:
        frames = load_target(picture, (ren.height, ren.width), undistort=undistort).frames
    except ValueError as e:
        raise SceneFileError(f"{spec.path}: [render] background_image: {e}") from None
    return frames[0, ..., :3]


def read_look(spec, topology, params, state0, body_colors, collider_colors, ode):
    """[render] (and [[body]] color) for a built scene: (faces [F, 3], FaceColors, Lights, RenderSettings).
    Faces are `scene_faces`' (the cloth's, the soft bodies' surfaces, then the bodies'); their colours
    [render] color, else a checkerboard, with each [[body]] color over its body's faces; the colliders' their
    [[collider]] color or grey (`collider_face_colors`); an ODE body's as `ode_face_colors` says.

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology`.
        params: the built scene's `Params` (for the checkerboard's vertices).
        state0: the built scene's initial `State` (for the checkerboard's vertices).
        body_colors: one entry per [[body]]: [3] RGB in [0, 1], or None (`bodies.RigidBodies.colors`).
        collider_colors: one entry per [[collider]]: [3] RGB in [0, 1], or None (`colliders.Colliders.colors`).
        ode: the file's `ode.OdeBody` (the colours of its bobs or balls).

    Returns:
        (faces [F, 3] int vertex indices, `FaceColors` RGB [F, 3] in [0, 1], `Lights`, `RenderSettings`).

    Raises:
        SceneFileError: for a bad [render] tile_capacity, pixel_capacity or coverage.
    """
    path, ren = spec.path, read_render(spec)
    for key, value, what in (("tile_capacity", ren.tile_capacity, "faces kept per 8x8 tile"),
                             ("pixel_capacity", ren.pixel_capacity, "faces kept per pixel")):
        if value is not None and value < 1:
            raise SceneFileError(f"{path}: [render] {key} must be at least 1 ({what}), got {value}; leave "
                                 "it out to keep every face")
    if ren.coverage not in COVERAGE_MODELS:
        raise SceneFileError(f'{path}: [render] coverage must be "box", "softras" or "dibr", got {ren.coverage!r}')
    faces = jnp.asarray(scene_faces(topology))
    if ren.color is not None:
        rgb = np.broadcast_to(np.asarray(ren.color, np.float32), (faces.shape[0], 3)).copy()
    else:
        rgb = np.asarray(checker_colors(faces, scene_vertices(topology, params, state0)), np.float32).copy()
    ranges = face_ranges(topology)  # where each part's faces lie in `scene_faces`
    body_of_face = np.asarray(topology.rigid.vertex_body)[np.asarray(topology.rigid.faces)[:, 0]]  # body by body
    for i, color in enumerate(body_colors):
        if color is not None:
            rgb[ranges["rigid"][0] + np.flatnonzero(body_of_face == i)] = color
    collider_face_colors(collider_colors, topology, rgb, ranges["colliders"][0])
    ode_face_colors(ode, topology, rgb, ranges["ode"][0])
    hidden = hidden_collider_faces(read_colliders(spec).drawn, topology, ranges["colliders"][0])
    if hidden.size:  # [[collider]] drawn = false: its faces leave the render (it still collides)
        keep = np.setdiff1d(np.arange(faces.shape[0]), hidden)
        faces, rgb = faces[keep], rgb[keep]
    colors = FaceColors(jnp.asarray(rgb))
    lights = ren.lights
    num_faces = int(faces.shape[0])
    tile_capacity = ren.tile_capacity if ren.tile_capacity is not None else max(num_faces, 1)
    pixel_capacity = ren.pixel_capacity if ren.pixel_capacity is not None else max(num_faces, 1)
    settings = RenderSettings(tile_capacity=tile_capacity, pixel_capacity=pixel_capacity, coverage=ren.coverage)
    return faces, colors, lights, settings
