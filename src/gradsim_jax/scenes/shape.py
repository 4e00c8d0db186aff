"""`demo shape` (issue 38): gradSim's `softras_vertex_optimization` / `dibr_vertex_optimization`. An icosphere
is deformed into a target shape made in code (a superquadric: a rounded box of unequal sides, no sphere)
from its silhouettes in 12 views; scored by the silhouette IoU on 4 views held out of the fit and by the
chamfer distance of the fitted surface to the true one. `--rasterizer` picks SoftRas or DIB-R."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.primitives import sphere_mesh, superquadric_mesh
from gradsim_jax.render.camera import look_at_camera
from gradsim_jax.render.rasterize import RenderSettings, render, suggest_capacities
from gradsim_jax.render.shading import FaceColors, default_lights
from gradsim_jax.sysid.renderer_fits.shape import ShapeExperiment
from gradsim_jax.sysid.renderer_fits.texture import stack_cameras

#: The target: semi-axes (m) and exponent of the superquadric (0.5: a rounded box)
TARGET_AXES = (1.0, 0.7, 0.8)
TARGET_EXPONENT = 0.5
#: Radius of the template icosphere (m): between the target's smallest and largest semi-axes
TEMPLATE_RADIUS = 0.8


def spiral_views(count: int = 12) -> tuple:
    """(elevation, azimuth) in degrees of `count` views spread evenly over the directions: a golden-angle
    spiral over a hemisphere (equal areas: sin(elevation) = (k + 1/2) / count), every other view moved to
    the opposite direction's mirror below (a silhouette seen from -d is the one from d mirrored, so no
    two views are opposite).

    Args:
        count: number of views.

    Returns:
        `count` (elevation, azimuth) pairs, degrees.
    """
    views = []
    for k in range(count):
        elevation = np.degrees(np.arcsin((k + 0.5) / count))
        azimuth = (137.50776405 * k) % 360.0
        views.append((elevation, azimuth) if k % 2 == 0 else (-elevation, (azimuth + 180.0) % 360.0))
    return tuple(views)


#: (elevation, azimuth) in degrees of the 12 fitted views and of the 4 held-out views (between them)
FIT_VIEWS = spiral_views(12)
HELD_OUT_VIEWS = ((60.0, 45.0), (-10.0, 135.0), (15.0, 255.0), (-55.0, 315.0))
RASTERIZERS = {"softras": RenderSettings(), "dibr": RenderSettings(coverage="dibr")}


def target_mesh(subdivisions: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The true shape's mesh (vertices [N, 3], faces [F, 3]): `TARGET_AXES`, `TARGET_EXPONENT`, on an icosphere
    of `subdivisions` (the demo's is one finer than its template, so the fit cannot copy its vertices).

    Args:
        subdivisions: subdivisions of the icosphere the superquadric is made from.

    Returns:
        (vertices [N, 3] m, faces [F, 3]).
    """
    return superquadric_mesh(TARGET_AXES, TARGET_EXPONENT, subdivisions)


def shape_experiment(size: int = 64, subdivisions: int = 3, *, rasterizer: str = "softras", distance: float = 4.0,
                     laplacian: float = 5.0, edge_length: float = 5.0) -> ShapeExperiment:
    """The template icosphere (`subdivisions`) seen from `FIT_VIEWS` (and `HELD_OUT_VIEWS`, held out) at
    `distance` m, `size` px, rendered by `rasterizer` ("softras" or "dibr").

    Args:
        size: pixels, the images' width and height.
        subdivisions: subdivisions of the template icosphere.
        rasterizer: "softras" or "dibr".
        distance: m, the cameras' distance from the origin.
        laplacian: weight of the Laplacian regularizer (per m^2, `ShapeExperiment`).
        edge_length: weight of the edge-length regularizer (per m^2, `ShapeExperiment`).

    Returns:
        The `ShapeExperiment`.

    Raises:
        ValueError: for an unknown rasterizer.
    """
    if rasterizer not in RASTERIZERS:
        raise ValueError(f"rasterizer must be one of {', '.join(RASTERIZERS)}, got {rasterizer!r}")
    vertices, faces = sphere_mesh(TEMPLATE_RADIUS, subdivisions, fit="vertices")

    def cams(views):
        return tuple(look_at_camera(distance, el, az, width=size, height=size, view_angle=20.0) for el, az in views)

    settings = dataclasses.replace(RASTERIZERS[rasterizer], tile_capacity=128, pixel_capacity=32)
    return ShapeExperiment(vertices, faces, cams(FIT_VIEWS), cams(HELD_OUT_VIEWS), settings=settings,
                           laplacian=laplacian, edge_length=edge_length, name=f"shape-{rasterizer}")


