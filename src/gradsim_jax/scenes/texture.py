"""`demo texture` (issue 38): gradSim's `softras_texture_optimization`. A textured mesh made in code (a
sphere with a bulge, uv per face corner, latitude-longitude) seen from 8 cameras; its 64 x 64 texture is
recovered from grey, and scored by PSNR on the 8 views and on 4 views held out of the fit."""

from __future__ import annotations

import numpy as np

from gradsim_jax.render.camera import look_at_camera
from gradsim_jax.render.colors import hsv_to_rgb
from gradsim_jax.render.rasterize import RenderSettings
from gradsim_jax.render.shading import default_lights
from gradsim_jax.sysid.renderer_fits.texture import TextureExperiment

#: The coverage models (`render.coverage_models`) the texture demo offers (`--rasterizer`).
RASTERIZERS = ("softras", "dibr")

#: (elevation, azimuth) in degrees of the fitted views and of the held-out ones
FIT_VIEWS = tuple((25.0 if k % 2 == 0 else -25.0, 45.0 * k) for k in range(8))
HELD_OUT_VIEWS = ((50.0, 22.5), (-40.0, 112.5), (10.0, 202.5), (35.0, 292.5))


def textured_blob(rings: int = 16, segments: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vertices [N, 3], faces [F, 3], uv [F, 3, 2]): a sphere of radius about 1 pushed out into a gentle
    four-lobed bulge around the equator (so that it is no sphere), `rings` x `segments` latitude-longitude
    quads; uv per face corner: u the longitude (0..1 round the y axis), v the latitude (0 south, 1 north),
    so the seam at u = 0 = 1 needs no duplicated vertices.

    Args:
        rings: latitude bands (at least 3).
        segments: longitude segments (at least 3).

    Returns:
        (vertices [N, 3] m, faces [F, 3] int32, uv [F, 3, 2] in [0, 1]).

    Raises:
        ValueError: for fewer than 3 rings or segments.
    """
    if rings < 3 or segments < 3:
        raise ValueError(f"textured_blob needs rings >= 3 and segments >= 3, got {rings}, {segments}")
    lat = np.linspace(0.0, np.pi, rings + 1)  # from the north pole
    lon = np.linspace(0.0, 2 * np.pi, segments + 1)
    index = {}
    vertices = []

    def vid(i, j):
        key = (0, 0) if i == 0 else (rings, 0) if i == rings else (i, j % segments)
        if key not in index:
            t, p = lat[key[0]], lon[key[1]]
            r = 1.0 + 0.15 * np.sin(t) ** 2 * np.cos(4 * p)
            index[key] = len(vertices)
            vertices.append([r * np.sin(t) * np.sin(p), r * np.cos(t), r * np.sin(t) * np.cos(p)])
        return index[key]

    faces, uv = [], []
    for i in range(rings):
        for j in range(segments):
            corners = [(i, j), (i + 1, j), (i + 1, j + 1), (i, j + 1)]
            for tri in ((0, 1, 2), (0, 2, 3)):
                c = [corners[k] for k in tri]
                ids = [vid(*k) for k in c]
                if len(set(ids)) < 3:
                    continue  # the degenerate half of a quad at a pole
                faces.append(ids)
                uv.append([[lon[b] / (2 * np.pi), 1.0 - lat[a] / np.pi] for a, b in c])
    return np.asarray(vertices), np.asarray(faces, np.int32), np.asarray(uv)


def true_texture(shape=(64, 64)) -> np.ndarray:
    """[Ht, Wt, 3] in [0, 1]: hue round the longitude, bands of brightness along the latitude and a checker
    of 8 x 8 texel squares: colour, contrast and sharp edges to recover.

    Args:
        shape: (Ht, Wt), texels of the texture's height and width.

    Returns:
        [Ht, Wt, 3] RGB in [0, 1].
    """
    ht, wt = shape
    v, u = (np.mgrid[0:ht, 0:wt] + 0.5) / np.asarray([ht, wt])[:, None, None]
    value = 0.55 + 0.35 * np.cos(6 * np.pi * v)
    checker = ((np.floor(u * wt / 8) + np.floor(v * ht / 8)) % 2)
    rgb = hsv_to_rgb(u, 0.8, value * (0.7 + 0.3 * checker))
    return np.clip(rgb, 0.0, 1.0)


def texture_experiment(size: int = 96, rings: int = 16, segments: int = 32, texture_shape=(64, 64), *,
                       distance: float = 4.0, rasterizer: str = "softras") -> TextureExperiment:
    """The blob seen from `FIT_VIEWS` (and `HELD_OUT_VIEWS`, held out) at `distance` m, `size` px, under
    SoftRas's default lights, on a black background, rendered by `rasterizer` ("softras" or "dibr": the
    `RenderSettings.coverage` model).

    Args:
        size: pixels, the images' width and height.
        rings: latitude bands of the blob (`textured_blob`).
        segments: longitude segments of the blob.
        texture_shape: (Ht, Wt), texels of the texture to recover.
        distance: m, the cameras' distance from the origin.
        rasterizer: "softras" or "dibr".

    Returns:
        The `TextureExperiment`.

    Raises:
        ValueError: for an unknown rasterizer.
    """
    if rasterizer not in RASTERIZERS:
        raise ValueError(f"rasterizer must be softras or dibr, got {rasterizer!r}")
    vertices, faces, uv = textured_blob(rings, segments)

    def cams(views):
        return tuple(look_at_camera(distance, el, az, width=size, height=size, view_angle=20.0) for el, az in views)

    return TextureExperiment(vertices, faces, uv, texture_shape, cams(FIT_VIEWS), cams(HELD_OUT_VIEWS),
                             lights=default_lights(), settings=RenderSettings(fill_back=False, coverage=rasterizer),
                             name="texture" if rasterizer == "softras" else f"texture-{rasterizer}")


def textures_figure(path, textures: dict):
    """A PNG of the named textures side by side.

    Args:
        path: where the PNG is written.
        textures: {name: [Ht, Wt, 3] RGB texture in [0, 1]}.

    Returns:
        The written file's `Path`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from gradsim_jax.sysid.outputs.plots import save_figure

    fig = Figure(figsize=(3 * len(textures), 3.3), dpi=100)
    FigureCanvasAgg(fig)
    for k, (name, image) in enumerate(textures.items()):
        ax = fig.add_subplot(1, len(textures), k + 1)
        ax.imshow(np.clip(np.asarray(image), 0, 1), interpolation="nearest")
        ax.set_title(name)
        ax.axis("off")
    fig.tight_layout()
    return save_figure(fig, path)


