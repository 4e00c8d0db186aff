"""Embedded scenes of the system-identification demos (`gradsim-jax demo cloth`, `demo cloth-control`).

Each builder returns a `gradsim_jax.sysid.Experiment` whose `theta` holds the true quantities:
- `hanging_cloth`: a square cloth pinned along one edge, released horizontally, swings down under gravity
  while a known push acts on its free edge during the first frames (the mass-independent force that lets
  mass be separated from stiffness and damping). Used for mass, stiffness, damping, bending, drag, lift.
- `sliding_cloth`: a cloth dropped just above the ground with a known sideways velocity; it lands and
  slides to rest, so friction decides how far it goes.
- `tossed_cloth`: gradSim's cloth demo setting: a free cloth thrown with a smooth, spinning initial
  velocity field; every particle's initial velocity is estimated.

Render setup shared by all: per-face colours (a hue gradient times a checkerboard, so that motion inside
the silhouette is visible), an oblique directional light (so that bending and out-of-plane motion change
the shading), a camera framed on the true motion.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry import cloth_grid, quat_from_axis_angle
from gradsim_jax.render import FaceColors, Lights, RenderSettings, look_at_camera, project, suggest_capacities
from gradsim_jax.render.colors import checker_colors
from gradsim_jax.render.mesh import scene_faces, scene_vertices
from gradsim_jax.sysid import Experiment, default_theta, simulate_vertices

DEFAULT_LIGHT_DIRECTION = (0.4, 1.0, -0.6)


def default_lights() -> Lights:
    return Lights(ambient=jnp.asarray(0.45, jnp.float32), directional=jnp.asarray(0.6, jnp.float32),
                  direction=jnp.asarray(DEFAULT_LIGHT_DIRECTION, jnp.float32))


def framed_camera(points, size: int, *, elevation: float = 20.0, azimuth: float = 25.0, fill: float = 0.9,
                  view_angle: float = 30.0):
    """A look-at camera on the center of `points [..., 3]` (e.g. a whole trajectory), moved so that the
    projected points span `fill` of the image along their wider screen axis.

    Args:
        points: [..., 3] m, the points to frame (e.g. every vertex of every frame).
        size: pixels, the image's width and height.
        elevation: degrees, the camera's elevation (SoftRas's angle, `look_at_camera`).
        azimuth: degrees, the camera's azimuth (0 with elevation 0: the eye on -z looking along +z).
        fill: fraction of the image (0..1] the projected points span along their wider screen axis.
        view_angle: degrees, the half-angle of the vertical field of view.

    Returns:
        The look-at `Camera` (near and far planes set around the points).
    """
    pts = np.asarray(points, np.float64).reshape(-1, 3)
    center = 0.5 * (pts.min(0) + pts.max(0))
    radius = float(np.max(np.linalg.norm(pts - center, axis=1))) + 1e-6
    distance = radius / np.sin(np.deg2rad(view_angle))
    for _ in range(4):
        cam = look_at_camera(distance, elevation, azimuth, at=tuple(center), width=size, height=size,
                             view_angle=view_angle, near=1e-4)
        screen = np.asarray(project(cam, jnp.asarray(pts, jnp.float32))[0])
        extent = float(np.max(np.abs(screen - 0.5 * (screen.min(0) + screen.max(0)))))
        offset = float(np.max(np.abs(0.5 * (screen.min(0) + screen.max(0)))))
        distance *= (extent + offset) / fill
        distance = max(distance, 1.5 * radius)
    return look_at_camera(distance, elevation, azimuth, at=tuple(center), width=size, height=size,
                          view_angle=view_angle, near=max(0.05, 0.2 * (distance - radius)), far=10.0 * distance)


def fitted_settings(camera, frames, faces, *, sigma_scale: float = 1.0, multiple: int = 8,
                    gamma: float | None = None) -> RenderSettings:
    """Render settings whose tile and pixel capacities hold every face the frames `[T, n, 3]` need, with
    room for the motion of perturbed parameters (x 2, at most the number of faces).

    Args:
        camera: the `Camera` the frames are seen by.
        frames: [T, n, 3] m, example vertex positions (e.g. a subsample of the true motion).
        faces: [F, 3] int, the rendered triangles (vertex indices).
        sigma_scale: factor on the renderer's default sigma (edge softness) for the camera's height.
        multiple: the capacities are rounded up to a multiple of this.
        gamma: the depth softmax's temperature; None: the renderer's default.

    Returns:
        The `RenderSettings`.
    """
    num_faces = int(np.shape(faces)[0])
    base = RenderSettings(sigma=RenderSettings().sigma_for(camera.height) * sigma_scale)
    if gamma is not None:
        base = dataclasses.replace(base, gamma=gamma)
    needed = suggest_capacities(camera, np.asarray(frames), faces, settings=base, multiple=multiple)

    def room(capacity):
        return max(1, min(num_faces, 2 * capacity))

    return dataclasses.replace(needed, tile_capacity=room(needed.tile_capacity),
                               pixel_capacity=room(needed.pixel_capacity))


def finish_experiment(name, topology, params, state0, theta, *, size, frames, substeps, frame_dt, push_frames=0,
                      elevation=20.0, azimuth=25.0, colors=None, lights=None, background=(0.0, 0.0, 0.0),
                      gamma=None):
    """Frame a camera on the true motion and fix colors and render settings: the finished Experiment.

    Args:
        name: the experiment's name (also in the error message of an unstable scene).
        topology: the built scene's `Topology` (`Scene.build`).
        params: the built scene's `Params`.
        state0: the built scene's initial `State`.
        theta: dict, the true quantities (`default_theta`), with "push" [n, 3] N.
        size: pixels, the image's width and height.
        frames: number of frames rendered.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        push_frames: number of leading frames during which theta["push"] acts.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.
        colors: FaceColors/VertexColors; None: per-face checker colours over the initial vertices.
        lights: `Lights`; None: `default_lights()`.
        background: RGB [3] in [0, 1], the background colour.
        gamma: the depth softmax's temperature, None: the renderer's default.

    Returns:
        The `Experiment`, its camera framed on the true motion and its render settings sized for it.

    Raises:
        FloatingPointError: when the true motion is not finite (an unstable scene).
    """
    faces = jnp.asarray(scene_faces(topology))
    if colors is None:
        colors = FaceColors(jnp.asarray(checker_colors(faces, scene_vertices(topology, params, state0))))
    lights = default_lights() if lights is None else lights
    probe_camera = look_at_camera(3.0, elevation, azimuth, width=size, height=size)
    exp = Experiment(topology=topology, params=params, state0=state0, camera=probe_camera, faces=faces,
                     colors=colors, lights=lights, background=jnp.asarray(background, jnp.float32),
                     settings=RenderSettings() if gamma is None else RenderSettings(gamma=gamma), frames=frames,
                     substeps=substeps, frame_dt=frame_dt, theta=theta,
                     push_frames=push_frames, name=name)
    x = simulate_vertices(exp, theta)
    if not np.all(np.isfinite(x)):
        raise FloatingPointError(f"the {name} scene is unstable with these parameters (more substeps?)")
    return reframe(exp, x, elevation=elevation, azimuth=azimuth)


def reframe(exp: Experiment, x, *, elevation: float, azimuth: float) -> Experiment:
    """The experiment with its camera pointed at all render vertices `x [T, V, 3]` from `elevation` and
    `azimuth` (degrees) and its render settings sized for them.

    Args:
        exp: the `Experiment` (its camera's height is the image size kept).
        x: [T, V, 3] m, the render vertices of every frame to frame.
        elevation: degrees, the camera's elevation.
        azimuth: degrees, the camera's azimuth.

    Returns:
        The `Experiment` with the new camera and render settings.
    """
    x = np.asarray(x)
    camera = framed_camera(x, exp.camera.height, elevation=elevation, azimuth=azimuth)
    settings = fitted_settings(camera, x[:: max(1, len(x) // 12)], exp.faces, gamma=exp.settings.gamma)
    return dataclasses.replace(exp, camera=camera, settings=settings)


def hanging_cloth(*, size: int = 64, frames: int = 30, cells: int = 5, substeps: int = 32,
                  frame_dt: float = 1.0 / 30.0, side: float = 0.6, mass: float = 0.02, tri_ke: float = 200.0,
                  tri_ka: float = 200.0, tri_kd: float = 0.3, bend_ke: float = 0.0, drag: float = 0.0,
                  lift: float = 0.0, push: float = 0.5, push_frames: int = 6) -> Experiment:
    """A cloth `side` m square of cells x cells, pinned along its left edge, released horizontally.

    Aerodynamics is on when drag or lift is nonzero.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        cells: cells along each side of the cloth grid.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        side: m, the cloth's side length.
        mass: kg per particle.
        tri_ke: N/m, the membrane's stiffness k_mu (`physics.cloth.ClothParams`).
        tri_ka: the membrane's area stiffness k_lambda (same unit as tri_ke).
        tri_kd: the membrane's damping k_damp.
        bend_ke: N m/rad, the bending stiffness; 0: none.
        drag: the triangles' aerodynamic drag coefficient (`physics.cloth`).
        lift: the triangles' aerodynamic lift coefficient (`physics.cloth`).
        push: N upward (and 0.6 of it sideways) on each particle of the free (right) edge (known).
        push_frames: number of leading frames during which the push acts.

    Returns:
        The `Experiment`; its theta holds mass, stiffness, damping, bending, drag, lift and push.
    """
    cell = side / cells
    scene = cloth_grid(cells, cells, cell, cell, pos=(-side / 2, 0.0, -side / 2),
                       rot=quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2), mass=mass, fix_left=True,
                       tri_ke=tri_ke, tri_ka=tri_ka, tri_kd=tri_kd, bend_ke=bend_ke, tri_drag=drag, tri_lift=lift)
    topology, params, state0 = scene.build(aerodynamics=bool(drag or lift))
    theta = default_theta(topology, params, state0, ["mass", "stiffness", "damping", "bending", "drag", "lift"])
    right = np.arange(scene.num_particles) % (cells + 1) == cells
    force = np.zeros((scene.num_particles, 3), np.float32)
    force[right] = (0.0, push, push * 0.6)
    theta["push"] = jnp.asarray(force)
    return finish_experiment("hanging_cloth", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, push_frames=push_frames if push else 0,
                             elevation=30.0, azimuth=35.0)


def sliding_cloth(*, size: int = 64, frames: int = 30, cells: int = 4, substeps: int = 16,
                  frame_dt: float = 1.0 / 60.0, side: float = 0.4, mass: float = 0.01, contact_mu: float = 0.4,
                  speed: float = 2.0) -> Experiment:
    """A cloth dropped 2 cm above the ground moving sideways at `speed` m/s; friction `contact_mu`.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        cells: cells along each side of the cloth grid.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        side: m, the cloth's side length.
        mass: kg per particle.
        contact_mu: the ground's Coulomb friction coefficient (dimensionless).
        speed: m/s, the initial velocity along +x.

    Returns:
        The `Experiment`; its theta holds mass, friction and push.
    """
    cell = side / cells
    scene = cloth_grid(cells, cells, cell, cell, pos=(-side, 0.03, -side / 2),
                       rot=quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2), vel=(speed, 0.0, 0.0), mass=mass,
                       tri_ke=200.0, tri_ka=200.0, tri_kd=0.5, bend_ke=0.0)
    topology, params, state0 = scene.build(ground=True, contact_mu=contact_mu, contact_ke=1.0e3, contact_kd=10.0,
                                           contact_kf=100.0)
    theta = default_theta(topology, params, state0, ["mass", "friction"])
    return finish_experiment("sliding_cloth", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, elevation=35.0, azimuth=20.0)


def tossed_velocity(x, *, base=(0.8, 1.6, 0.4), spin: float = 2.0) -> np.ndarray:
    """A smooth initial velocity field [n, 3] m/s: translation + spin about the z axis + a z bulge.

    Args:
        x: [n, 3] m, particle positions.
        base: [3] m/s, the translation velocity.
        spin: rad/s, the angular velocity about the z axis through the particles' mean.

    Returns:
        [n, 3] float32 m/s, the velocity of each particle.
    """
    x = np.asarray(x, np.float64)
    r = x - x.mean(0)
    v = np.asarray(base, np.float64) + spin * np.stack([-r[:, 1], r[:, 0], np.zeros(len(r))], 1)
    v[:, 2] += 1.5 * (r[:, 0] ** 2 + r[:, 1] ** 2)
    return v.astype(np.float32)


#: Where the tossed cloth's camera looks from (degrees); `control_cloth` reframes it from there too.
_TOSSED_VIEW = {"elevation": 10.0, "azimuth": 20.0}


def tossed_cloth(*, size: int = 64, frames: int = 20, cells: int = 3, substeps: int = 16,
                 frame_dt: float = 1.0 / 60.0, side: float = 0.5, mass: float = 0.01, tri_ke: float = 5.0,
                 tri_ka: float = 5.0, tri_kd: float = 0.02, velocity=None) -> Experiment:
    """gradSim's cloth demo setting: a free cloth facing the camera, thrown with a spinning velocity field.

    The membrane is soft on purpose: a stiff one turns differences between neighbouring particles'
    in-plane velocities into fast, quickly damped oscillations a few pixels cannot show, so only their
    average would be recoverable; a soft one lets each particle carry its own velocity for many frames.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        cells: cells along each side of the cloth grid.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        side: m, the cloth's side length.
        mass: kg per particle.
        tri_ke: N/m, the membrane's stiffness k_mu (`physics.cloth.ClothParams`).
        tri_ka: the membrane's area stiffness k_lambda (same unit as tri_ke).
        tri_kd: the membrane's damping k_damp.
        velocity: m/s, the initial velocity ([3] for every particle, or [n, 3]); None: `tossed_velocity`.

    Returns:
        The `Experiment`; its theta holds velocity [n, 3] m/s, mass, stiffness, damping and push.
    """
    cell = side / cells
    scene = cloth_grid(cells, cells, cell, cell, pos=(-side / 2, -side / 2, 0.0), mass=mass, tri_ke=tri_ke,
                       tri_ka=tri_ka, tri_kd=tri_kd, bend_ke=0.0)
    topology, params, state0 = scene.build()
    v = tossed_velocity(scene.x) if velocity is None else np.broadcast_to(np.asarray(velocity, np.float32),
                                                                         scene.x.shape)
    theta = default_theta(topology, params, state0, ["velocity", "mass", "stiffness", "damping"])
    theta["velocity"] = jnp.asarray(v)
    return finish_experiment("tossed_cloth", topology, params, state0, theta, size=size, frames=frames,
                             substeps=substeps, frame_dt=frame_dt, **_TOSSED_VIEW)


def control_cloth(v_true, v_guess, *, size: int = 48, frames: int = 30, **kw) -> Experiment:
    """gradSim's control_cloth setting: the tossed cloth thrown with one velocity `v_true` [3] (its theta),
    the camera framed on where both `v_true` and the starting guess `v_guess` take it.

    Args:
        v_true: [3] m/s, the true initial velocity of every particle.
        v_guess: [3] m/s, the starting guess of the control fit.
        size: pixels, the image's width and height.
        frames: number of frames.
        **kw: further keyword arguments of `tossed_cloth`.

    Returns:
        The `Experiment`.
    """
    exp = tossed_cloth(size=size, frames=frames, velocity=v_true, **kw)
    shape = np.shape(exp.state0.particles.x)
    runs = [simulate_vertices(exp, dict(exp.theta, velocity=jnp.broadcast_to(jnp.asarray(v, jnp.float32), shape)))
            for v in (v_true, v_guess)]
    return reframe(exp, np.concatenate(runs), **_TOSSED_VIEW)
