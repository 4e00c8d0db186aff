"""`gradsim-jax demo rigid-shape`: gradSim's demo_mass_unknown_shape. A cube tumbles through the air; a model
that starts as a sphere of the same mass, thrown the same way, learns per-vertex offsets of its hull
(quantity "shape") until its silhouettes match the cube's (gradSim, Jatavallabhula et al., ICLR 2021).

Conventions: lengths in m; the cube and the sphere share mass, initial pose and velocities; both are
painted one colour and compared by silhouette (alpha) only, so the fit sees shape, never face colouring.
The model's centre of mass and inertia follow its hull as it changes (`quantities._expand_shape`); the
cube and the sphere both have isotropic inertia, so the tumbling is the same whichever the fit is at,
and the video shows the body from many sides. A Laplacian smoothness term (`FitConfig.smoothness`) keeps
the hull from crumpling where the silhouettes do not constrain it.

Reported besides `sysid.run`'s outputs: the silhouette IoU of initial and fitted videos against the target
(mean over frames), and the fitted hull's error against the cube: mean and largest distance of its
vertices to the cube's surface, and its volume over the cube's.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry import box_mesh, mass_properties, quat_from_axis_angle, rigid_body, sphere_mesh
from gradsim_jax.render import FaceColors
from gradsim_jax.scenes.demos import finish_experiment, fitted_settings
from gradsim_jax.sysid import Experiment, FitConfig, default_theta, simulate_vertices, vertices

#: Half side of the target cube (m) and circumradius of the template icosphere (m): the sphere's volume is
#: 0.67 of the cube's, so the fit has to both grow the body and push out its corners.
HALF_SIDE = 0.1
SPHERE_RADIUS = 0.107
SUBDIVISIONS = 2
MASS = 1.0
#: One colour for every face of both bodies (RGB).
COLOR = (0.85, 0.55, 0.25)
#: Defaults of the demo: about 85 s on two CPU cores. The smoothness weight (the loss's units per m^2)
#: trades silhouette fit against dents the silhouettes cannot see: IoU 0.992 / 0.987 / 0.979 and volume
#: 0.92 / 0.99 / 1.03 of the cube's at 20 / 50 / 100.
DEFAULT_SIZE, DEFAULT_FRAMES, DEFAULT_ITERATIONS = 64, 24, 100
DEFAULT_SMOOTHNESS = 50.0
DEFAULT_LEARNING_RATE = 0.004


#: Initial pose and velocities of both bodies: tilted, tossed up so that it comes back down to where it
#: started after 0.4 s (24 frames at 60 fps: the body stays large in the frame), spinning about a skew
#: axis by about half a turn, so that the video shows it from many sides.
THROW = dict(pos=(0.0, 0.5, 0.0), rot=tuple(quat_from_axis_angle((1.0, 0.3, 0.2), 0.5)), vel=(0.1, 1.96, 0.0),
             omega=(5.0, 7.0, 3.0))


def _body_experiment(name, verts, faces, *, size, frames, substeps, frame_dt, camera=None, x_extra=None):
    scene = rigid_body(verts, faces, mass=MASS, **THROW)
    topology, params, state0 = scene.build(rigid_contact="none")
    theta = default_theta(topology, params, state0, ["shape"])
    colors = FaceColors(jnp.broadcast_to(jnp.asarray(COLOR, jnp.float32), (faces.shape[0], 3)))
    exp = finish_experiment(name, topology, params, state0, theta, size=size, frames=frames, substeps=substeps,
                            frame_dt=frame_dt, colors=colors, elevation=15.0, azimuth=30.0)
    if camera is None:
        return exp
    x = np.concatenate([simulate_vertices(exp, theta), x_extra], axis=1)
    return dataclasses.replace(exp, camera=camera,
                               settings=fitted_settings(camera, x[:: max(1, len(x) // 12)], exp.faces))


def experiments(*, size: int = 64, frames: int = 24, substeps: int = 4, frame_dt: float = 1.0 / 60.0,
                subdivisions: int = SUBDIVISIONS) -> tuple[Experiment, Experiment]:
    """(target, model): the cube's experiment (camera framed on its motion) and the sphere template's,
    seen by the same camera, with theta {"shape": zeros [m, 3]}.

    Args:
        size: pixels, the image's width and height.
        frames: number of frames.
        substeps: simulation steps per frame.
        frame_dt: s, the time between frames.
        subdivisions: subdivisions of the sphere template's icosphere.

    Returns:
        (target, model) `Experiment`s.
    """
    kw = dict(size=size, frames=frames, substeps=substeps, frame_dt=frame_dt)
    target = _body_experiment("rigid_shape_cube", *box_mesh(HALF_SIDE, HALF_SIDE, HALF_SIDE), **kw)
    x_cube = np.asarray(vertices(target, target.theta))
    model = _body_experiment("rigid_shape", *sphere_mesh(SPHERE_RADIUS, subdivisions), camera=target.camera,
                             x_extra=x_cube, **kw)
    return target, model


def silhouette_iou(video, target, threshold: float = 0.5) -> float:
    """Mean over frames 1.. of the IoU of the silhouettes (alpha > threshold) of two videos [T, H, W, 4].

    Args:
        video: [T, H, W, 4] RGBA video.
        target: [T, H, W, 4] RGBA video to compare with.
        threshold: the alpha above which a pixel is in the silhouette.

    Returns:
        The mean IoU in [0, 1] (an empty union counts as 0).
    """
    a = np.asarray(video)[1:, ..., 3] > threshold
    b = np.asarray(target)[1:, ..., 3] > threshold
    inter = np.sum(a & b, axis=(1, 2))
    union = np.maximum(np.sum(a | b, axis=(1, 2)), 1)
    return float(np.mean(inter / union))


def box_surface_distance(points, half_extents) -> np.ndarray:
    """Unsigned distance (m) of points [n, 3] to the surface of the box of `half_extents` centred at 0.

    Args:
        points: [n, 3] m, the points.
        half_extents: [3] m, the box's half extents.

    Returns:
        [n] m, each point's distance to the box's surface (float64).
    """
    q = np.abs(np.asarray(points, np.float64)) - np.asarray(half_extents, np.float64)
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=-1)
    inside = np.minimum(np.max(q, axis=-1), 0.0)
    return np.abs(outside + inside)


def hull_error(model: Experiment, offsets) -> dict:
    """The hull template + offsets (body frame, where the cube sits centred on its centre of mass) against
    the cube: mean and largest vertex distance to its surface (m, and relative to its half side) and the
    volume ratio.

    Args:
        model: the sphere template's `Experiment` (`experiments`).
        offsets: [m, 3] m, per-vertex offsets of the hull (body frame).

    Returns:
        {"mean_vertex_distance_m", "max_vertex_distance_m", "mean_vertex_distance_rel", "volume_ratio"}.
    """
    verts = np.asarray(model.params.rigid.vertices, np.float64) + np.asarray(offsets, np.float64)
    faces = np.asarray(model.topology.rigid.faces)
    props = mass_properties(jnp.asarray(verts), faces, mass=MASS)
    dist = box_surface_distance(verts - np.asarray(props.com), (HALF_SIDE,) * 3)
    return {"mean_vertex_distance_m": float(np.mean(dist)), "max_vertex_distance_m": float(np.max(dist)),
            "mean_vertex_distance_rel": float(np.mean(dist) / HALF_SIDE),
            "volume_ratio": float(props.volume) / (2 * HALF_SIDE) ** 3}


def shape_metrics(model: Experiment, target_video, offsets_initial, offsets_fitted) -> dict:
    """IoU and hull error of the initial and fitted shapes (see `silhouette_iou`, `hull_error`).

    Args:
        model: the sphere template's `Experiment` (`experiments`).
        target_video: [T, H, W, 4] RGBA, the cube's video.
        offsets_initial: [m, 3] m, the initial hull offsets.
        offsets_fitted: [m, 3] m, the fitted hull offsets.

    Returns:
        {"initial": metrics, "fitted": metrics}, each {"silhouette_iou", and the `hull_error` entries}.
    """
    from gradsim_jax.sysid import simulate_video

    out = {}
    for key, offsets in (("initial", offsets_initial), ("fitted", offsets_fitted)):
        _, video_ = simulate_video(model, {"shape": jnp.asarray(offsets, model.dtype)})
        out[key] = {"silhouette_iou": silhouette_iou(video_, target_video), **hull_error(model, offsets)}
    return out


def metric_lines(metrics: dict) -> list[str]:
    """The printed lines of `shape_metrics`: IoU, hull distance (mm) and volume ratio, initial and fitted.

    Args:
        metrics: `shape_metrics`'s dict.

    Returns:
        Two lines of text (initial, fitted).
    """
    lines = []
    for key in ("initial", "fitted"):
        m = metrics[key]
        lines.append(f"  {key:<8} silhouette IoU {m['silhouette_iou']:.3f}, hull: mean distance to the cube "
                     f"{m['mean_vertex_distance_m'] * 1000:.2f} mm (max {m['max_vertex_distance_m'] * 1000:.2f} mm), "
                     f"volume ratio {m['volume_ratio']:.3f}")
    return lines


def run_demo(args) -> int:
    """`gradsim-jax demo rigid-shape`: fit the sphere's hull to the cube's video; write `sysid.run`'s
    outputs to args.out with "shape_metrics" in report.json. Returns the exit status.

    Args:
        args: the parsed command line (argparse.Namespace): out, size, frames, iterations, smoothness (None:
            the defaults), checkpoint_every, resume, resume_anyway, no_progress, force, seed.

    Returns:
        The exit status, 0.

    Raises:
        ValueError: when args.out is not a writable folder, or the run needs more memory than available
            without --force.
    """
    from gradsim_jax import sysid
    from gradsim_jax.physics import available_memory_bytes, estimate_cost
    from gradsim_jax.physics.cost import human_bytes

    try:
        sysid.ensure_writable_folder(args.out)
    except ValueError as e:
        raise ValueError(f"--out: {e}") from None
    started = time.perf_counter()
    pick = lambda value, default: default if value is None else value  # noqa: E731
    size, frames = pick(args.size, DEFAULT_SIZE), pick(args.frames, DEFAULT_FRAMES)
    iterations = pick(args.iterations, DEFAULT_ITERATIONS)
    smoothness = float(pick(args.smoothness, DEFAULT_SMOOTHNESS))
    print(f"demo rigid-shape: a sphere learns the shape of a tumbling cube ({size} px, {frames} frames, "
          f"smoothness {smoothness:g})")
    target_exp, model = experiments(size=size, frames=frames)
    config = FitConfig(free=("shape",), iterations=iterations, learning_rate=DEFAULT_LEARNING_RATE,
                       loss="silhouette", polish=0, report=False, smoothness=smoothness,
                       checkpoint_dir=str(Path(args.out) / "checkpoint"), checkpoint_every=args.checkpoint_every,
                       resume=args.resume, resume_anyway=args.resume_anyway, progress=not args.no_progress)
    est = estimate_cost(model.topology, model.frames, model.substeps,
                        render_size=(model.camera.height, model.camera.width),
                        tile_capacity=model.settings.tile_capacity, pixel_capacity=model.settings.pixel_capacity,
                        itemsize=np.dtype(model.dtype).itemsize, gradient=True, iterations=config.iterations,
                        frames_rendered=model.frames)
    available = available_memory_bytes()
    if available is not None and est.memory_bytes > available and not args.force:
        raise ValueError(f"this run would need about {human_bytes(est.memory_bytes)} of memory, more than the "
                         f"{human_bytes(available)} available ({est.text}); --force runs it anyway")
    _, target = sysid.simulate_video(target_exp, target_exp.theta)
    initial = {"shape": np.zeros(np.shape(model.theta["shape"]), np.float32)}
    # The truth is a cube, not an offset field: the hull metrics below take the place of relative errors.
    report = sysid.run(model, target, initial, config, args.out,
                       extra={"command": "demo rigid-shape", "seed": args.seed, "smoothness": smoothness,
                              "target_shape": {"box_half_extents_m": [HALF_SIDE] * 3},
                              "template": {"sphere_radius_m": SPHERE_RADIUS, "subdivisions": SUBDIVISIONS}})
    fitted = np.asarray(report["estimated"]["shape"])
    metrics = shape_metrics(model, target, initial["shape"], fitted)
    report["shape_metrics"] = metrics
    report["total_wall_time_s"] = time.perf_counter() - started
    for line in metric_lines(metrics):
        print(line)
    sysid.write_report(report["outputs"]["report"], report)
    print(f"total time {report['total_wall_time_s']:.1f} s")
    return 0