def run_texture_demo(args) -> int:
    """`gradsim-jax demo texture`: render the blob with its true texture from 8 cameras, recover the texture from
    grey, report PSNR on the 8 views and the 4 held-out ones; writes the outputs of `demo cloth` (the views as
    the videos' frames) and texture.png (true, initial, fitted).

    Args:
        args: the parsed command line (argparse.Namespace): out, size, texels, rasterizer (optional),
            iterations, learning_rate, no_progress.

    Returns:
        The exit status, 0.
    """
    import time

    from gradsim_jax import sysid
    from gradsim_jax.sysid.renderer_fits.texture import fit_texture, psnr, render_views

    out = sysid.ensure_writable_folder(args.out)
    exp = texture_experiment(size=args.size, texture_shape=(args.texels, args.texels),
                             rasterizer=getattr(args, "rasterizer", "softras"))
    started = time.perf_counter()
    print(f"demo texture ({exp.settings.coverage}): a {args.texels} x {args.texels} texture from {len(exp.cameras)} views of "
          f"{args.size} px ({len(exp.faces)} triangles), {args.iterations} Adam iterations")
    truth = true_texture(exp.texture_shape)
    grey = np.full_like(truth, 0.5)
    target = np.asarray(render_views(exp, truth.astype(np.float32)))
    held_target = np.asarray(render_views(exp, truth.astype(np.float32), exp.held_out))
    initial = np.asarray(render_views(exp, grey.astype(np.float32)))
    result = fit_texture(exp, target, grey, iterations=args.iterations, learning_rate=args.learning_rate,
                         progress=not args.no_progress)
    fitted_texture = result.theta["texture"]
    fitted = np.asarray(render_views(exp, fitted_texture))
    held_fitted = np.asarray(render_views(exp, fitted_texture, exp.held_out))
    held_initial = np.asarray(render_views(exp, grey.astype(np.float32), exp.held_out))
    scores = {"fitted_views": {"initial": psnr(initial, target), "fitted": psnr(fitted, target)},
              "held_out_views": {"initial": psnr(held_initial, held_target), "fitted": psnr(held_fitted, held_target)}}
    seen = np.abs(fitted_texture - 0.5).max(-1) > 1e-3
    report = {"command": "demo texture", "experiment": exp.name, "rasterizer": exp.settings.coverage,
              "views": len(exp.cameras),
              "held_out_views": len(exp.held_out), "image_size": [args.size, args.size],
              "frames": len(exp.cameras) + len(exp.held_out), "texture_shape": list(exp.texture_shape),
              "triangles": int(len(exp.faces)), "psnr_db": scores,
              "texture_rmse": float(np.sqrt(np.mean((fitted_texture - truth) ** 2))),
              "texels_changed_fraction": float(seen.mean()),
              "iterations": {"adam": result.adam_iterations, "levenberg_marquardt": 0},
              "initial_loss": result.history["loss"][0] if result.history["loss"] else None,
              "final_loss": result.loss, "wall_time_s": result.wall_time, "versions": sysid.package_versions()}
    videos = {"target": np.concatenate([target, held_target]), "initial": np.concatenate([initial, held_initial]),
              "fitted": np.concatenate([fitted, held_fitted])}
    paths = sysid.write_outputs(out, exp, target=videos["target"], initial_video=videos["initial"],
                                fitted_video=videos["fitted"], report=report, result=result, truth=None)
    paths["textures"] = str(textures_figure(out / "texture.png", {"true": truth, "initial": grey,
                                                                   "fitted": fitted_texture}))
    report["outputs"] = paths
    report["total_wall_time_s"] = time.perf_counter() - started
    sysid.write_report(paths["report"], report)
    print(f"  PSNR on the {len(exp.cameras)} fitted views: {scores['fitted_views']['initial']:.1f} -> "
          f"{scores['fitted_views']['fitted']:.1f} dB; on the {len(exp.held_out)} held-out views: "
          f"{scores['held_out_views']['initial']:.1f} -> {scores['held_out_views']['fitted']:.1f} dB (goal > 35)")
    print(sysid.outputs_line(out, report["total_wall_time_s"]))
    return 0
