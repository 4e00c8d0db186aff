"""The smoke demos' scenes (issue 38): a rising plume (`plume_experiment`, for `demo smoke-buoyancy`) and
gradSim's smoke2d set-up (`shape_experiment`, for `demo smoke-shape`: smoke filling the lower third of a box,
its initial velocity field to be found so that the smoke forms a picture), and the picture: a letter drawn
by matplotlib's own font outlines (`letter_mask`)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry.smoke import disc_mask
from gradsim_jax.physics.smoke import SmokeTopology, smoke_params, smoke_state
from gradsim_jax.sysid.smoke import SmokeExperiment

#: The plume's true quantities (`demo smoke-buoyancy`).
PLUME_TRUTH = {"smoke_buoyancy": 1.0, "inflow_rate": 2.0}


def plume_experiment(cells: int = 48, frames: int = 45, size: int = 64, *, buoyancy: float = 1.0,
                     inflow_rate: float = 2.0, dtype=jnp.float32) -> SmokeExperiment:
    """A plume rising in a closed 1 m box of `cells` x `cells` cells, fed by a disc of radius 0.08 m at
    (0.5, 0.12) m, filmed for `frames` frames at 30 fps (one solver step per frame) as a `size` px image;
    buoyancy (m/s^2 per unit density) and inflow_rate (density/s) are the truth.

    Args:
        cells: cells along each side of the 1 m box (at least 8).
        frames: number of frames (one solver step each).
        size: pixels, the image's width and height.
        buoyancy: m/s^2 per unit density, the smoke's buoyancy.
        inflow_rate: density/s, the rate the disc feeds smoke in.
        dtype: the float dtype of the solver's arrays.

    Returns:
        The `SmokeExperiment`.

    Raises:
        ValueError: for fewer than 8 cells.
    """
    if cells < 8:
        raise ValueError(f"the plume needs at least 8 cells a side, got {cells}")
    top = SmokeTopology((cells, cells), spacing=1.0 / cells, walls="closed", tolerance=1e-5)
    mask = disc_mask(top.shape, (0.5, 0.12), 0.08)
    params = smoke_params(top, buoyancy=buoyancy, inflow_rate=inflow_rate, inflow_mask=mask, dtype=dtype)
    return SmokeExperiment(top, params, smoke_state(top, dtype=dtype), frames=frames, frame_dt=1.0 / 30.0,
                           size=(size, size), colormap="smoke", scale=0.5, name="smoke-buoyancy")


def letter_mask(letter: str, shape, *, height: float = 0.6, centre=(0.5, 0.55)) -> np.ndarray:
    """[ny, nx] 1.0 in the cells (y up) whose centres lie inside `letter` drawn in DejaVu Sans Bold, `height`
    (fraction of the box) tall, centred at `centre` (fractions of width and height); holes stay empty
    (even-odd rule over the glyph's outlines).

    Args:
        letter: the text to draw (visible characters).
        shape: (ny, nx), the grid's cells.
        height: the text's height as a fraction of the box's.
        centre: (x, y) of the text's centre, as fractions of the box's width and height.

    Returns:
        [ny, nx] float64 mask of 0.0 and 1.0, row 0 at the bottom.

    Raises:
        ValueError: for text without visible characters or without an outline in the font.
    """
    from matplotlib.font_manager import FontProperties
    from matplotlib.path import Path
    from matplotlib.textpath import TextPath

    if not (isinstance(letter, str) and len(letter) >= 1 and letter.strip()):
        raise ValueError(f"the target text must be visible characters, got {letter!r}")
    path = TextPath((0, 0), letter, size=1.0, prop=FontProperties(family="DejaVu Sans", weight="bold"))
    polygons = path.to_polygons()
    if not polygons:
        raise ValueError(f"the text {letter!r} has no outline in DejaVu Sans Bold")
    points = np.concatenate(polygons)
    lo, hi = points.min(0), points.max(0)
    ny, nx = shape
    scale = height * ny / max(hi[1] - lo[1], 1e-9)  # cells per font unit
    y, x = np.mgrid[0:ny, 0:nx] + 0.5
    fx = (x - centre[0] * nx) / scale + (lo[0] + hi[0]) / 2
    fy = (y - centre[1] * ny) / scale + (lo[1] + hi[1]) / 2
    query = np.stack([fx.ravel(), fy.ravel()], -1)
    inside = np.zeros(len(query), bool)
    for polygon in polygons:
        inside ^= Path(polygon).contains_points(query)
    return inside.reshape(shape).astype(np.float64)


def shape_experiment(cells: int = 110, frames: int = 100, size=None, *, fill: float = 1.0 / 3.0,
                     dtype=jnp.float32) -> SmokeExperiment:
    """gradSim's smoke2d set-up: a closed box of `cells` x `cells` unit cells, smoke of density 1 filling the
    lower `fill` of it, at rest, no buoyancy; `frames` steps of dt = 1 (a frame each), rendered as a
    `size` px image (default one pixel per cell). The initial velocity ("smoke_velocity") is what a fit finds.

    Args:
        cells: cells along each side of the box (at least 8).
        frames: number of frames (one solver step of dt = 1 each).
        size: pixels, the image's width and height; None: `cells`.
        fill: fraction in (0, 1] of the box's height the smoke fills at the start.
        dtype: the float dtype of the solver's arrays.

    Returns:
        The `SmokeExperiment`.

    Raises:
        ValueError: for fewer than 8 cells or a fill outside (0, 1].
    """
    if cells < 8:
        raise ValueError(f"the box needs at least 8 cells a side, got {cells}")
    if not 0.0 < fill <= 1.0:
        raise ValueError(f"fill must be in (0, 1], got {fill}")
    top = SmokeTopology((cells, cells), spacing=1.0, walls="closed", tolerance=1e-4)
    density = np.zeros(top.shape)
    density[: max(1, int(round(fill * cells)))] = 1.0
    size = (cells, cells) if size is None else (int(size), int(size))
    return SmokeExperiment(top, smoke_params(top, buoyancy=0.0, dtype=dtype),
                           smoke_state(top, density=density, dtype=dtype), frames=frames, frame_dt=1.0,
                           size=size, colormap="smoke", scale=0.5, name="smoke-shape")


def _relative(estimate, truth) -> float:
    return abs(float(estimate) - float(truth)) / abs(float(truth))


def run_buoyancy_demo(args) -> int:
    """`gradsim-jax demo smoke-buoyancy`: render the plume with `PLUME_TRUTH`, fit buoyancy and inflow rate
    (or --estimate's quantities) from a start --offset off, write the outputs `demo cloth` writes.

    Args:
        args: the parsed command line (argparse.Namespace): out, estimate, cells, frames, size, offset,
            iterations, learning_rate, polish, frame_stride, no_progress.

    Returns:
        The exit status, 0.

    Raises:
        ValueError: for --estimate naming no or unknown quantities.
    """
    import time

    from gradsim_jax import sysid
    from gradsim_jax.sysid.smoke import SMOKE_QUANTITIES, fit_smoke, simulate_smoke_video, smoke_report

    out = sysid.ensure_writable_folder(args.out)
    free = [n.strip() for n in args.estimate.split(",") if n.strip()]
    unknown = [n for n in free if n not in PLUME_TRUTH]
    if unknown or not free:
        raise ValueError(f"--estimate: choose from {', '.join(PLUME_TRUTH)}, got {args.estimate!r}")
    exp = plume_experiment(cells=args.cells, frames=args.frames, size=args.size)
    started = time.perf_counter()
    truth = {k: float(v) for k, v in PLUME_TRUTH.items()}
    sign = {"smoke_buoyancy": 1.0, "inflow_rate": -1.0}  # one too strong, the other too weak
    initial = {k: truth[k] * (1.0 + sign[k] * args.offset) if k in free else truth[k] for k in truth}
    print(f"demo smoke-buoyancy: estimating {', '.join(free)} of a plume ({args.cells} x {args.cells} cells, "
          f"{args.frames} frames, {args.size} px), from {args.offset:.0%} off")
    _, target = simulate_smoke_video(exp, truth)
    _, initial_video = simulate_smoke_video(exp, initial)
    result = fit_smoke(exp, target, initial, free, iterations=args.iterations, learning_rate=args.learning_rate,
                       polish=args.polish, frame_stride=args.frame_stride, progress=not args.no_progress)
    _, fitted_video = simulate_smoke_video(exp, {k: result.theta[k] for k in truth})
    report = smoke_report(exp, free, truth, initial, result)
    report.update({"command": "demo smoke-buoyancy", "offset": args.offset, "goal_relative_error": 1e-3,
                   "meets_goal": all(r["relative_error"] < 1e-3 for r in report["quantities"].values()),
                   "versions": sysid.package_versions()})
    paths = sysid.write_outputs(out, exp, target=target, initial_video=initial_video, fitted_video=fitted_video,
                                report=report, result=result, truth=truth)
    report["outputs"] = paths
    report["total_wall_time_s"] = time.perf_counter() - started
    sysid.write_report(paths["report"], report)
    for name, row in report["quantities"].items():
        print(f"  {name:15s} true {row['true']:.6g}  initial {row['initial']:.6g}  estimated "
              f"{row['estimated']:.6g}  relative error {row['relative_error']:.2e}  [{SMOKE_QUANTITIES[name][2]}]")
    for line in sysid.convergence_lines(result.convergence):
        print(line)
    print(sysid.outputs_line(out, report["total_wall_time_s"]))
    return 0


def frames_figure(path, rows: dict, frames, labels=None):
    """A PNG of videos side by side: one row per entry of `rows` ({label: [T, H, W, 4] RGBA}), the frames
    `frames` in columns (each composited over black).

    Args:
        path: where the PNG is written.
        rows: {label: [T, H, W, 4] RGBA video}.
        frames: the frame indices shown (clipped to each video's length).
        labels: {frame index: column title}; None or missing: "frame k".

    Returns:
        The written file's `Path`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from gradsim_jax.sysid.outputs.plots import save_figure

    frames = list(frames)
    fig = Figure(figsize=(1.8 * len(frames) + 0.6, 1.9 * len(rows)), dpi=100)
    FigureCanvasAgg(fig)
    for r, (label, video) in enumerate(rows.items()):
        for c, k in enumerate(frames):
            ax = fig.add_subplot(len(rows), len(frames), r * len(frames) + c + 1)
            k = min(k, len(video) - 1)
            ax.imshow(np.clip(np.asarray(video[k])[..., :3], 0, 1), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title((labels or {}).get(k, f"frame {k}"), fontsize=9)
            if c == 0:
                ax.set_ylabel(label, fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def run_shape_demo(args) -> int:
    """`gradsim-jax demo smoke-shape`: gradSim's smoke2d. The initial velocity field of smoke filling the lower
    third of a box is optimized (Adam) until the smoke at the last frame forms the target picture (--text drawn
    in code, or --target IMAGE: a picture of your own, its brightness taken as the smoke's opacity); writes the
    outputs `demo cloth` writes, target.png and frames.png.

    Args:
        args: the parsed command line (argparse.Namespace): out, cells, frames, text, target, iterations,
            learning_rate, smoothness, no_progress.

    Returns:
        The exit status, 0.
    """
    import time

    from gradsim_jax import sysid
    from gradsim_jax.render.video import write_png
    from gradsim_jax.sysid.smoke import fit_smoke, simulate_smoke_video, smoke_report

    out = sysid.ensure_writable_folder(args.out)
    exp = shape_experiment(cells=args.cells, frames=args.frames)
    picture, mask = target_picture(exp, args.text, getattr(args, "target", None))
    started = time.perf_counter()
    print(f"demo smoke-shape: the initial velocity that turns smoke into {args.target or repr(args.text)} "
          f"({args.cells} x {args.cells} cells, {args.frames} steps, {args.iterations} Adam iterations)")
    density0, initial_video = simulate_smoke_video(exp, {})
    result = fit_smoke(exp, picture, {}, ["smoke_velocity"], iterations=args.iterations,
                       learning_rate=args.learning_rate, polish=0, compare="last", smoothness=args.smoothness,
                       progress=not args.no_progress)
    density, fitted_video = simulate_smoke_video(exp, {"smoke_velocity": result.theta["smoke_velocity"]})
    target_video = np.repeat(picture[None], exp.frames + 1, axis=0)
    report = smoke_report(exp, ["smoke_velocity"], None, {}, result)
    iou = {name: _iou(d[-1], mask, exp.scale) for name, d in (("initial", density0), ("fitted", density))}
    report.update({"command": "demo smoke-shape", "text": args.text, "target": args.target,
                   "silhouette_iou": iou, "smoothness": args.smoothness,
                   "smoke_amount": {"initial": float(density0[0].sum()), "final": float(density[-1].sum())},
                   "versions": sysid.package_versions()})
    paths = sysid.write_outputs(out, exp, target=target_video, initial_video=initial_video,
                                fitted_video=fitted_video, report=report, result=result, truth=None)
    paths["target_picture"] = str(write_png(out / "target.png", picture))
    picks = np.linspace(0, exp.frames, 5).round().astype(int)
    paths["frames"] = str(frames_figure(out / "frames.png", {"initial": initial_video, "fitted": fitted_video,
                                                              "target": target_video}, picks))
    report["outputs"] = paths
    report["total_wall_time_s"] = time.perf_counter() - started
    sysid.write_report(paths["report"], report)
    print(f"  image loss at the last frame: {report['initial_loss']:.4g} -> {report['final_loss']:.4g}; "
          f"overlap (IoU) with the picture {iou['initial']:.3f} -> {iou['fitted']:.3f}")
    print(sysid.outputs_line(out, report["total_wall_time_s"]))
    return 0


def _iou(density, mask, scale) -> float:
    """Intersection over union of the smoke (opacity > 1/2: density > scale ln 2) and the picture's mask."""
    smoke = np.asarray(density) > scale * np.log(2.0)
    union = np.logical_or(smoke, mask > 0.5).sum()
    return float(np.logical_and(smoke, mask > 0.5).sum() / union) if union else 1.0


def target_picture(exp: SmokeExperiment, text: str, path=None) -> tuple[np.ndarray, np.ndarray]:
    """(the target RGBA picture [H, W, 4], its smoke mask [ny, nx] of 0..1): `text` drawn in the box
    (`letter_mask`, density 1 like the smoke), or the picture at `path` (any image imageio reads, alpha or
    not): its brightness resampled to the grid is the mask, rendered as smoke of that opacity.

    Args:
        exp: the `SmokeExperiment` (grid shape, renderer, scale).
        text: the text drawn when `path` is None.
        path: an image file to aim at; None: draw `text`.

    Returns:
        (RGBA picture [H, W, 4] in [0, 1], mask [ny, nx] in [0, 1], row 0 at the bottom).

    Raises:
        ValueError: for an unreadable, malformed or all-black picture (and `letter_mask`'s errors).
    """
    from gradsim_jax.sysid.smoke import render_density

    if path is None:
        mask = letter_mask(text, exp.topology.shape)
    else:
        import imageio.v3 as iio

        try:
            image = np.asarray(iio.imread(path), np.float64)
        except (OSError, ValueError) as e:
            raise ValueError(f"--target {path}: cannot read it as an image ({e})") from None
        if image.ndim == 4:
            image = image[0]  # the first frame of an animation
        if image.ndim == 2:
            image = image[..., None]
        if image.ndim != 3 or image.shape[-1] not in (1, 2, 3, 4) or min(image.shape[:2]) < 2:
            raise ValueError(f"--target {path}: expected a picture [H, W] or [H, W, channels], got {image.shape}")
        image = image / (255.0 if image.max() > 1.0 else 1.0)
        grey = image[..., :3].mean(-1) if image.shape[-1] >= 3 else image[..., 0]
        if image.shape[-1] in (2, 4):
            grey = grey * image[..., -1]
        ny, nx = exp.topology.shape
        rows = np.clip(((np.arange(ny) + 0.5) / ny * grey.shape[0]).astype(int), 0, grey.shape[0] - 1)
        cols = np.clip(((np.arange(nx) + 0.5) / nx * grey.shape[1]).astype(int), 0, grey.shape[1] - 1)
        mask = np.clip(grey[rows][:, cols][::-1], 0.0, 1.0)  # image rows top-down, grid rows y up
        if mask.max() <= 0.0:
            raise ValueError(f"--target {path}: the picture is black everywhere: no smoke to aim at")
    density = np.where(mask >= 1.0, 1.0, -exp.scale * np.log1p(-np.minimum(mask, 0.999)))
    return np.asarray(render_density(exp, jnp.asarray(density, exp.dtype))), mask
