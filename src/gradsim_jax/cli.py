"""`gradsim-jax`: recover physical parameters of a cloth from video.

    gradsim-jax demo cloth [--estimate mass,stiffness,damping] [--out runs/cloth] ...
    gradsim-jax demo cloth-control [--out runs/cloth-control] ...
    gradsim-jax render SCENE.toml --out target.gif      (synthetic target from the scene's [material])
    gradsim-jax fit SCENE.toml --target VIDEO [--out runs/fit] ...
    gradsim-jax --version
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEMO_ESTIMATES = ("velocity", "mass", "stiffness", "damping", "bending", "drag", "lift", "friction")


def _progress_flags(p):
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in OUT/checkpoint")
    p.add_argument("--checkpoint-every", type=int, default=25, metavar="N",
                   help="write a checkpoint every N Adam iterations (default 25)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _fit_flags(p, *, iterations=None, polish=None):
    p.add_argument("--iterations", type=int, default=iterations, metavar="N",
                   help="Adam iterations" + (f" (default {iterations})" if iterations is not None else ""))
    p.add_argument("--learning-rate", type=float, default=None, metavar="LR",
                   help="Adam learning rate, cosine-decayed (log space for positive quantities)")
    p.add_argument("--polish", type=int, default=polish, metavar="N",
                   help="Levenberg-Marquardt steps on the pixel residuals after Adam (few free scalars)")
    p.add_argument("--loss", choices=("rgba", "rgb", "silhouette"), default=None,
                   help="image loss (default: rgba when the target's alpha is observed: an alpha channel, a "
                        "mask or a key colour; else rgb against the render over the known background)")
    p.add_argument("--frame-stride", type=int, default=None, metavar="K", help="use every K-th frame in the loss")
    p.add_argument("--horizon", type=int, default=None, metavar="T",
                   help="fit the first T frames first, growing to all over half the Adam iterations")


def build_parser() -> argparse.ArgumentParser:
    from gradsim_jax import __version__
    from gradsim_jax.scenefile import help_text

    parser = argparse.ArgumentParser(prog="gradsim-jax", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gradsim-jax {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="built-in demos")
    demos = demo.add_subparsers(dest="demo", metavar="DEMO")
    cloth = demos.add_parser(
        "cloth", help="recover cloth parameters from a rendered video",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Render a target video of a cloth from true parameters, start from perturbed ones, fit "
                    "them back through simulation and rendering, and write target/initial/fitted GIFs, "
                    "comparison.mp4, loss.png, params.png and report.json to OUT.\n\n"
                    "Scenes: velocity -> a cloth tossed with a spinning velocity field (gradSim's cloth demo, "
                    "every particle's initial velocity estimated); friction -> a cloth landing and sliding on "
                    "the ground; anything else -> a cloth pinned along one edge swinging down, with a known "
                    "push on its free edge during the first frames (that push is what separates mass from "
                    "stiffness and damping).")
    cloth.add_argument("--estimate", default="mass,stiffness,damping",
                       help=f"comma-separated quantities: {', '.join(DEMO_ESTIMATES)} "
                            "(default mass,stiffness,damping)")
    cloth.add_argument("--size", type=int, default=48, help="image size in pixels (default 48)")
    cloth.add_argument("--frames", type=int, default=30, help="frames to simulate (default 30)")
    cloth.add_argument("--cells", type=int, default=None, help="cloth cells per side (default: scene's own)")
    cloth.add_argument("--perturb", type=float, nargs=2, default=(0.3, 0.5), metavar=("LOW", "HIGH"),
                       help="relative offset of the initial guess from the truth (default 0.3 0.5)")
    cloth.add_argument("--no-push", action="store_true",
                       help="drop the known push (then mass is not separable from stiffness and damping)")
    cloth.add_argument("--seed", type=int, default=0, help="seed of the initial perturbation")
    cloth.add_argument("--out", default="runs/cloth", help="output folder (default runs/cloth)")
    _fit_flags(cloth, polish=None)
    _progress_flags(cloth)

    ctrl = demos.add_parser(
        "cloth-control", help="find the initial velocity that makes a cloth land where a target image shows",
        description="gradSim's control_cloth: optimize one initial velocity (a 3-vector) so that the last "
                    "rendered frame matches a target image rendered with a hidden velocity; reports the final "
                    "position error. Writes the same outputs as `demo cloth` to OUT.")
    ctrl.add_argument("--size", type=int, default=48, help="image size in pixels (default 48)")
    ctrl.add_argument("--frames", type=int, default=30, help="frames to simulate (default 30)")
    ctrl.add_argument("--iterations", type=int, default=150, help="Adam iterations (default 150)")
    ctrl.add_argument("--learning-rate", type=float, default=0.15, help="Adam learning rate, m/s (default 0.15)")
    ctrl.add_argument("--seed", type=int, default=0, help="seed of the hidden target velocity")
    ctrl.add_argument("--out", default="runs/cloth-control", help="output folder (default runs/cloth-control)")
    _progress_flags(ctrl)

    fit = sub.add_parser("fit", help="fit a scene file to a target video",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="Fit the quantities listed in the scene file's [fit] free to a target "
                                     "video. Writes target/initial/fitted GIFs, comparison.mp4, loss.png, "
                                     "params.png and report.json to OUT.",
                         epilog=help_text())
    fit.add_argument("scene", help="scene file (TOML)")
    fit.add_argument("--target", default=None, help="target video (.mp4, .gif, or a folder of PNGs)")
    fit.add_argument("--mask", default=None, help="alpha mask video or folder")
    fit.add_argument("--key-color", type=float, nargs=3, default=None, metavar=("R", "G", "B"),
                     help="background color of the target in [0, 1]: alpha from the distance to it")
    fit.add_argument("--true", action="store_true",
                     help="the target was rendered from [material]: report errors against those values")
    fit.add_argument("--out", default="runs/fit", help="output folder (default runs/fit)")
    _fit_flags(fit)
    _progress_flags(fit)

    ren = sub.add_parser("render", help="render a scene file's [material] values to a video (a synthetic target)",
                         epilog=help_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ren.add_argument("scene", help="scene file (TOML)")
    ren.add_argument("--out", required=True, help="output .gif or .mp4 (or a folder: one RGBA PNG per frame)")
    return parser


def _fail(message: str) -> int:
    print(f"gradsim-jax: error: {message}", file=sys.stderr)
    return 2


def _config(args, free, *, iterations, learning_rate, polish):
    from gradsim_jax.sysid import FitConfig

    return FitConfig(
        free=tuple(free),
        iterations=args.iterations if args.iterations is not None else iterations,
        learning_rate=args.learning_rate if args.learning_rate is not None else learning_rate,
        loss=args.loss or "rgba",  # the demos render their own targets, alpha included
        frame_stride=args.frame_stride or 1,
        polish=args.polish if args.polish is not None else polish,
        horizon=args.horizon,
        checkpoint_dir=str(Path(args.out) / "checkpoint"),
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        progress=not args.no_progress,
    )


def demo_experiment(free, *, size, frames, cells=None, push=True):
    """The demo scene for the estimated quantities `free` (canonical names)."""
    from gradsim_jax.scenes import demos

    kw = {"size": size, "frames": frames}
    if cells is not None:
        kw["cells"] = cells
    if "velocity" in free:
        if "friction" in free:
            raise ValueError("velocity and friction come from different demo scenes; estimate them separately")
        return demos.tossed_cloth(**kw)
    if "friction" in free:
        return demos.sliding_cloth(**kw)
    if "drag" in free or "lift" in free:
        kw.update(drag=0.5, lift=0.5)
    if "bending" in free:
        kw["edge_ke"] = 0.05
    if not push:
        kw["push"] = 0.0
    return demos.hanging_cloth(**kw)


def cmd_demo_cloth(args) -> int:
    from gradsim_jax import sysid

    try:
        free = tuple(dict.fromkeys(sysid.canonical(n) for n in args.estimate.split(",") if n.strip()))
    except ValueError as e:
        return _fail(str(e))
    if not free:
        return _fail("--estimate names no quantity")
    started = time.perf_counter()
    print(f"demo cloth: estimating {', '.join(free)} ({args.size} px, {args.frames} frames)")
    try:
        exp = demo_experiment(free, size=args.size, frames=args.frames, cells=args.cells, push=not args.no_push)
    except ValueError as e:
        return _fail(str(e))
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    low, high = args.perturb
    initial = sysid.perturbed(truth, free, seed=args.seed, low=low, high=high, free_particles=exp.free_particles)
    velocity = "velocity" in free
    config = _config(args, free, iterations=30 if velocity else 60, learning_rate=0.05,
                     polish=10 if velocity else 15)
    report = sysid.run(exp, target, initial, config, args.out, truth=truth,
                       extra={"command": "demo cloth", "push": not args.no_push, "seed": args.seed})
    total = time.perf_counter() - started
    report["total_wall_time_s"] = total
    _rewrite(report)
    print(f"total time {total:.1f} s")
    return 0


def _rewrite(report):
    import json

    from gradsim_jax.sysid import _json_default

    with open(report["outputs"]["report"], "w") as f:
        json.dump(report, f, indent=2, default=_json_default)


def cmd_demo_control(args) -> int:
    import json

    import numpy as np

    from gradsim_jax import sysid
    from gradsim_jax.scenes import demos

    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    v_true = np.asarray([rng.uniform(0.8, 1.6), rng.uniform(1.0, 2.0), rng.uniform(-0.6, 0.6)], np.float32)
    v_guess = np.zeros(3, np.float32)
    exp = demos.control_cloth(v_true, v_guess, size=args.size, frames=args.frames)
    _, target = sysid.simulate_video(exp, {})
    _, initial_video = sysid.simulate_video(exp, {"velocity": np.broadcast_to(v_guess, np.shape(exp.state0.x))})
    print(f"demo cloth-control: find the initial velocity that lands the cloth where the last frame shows "
          f"({args.size} px, {args.frames} frames)")
    v_est, result = sysid.fit_control(exp, target[-1], v_guess, iterations=args.iterations,
                                      learning_rate=args.learning_rate,
                                      checkpoint_dir=str(Path(args.out) / "checkpoint"),
                                      checkpoint_every=args.checkpoint_every, resume=args.resume,
                                      progress=not args.no_progress)
    _, fitted_video = sysid.simulate_video(exp, {"velocity": np.broadcast_to(v_est, np.shape(exp.state0.x))})
    errors = sysid.final_position_error(exp, v_est, v_true)
    history = {"iteration": result.history["iteration"], "loss": result.history["loss"],
               "params": {"velocity": [np.asarray(v) for v in result.history["params"]["v"]]}}
    res = sysid.SysIdResult(theta={"velocity": v_est}, history=history, report=None, wall_time=result.wall_time,
                            adam_iterations=result.iterations, lm_iterations=0, loss=result.loss)
    report = {
        "experiment": "cloth-control", "true_velocity": v_true.tolist(), "initial_velocity": v_guess.tolist(),
        "estimated_velocity": v_est.tolist(),
        "velocity_relative_error": float(np.linalg.norm(v_est - v_true) / np.linalg.norm(v_true)),
        "final_position_error": errors, "iterations": result.iterations, "final_loss": result.loss,
        "wall_time_s": result.wall_time, "versions": sysid._versions(),
    }
    out = Path(args.out)
    paths = sysid.write_outputs(out, exp, target=target, initial_video=initial_video, fitted_video=fitted_video,
                                report=report, result=res, truth=None)
    report["outputs"] = paths
    report["total_wall_time_s"] = time.perf_counter() - started
    with open(paths["report"], "w") as f:
        json.dump(report, f, indent=2, default=sysid._json_default)
    print(f"  true velocity      {np.round(v_true, 4).tolist()} m/s")
    print(f"  estimated velocity {np.round(v_est, 4).tolist()} m/s")
    print(f"  final position error: mean {errors['mean_particle_error_m'] * 1000:.2f} mm per particle, "
          f"center {errors['center_error_m'] * 1000:.2f} mm (the cloth travels {errors['travel_m']:.3f} m)")
    print(f"outputs written to {out.resolve()}; total time {report['total_wall_time_s']:.1f} s")
    return 0


def _load_target(spec, args):
    """The target video (a TargetVideo at the render size, undistorted when [camera] has distortion) and
    the words saying what was done to it."""
    from gradsim_jax.render.calibration import undistorter
    from gradsim_jax.render.video import load_target

    tv, ren = spec.values["target"], spec.values["render"]
    video = args.target or (str(spec.resolve(tv["video"])) if tv["video"] else None)
    if video is None:
        raise ValueError(f"{spec.path}: no target video: pass --target or set [target] video")
    mask = args.mask or (str(spec.resolve(tv["mask"])) if tv["mask"] else None)
    key = args.key_color if args.key_color is not None else tv["key_color"]
    cal = spec.calibration()
    undistort = undistorter(cal) if cal is not None else None
    frames = spec.values["simulation"]["frames"]
    target = load_target(video, (ren["height"], ren["width"]), background=key, mask=mask,
                         tolerance=tv["tolerance"], undistort=undistort,
                         expected_frames=None if frames is None else frames + 1)
    return target, undistort


def _resolve_loss(requested, target) -> str:
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


def _background_warning(spec, target, exp) -> str | None:
    """A warning when the target's border does not look like the background the render composites over."""
    import numpy as np

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