#: Colour of both meshes in the output videos (RGB); the fit sees silhouettes only
COLOR = (0.85, 0.55, 0.25)


def exact_settings(exp: ShapeExperiment, vertices, faces, cameras) -> RenderSettings:
    """The experiment's settings with tile and pixel capacities that drop no face of the mesh (`vertices`,
    `faces`) in any of `cameras` (host side: for rendering a target once, or scoring).

    Args:
        exp: the `ShapeExperiment` whose settings are the base.
        vertices: [N, 3] m, the mesh's vertices.
        faces: [F, 3] int, the mesh's triangles.
        cameras: the `Camera`s (one image size).

    Returns:
        The `RenderSettings`.
    """
    return suggest_capacities(cameras, np.asarray(vertices, np.float32), faces, settings=exp.settings)


def shaded_views(exp: ShapeExperiment, vertices, faces=None, cameras=None, settings=None) -> np.ndarray:
    """RGBA views [V, H, W, 4] of the mesh painted `COLOR` under SoftRas's default lights, for the videos.

    Args:
        exp: the `ShapeExperiment`.
        vertices: [N, 3] m, the mesh's vertices.
        faces: [F, 3] int, the mesh's triangles; None: the experiment's.
        cameras: the `Camera`s of the V views; None: the experiment's fitted views.
        settings: `RenderSettings`; None: the experiment's.

    Returns:
        [V, H, W, 4] numpy RGBA images in [0, 1].
    """
    import jax
    import jax.numpy as jnp

    cameras = exp.cameras if cameras is None else tuple(cameras)
    faces = jnp.asarray(exp.faces if faces is None else faces, jnp.int32)
    vertices = jnp.asarray(vertices, jnp.float32)
    colors = FaceColors(jnp.broadcast_to(jnp.asarray(COLOR, jnp.float32), (faces.shape[0], 3)))
    settings = exp.settings if settings is None else settings
    return np.asarray(jax.lax.map(lambda c: render(c, vertices, faces, colors, lights=default_lights(),
                                                   settings=settings), stack_cameras(cameras)))