def cmd_fit(args) -> int:
    import numpy as np

    from gradsim_jax import sysid
    from gradsim_jax.scenefile import SceneFileError, load_scene

    try:
        spec = load_scene(args.scene)
        target, undistort = _load_target(spec, args)
        background = spec.background_image(target.frames, undistort)
        exp = spec.experiment(frames=target.frames.shape[0] - 1, native_size=target.native_size,
                              background_image=background)
        base = spec.fit_config
        loss = _resolve_loss(args.loss or base.loss, target)
    except (SceneFileError, ValueError, FileNotFoundError) as e:
        return _fail(str(e))
    frames = target.frames  # load_target checked the count against [simulation] frames and cut extra ones
    config = _config(args, base.free, iterations=base.iterations, learning_rate=base.learning_rate,
                     polish=base.polish)
    config.loss = loss
    if args.frame_stride is None:
        config.frame_stride = base.frame_stride
    if args.horizon is None:
        config.horizon = base.horizon
    initial = spec.initial_theta(exp)
    truth = dict(sysid.with_camera_pose(exp, exp.theta)) if args.true else None
    observed = target.alpha_source or "not observed"
    notes = [f"alpha: {observed}", f"loss: {loss}"]
    if undistort is not None:
        notes.append("frames undistorted with the [camera] distortion coefficients")
    if background is not None:
        notes.append(f"background image: {spec.values['render']['background_image']}")
    print(f"fit {spec.path}: estimating {', '.join(config.free)} from {frames.shape[0]} frames "
          f"at {frames.shape[2]} x {frames.shape[1]} px ({'; '.join(notes)})")
    warning = _background_warning(spec, target, exp)
    if warning:
        print(f"WARNING: {warning}")
    started = time.perf_counter()
    report = sysid.run(exp, np.asarray(frames), initial, config, args.out, truth=truth,
                       extra={"command": "fit", "scene": str(spec.path),
                              "target": {"path": str(args.target or spec.values["target"]["video"]),
                                         "alpha": target.alpha_source, "native_size": list(target.native_size),
                                         "undistorted": undistort is not None,
                                         "background_image": spec.values["render"]["background_image"]}})
    report["total_wall_time_s"] = time.perf_counter() - started
    _rewrite(report)
    return 0