def shapes_figure(path, columns: dict, titles: list):
    """A PNG grid: one row per entry of `columns` ({name: RGBA views [V, H, W, 4]}), one column per view.

    Args:
        path: where the PNG is written.
        columns: {row name: RGBA views [V, H, W, 4]}.
        titles: one title per view (column).

    Returns:
        The written file's `Path`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from gradsim_jax.sysid.outputs.plots import save_figure

    rows = len(columns)
    views = len(titles)
    fig = Figure(figsize=(2.0 * views, 2.1 * rows), dpi=100)
    FigureCanvasAgg(fig)
    for r, (name, images) in enumerate(columns.items()):
        for c in range(views):
            ax = fig.add_subplot(rows, views, r * views + c + 1)
            ax.imshow(np.clip(np.asarray(images[c])[..., :3], 0, 1), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name)
            if r == 0:
                ax.set_title(titles[c], fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def run_shape_demo(args) -> int:
    """`gradsim-jax demo shape`: render the superquadric's silhouettes from 12 cameras, deform the icosphere until
    its silhouettes match, report the IoU on the fitted and the 4 held-out views and the chamfer distance to
    the true surface; writes the outputs of `demo cloth` (the views as the videos' frames) and shape.png
    (target, initial and fitted, held-out views).

    Args:
        args: the parsed command line (argparse.Namespace): out, size, subdivisions, rasterizer, laplacian,
            edge_length, iterations, learning_rate, no_progress.

    Returns:
        The exit status, 0.
    """
    import time

    from gradsim_jax import sysid
    from gradsim_jax.sysid.renderer_fits.shape import (
        chamfer_distance, fit_shape, render_silhouettes, sample_surface, silhouette_iou
    )

    out = sysid.ensure_writable_folder(args.out)
    exp = shape_experiment(size=args.size, subdivisions=args.subdivisions, rasterizer=args.rasterizer,
                           laplacian=args.laplacian, edge_length=args.edge_length)
    started = time.perf_counter()
    print(f"demo shape ({args.rasterizer}): an icosphere of {len(exp.faces)} triangles to a superquadric from "
          f"{len(exp.cameras)} silhouettes of {args.size} px, {args.iterations} Adam iterations")
    true_v, true_f = target_mesh(args.subdivisions + 1)
    all_cameras = exp.cameras + exp.held_out
    truth_settings = exact_settings(exp, true_v, true_f, all_cameras)
    target = np.asarray(render_silhouettes(dataclasses.replace(exp, settings=truth_settings),
                                           true_v.astype(np.float32), all_cameras, faces=true_f))
    fitted_count = len(exp.cameras)
    result = fit_shape(exp, target[:fitted_count], iterations=args.iterations, learning_rate=args.learning_rate,
                       progress=not args.no_progress)
    fitted_v = exp.vertices + result.theta["offsets"]
    # Scored with capacities that drop no face of the fitted mesh either.
    fitted_settings = exact_settings(exp, fitted_v, exp.faces, all_cameras)
    scoring = dataclasses.replace(exp, settings=fitted_settings)
    initial_masks = np.asarray(render_silhouettes(scoring, exp.vertices.astype(np.float32), all_cameras))
    fitted_masks = np.asarray(render_silhouettes(scoring, fitted_v.astype(np.float32), all_cameras))
    iou = {"initial": silhouette_iou(initial_masks, target), "fitted": silhouette_iou(fitted_masks, target)}
    truth_points = sample_surface(true_v, true_f, 20000, seed=1)
    chamfer = {"initial": chamfer_distance(sample_surface(exp.vertices, exp.faces, 20000), truth_points),
               "fitted": chamfer_distance(sample_surface(fitted_v, exp.faces, 20000), truth_points)}
    split = {"fitted_views": slice(0, fitted_count), "held_out_views": slice(fitted_count, None)}
    scores = {k: {stage: float(np.mean(iou[stage][s])) for stage in iou} for k, s in split.items()}
    lowest = {k: float(np.min(iou["fitted"][s])) for k, s in split.items()}
    report = {"command": "demo shape", "experiment": exp.name, "rasterizer": args.rasterizer,
              "views": fitted_count, "held_out_views": len(exp.held_out), "image_size": [args.size, args.size],
              "frames": len(all_cameras), "template_triangles": int(len(exp.faces)),
              "target": {"shape": "superquadric", "semi_axes_m": list(TARGET_AXES), "exponent": TARGET_EXPONENT,
                         "triangles": int(len(true_f))},
              "regularization": {"laplacian": exp.laplacian, "edge_length": exp.edge_length},
              "silhouette_iou": scores, "lowest_view_iou": lowest,
              "silhouette_iou_per_view": {stage: [float(x) for x in v] for stage, v in iou.items()},
              "chamfer_m": chamfer, "target_size_m": float(2 * max(TARGET_AXES)),
              "iterations": {"adam": result.adam_iterations, "levenberg_marquardt": 0},
              "initial_loss": result.history["loss"][0] if result.history["loss"] else None,
              "final_loss": result.loss, "wall_time_s": result.wall_time, "versions": sysid.package_versions()}
    videos = {"target": shaded_views(exp, true_v, true_f, all_cameras, truth_settings),
              "initial": shaded_views(exp, exp.vertices, cameras=all_cameras, settings=fitted_settings),
              "fitted": shaded_views(exp, fitted_v, cameras=all_cameras, settings=fitted_settings)}
    paths = sysid.write_outputs(out, exp, target=videos["target"], initial_video=videos["initial"],
                                fitted_video=videos["fitted"], report=report, result=result, truth=None)
    held = [f"held out {k + 1}" for k in range(len(exp.held_out))]
    paths["shapes"] = str(shapes_figure(out / "shape.png", {k: v[fitted_count:] for k, v in videos.items()}, held))
    report["outputs"] = paths
    report["total_wall_time_s"] = time.perf_counter() - started
    sysid.write_report(paths["report"], report)
    print(f"  silhouette IoU on the {fitted_count} fitted views: {scores['fitted_views']['initial']:.3f} -> "
          f"{scores['fitted_views']['fitted']:.3f}; on the {len(exp.held_out)} held-out views: "
          f"{scores['held_out_views']['initial']:.3f} -> {scores['held_out_views']['fitted']:.3f} (goal > 0.97)")
    print(f"  chamfer distance to the true surface: {chamfer['initial']['mean']:.4f} -> "
          f"{chamfer['fitted']['mean']:.4f} m (the shape is {report['target_size_m']:.1f} m across)")
    print(sysid.outputs_line(out, report["total_wall_time_s"]))
    return 0