def cmd_render(args) -> int:
    from gradsim_jax import sysid
    from gradsim_jax.render.video import write_video
    from gradsim_jax.scenefile import SceneFileError, load_scene

    try:
        spec = load_scene(args.scene)
        cal = spec.calibration()
        exp = spec.experiment(background_image=spec.background_image())
        out = Path(args.out)
        if out.suffix.lower() not in ("", ".gif", ".mp4"):
            raise ValueError(f"--out {out}: write .gif, .mp4, or a folder (no suffix) of RGBA PNGs")
    except (SceneFileError, ValueError) as e:
        return _fail(str(e))
    if cal is not None and cal.distorted:
        print("note: the frames are those of an ideal pinhole camera: [camera] distortion is not applied")
    _, frames = sysid.simulate_video(exp, {})
    write_video(out, frames, fps=1.0 / exp.frame_dt)
    print(f"rendered {frames.shape[0]} frames of {spec.path} to {out}")
    return 0


def main(argv=None) -> int:
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    # imageio-ffmpeg starts ffmpeg with a fork while JAX's threads run; ffmpeg does not touch them.
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
    from gradsim_jax.fit import CheckpointError, FitDiverged
    from gradsim_jax.physics import SimulationDiverged

    try:
        if args.command == "demo" and args.demo == "cloth":
            return cmd_demo_cloth(args)
        if args.command == "demo" and args.demo == "cloth-control":
            return cmd_demo_control(args)
        if args.command == "fit":
            return cmd_fit(args)
        if args.command == "render":
            return cmd_render(args)
    except (CheckpointError, FitDiverged, SimulationDiverged) as e:
        return _fail(str(e))
    parser.print_help() if args.command is None else parser.parse_args([args.command, "--help"])
    return 2


if __name__ == "__main__":
    sys.exit(main())
