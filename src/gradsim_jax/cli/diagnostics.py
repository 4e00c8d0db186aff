"""The diagnostic subcommands of `gradsim-jax`: gradcheck, horizon, landscape (arguments -> `load_problem` ->
the diagnostic -> table on stdout, JSON and PNG in OUT).

    gradsim-jax gradcheck SCENE.toml [--target VIDEO] [--out runs/gradcheck]     exit 1 when a check fails
    gradsim-jax horizon SCENE.toml [--tol 0.1] [--out runs/horizon]
    gradsim-jax landscape SCENE.toml --vary mass,stiffness [--span 0.5 --points 21] [--out runs/landscape]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gradsim_jax.cli.args import count, fail, fraction, missing_input, positive, preflight

COMMANDS = ("gradcheck", "horizon", "landscape")


def _common(p, name: str, perturb: bool = True):
    p.add_argument("scene", help="scene file (TOML); its [fit] free names the quantities")
    p.add_argument("--target", default=None,
                   help="target video (.mp4, .gif, or a folder of PNGs); default: [target] video, or else a target "
                        "rendered from the scene's [material] values")
    p.add_argument("--mask", default=None, help="alpha mask video or folder")
    p.add_argument("--key-color", type=float, nargs=3, default=None, metavar=("R", "G", "B"),
                   help="background color of the target in [0, 1]: alpha from the distance to it")
    if perturb:
        p.add_argument("--perturb", type=fraction, default=0.2, metavar="F",
                       help="with a target rendered from [material] and no [initial] values, evaluate at the truth "
                            "moved by this relative amount (the gradient vanishes at the truth; default 0.2)")
        p.add_argument("--seed", type=int, default=0, help="seed of the perturbation's signs (default 0)")
    p.add_argument("--out", default=f"runs/{name}", help=f"output folder (default runs/{name})")
    p.add_argument("--force", action="store_true",
                   help="run even when the estimated memory exceeds what is available")


def add_parser(sub) -> None:
    """Register the subcommands on `gradsim-jax`'s subparsers.

    Args:
        sub: the subparsers action of `gradsim-jax`'s parser (`add_subparsers`).
    """
    fmt = argparse.RawDescriptionHelpFormatter
    gc = sub.add_parser(
        "gradcheck", help="check a scene file's gradients (cloth, rigid or soft bodies): reverse vs forward mode vs finite "
             "differences, float32 vs 64",
        formatter_class=fmt,
        description="For every [fit] free quantity of the scene, the directional derivative of the fit's image "
                    "loss by reverse mode, forward mode (through the renderer differentiated by JAX, "
                    "`render(autodiff=True)`) and central finite differences, all in float64, and the float32 "
                    "gradient against the float64 one. Prints a table with a verdict per quantity, writes OUT/gradcheck.json, and exits with status 1 when a "
                    "check fails.\n\nTolerances (relative): reverse vs forward 1e-6, reverse vs FD 1e-4, float32 vs "
                    "float64 0.1. FD step h = eps^(1/3) |q| (6e-6 relative), the step balancing truncation and "
                    "rounding errors of a central difference.")
    _common(gc, "gradcheck")
    gc.add_argument("--ad-rtol", type=positive, default=None, metavar="TOL",
                    help="tolerance of reverse vs forward mode (default 1e-6)")
    gc.add_argument("--fd-rtol", type=positive, default=None, metavar="TOL",
                    help="tolerance of reverse mode vs finite differences (default 1e-4)")
    gc.add_argument("--f32-rtol", type=positive, default=None, metavar="TOL",
                    help="tolerance of the float32 gradient vs the float64 one (default 0.1)")
    gc.add_argument("--no-float32", action="store_true", help="skip the float32 comparison")

    hz = sub.add_parser(
        "horizon", help="a scene file's gradient norm and float32/float64 agreement against the horizon (frames fitted)",
        formatter_class=fmt,
        description="The gradient of the fit's loss over the first k loss frames, for every k, in float64 and "
                    "float32: its norm and the relative difference |g32 - g64| / |g64|. The horizon past which the "
                    "gradient stops being informative is the first where that difference exceeds --tol (default "
                    "0.1); in a chaotic motion with Lyapunov exponent lambda it is about ln(tol / 6e-8) / lambda. "
                    "Prints a table, writes OUT/horizon.json and OUT/horizon.png. A windowed fit should use "
                    "windows shorter than that horizon.")
    _common(hz, "horizon")
    hz.add_argument("--tol", type=positive, default=0.1, help="float32/float64 criterion (default 0.1)")
    hz.add_argument("--mode", choices=("auto", "forward", "reverse"), default="auto",
                    help="forward: one pass per free scalar; reverse: one per horizon; auto: the "
                         "cheaper")

    ls = sub.add_parser(
        "landscape", help="a scene file's loss and its gradient on a 1-D or 2-D grid around the estimate",
        formatter_class=fmt,
        description="The fit's image loss and its gradient over a grid of one or two scalar quantities, each "
                    "from (1 - span) to (1 + span) times its value at the centre (the scene's [initial] values, "
                    "else [material]); the other quantities stay at the centre. Evaluated in chunks of --batch "
                    "points with vmap. Writes OUT/landscape.png (1-D: loss and gradient curves; 2-D: contours "
                    "of log loss with downhill arrows) and OUT/landscape.json.")
    _common(ls, "landscape", perturb=False)
    ls.add_argument("--vary", required=True, help="one or two comma-separated scalar quantities, e.g. mass,stiffness")
    ls.add_argument("--span", type=fraction, default=0.5, help="relative half-width of the grid (default 0.5)")
    ls.add_argument("--points", type=count(2), default=21, help="grid points per quantity (default 21)")
    ls.add_argument("--batch", type=count(1), default=16, help="grid points evaluated together (default 16)")


def _load(args, perturb):
    """(problem, None) or (None, exit status) after the loader and the preflight."""
    from gradsim_jax.scenefile import load_problem
    from gradsim_jax.scenefile import SceneFileError
    from gradsim_jax.sysid import ensure_writable_folder

    try:
        try:
            ensure_writable_folder(args.out)
        except ValueError as e:
            raise ValueError(f"--out: {e}") from None
        problem = load_problem(args.scene, target=args.target, mask=args.mask, key_color=args.key_color,
                               perturb=perturb, seed=getattr(args, "seed", 0))
    except (SceneFileError, ValueError) as e:
        return None, fail(str(e))
    except FileNotFoundError as e:
        return None, fail(missing_input(args) or str(e))
    print(f"{args.command} {problem.path}: {', '.join(problem.free)}; {len(problem.loss_frames)} loss frames at "
          f"{problem.target.shape[2]} x {problem.target.shape[1]} px ({'; '.join(problem.notes)})")
    status = preflight(problem.experiment, args)
    return (None, status) if status is not None else (problem, None)


def cmd_gradcheck(args) -> int:
    """`gradsim-jax gradcheck`: reverse vs forward mode vs finite differences, float32 vs float64; prints the
    table and writes OUT/gradcheck.json.

    Args:
        args: the parsed command line (argparse.Namespace of the gradcheck parser).

    Returns:
        The exit status: 0 when every check agrees, 1 when one fails, 2 after a one-line error.
    """
    from gradsim_jax.diagnostics.gradcheck import AD_RTOL, F32_RTOL, FD_RTOL, gradcheck
    from gradsim_jax.diagnostics.problem import gradcheck_notes

    problem, status = _load(args, args.perturb)
    if problem is None:
        return status
    started = time.perf_counter()
    result = gradcheck(problem.loss, problem.params, free=problem.free, loss_forward=problem.loss_dense,
                       float32=not args.no_float32, ad_rtol=args.ad_rtol or AD_RTOL, fd_rtol=args.fd_rtol or FD_RTOL,
                       f32_rtol=args.f32_rtol or F32_RTOL, progress=True)
    print(result.table())
    for note in gradcheck_notes(problem.experiment) if not result.ok else ():  # a kind's word (the smoke's solve)
        print(note)
    path = Path(args.out) / "gradcheck.json"
    report = {**result.as_dict(), "scene": problem.path, "notes": list(problem.notes),
              "at": {n: problem.theta[n].tolist() for n in problem.free},
              "wall_time_s": time.perf_counter() - started}
    _write(path, report)
    print(f"{'all gradients agree' if result.ok else 'GRADIENTS DISAGREE'}; written {path}")
    return 0 if result.ok else 1


def cmd_horizon(args) -> int:
    """`gradsim-jax horizon`: the gradient's norm and float32/float64 agreement against the number of loss
    frames; prints the table and the suggested fit --window, writes OUT/horizon.json and OUT/horizon.png.

    Args:
        args: the parsed command line (argparse.Namespace of the horizon parser).

    Returns:
        The exit status: 0, or 2 after a one-line error.
    """
    import numpy as np

    from gradsim_jax.diagnostics.horizon import gradient_horizon
    from gradsim_jax.fit.windows import window_length_for

    problem, status = _load(args, args.perturb)
    if problem is None:
        return status
    started = time.perf_counter()
    times = problem.loss_frames * problem.experiment.frame_dt
    try:
        result = gradient_horizon(problem.horizon_losses, problem.params, free=problem.free, times=times,
                                  tol=args.tol, mode=args.mode,
                                  horizon_losses_forward=lambda p: problem.horizon_losses(p, dense=True),
                                  progress=True)
    except ValueError as e:
        return fail(str(e))
    print(result.table())
    exp = problem.experiment
    window = None
    if result.horizon is not None:  # the marked horizon in steps, a third of it in frames: fit --window
        window = window_length_for(max(1, round(result.horizon / exp.frame_dt * exp.substeps)), exp.substeps)
        print(f"for a fit of a longer recording of this scene: fit --window {window} (frames; a third of the "
              "marked horizon)")
    out = Path(args.out)
    result.plot(out / "horizon.png")
    report = {**result.as_dict(), "suggested_window": window, "scene": problem.path, "notes": list(problem.notes), "free": list(problem.free),
              "frames": np.asarray(problem.loss_frames).tolist(), "wall_time_s": time.perf_counter() - started}
    _write(out / "horizon.json", report)
    print(f"written {out / 'horizon.json'}, {out / 'horizon.png'}")
    return 0


def cmd_landscape(args) -> int:
    """`gradsim-jax landscape`: the loss and its gradient on a grid of one or two scalar quantities (--vary)
    around the centre; writes OUT/landscape.png and OUT/landscape.json and prints the grid's least loss.

    Args:
        args: the parsed command line (argparse.Namespace of the landscape parser).

    Returns:
        The exit status: 0, or 2 after a one-line error (bad --vary, or no finite loss on the grid).
    """
    import numpy as np

    from gradsim_jax.diagnostics.landscape import loss_landscape, relative_grid
    from gradsim_jax.sysid import canonical

    try:
        vary = tuple(dict.fromkeys(canonical(n) for n in args.vary.split(",") if n.strip()))
    except ValueError as e:
        return fail(f"--vary: {e}")
    if len(vary) not in (1, 2):
        return fail(f"--vary names one or two quantities, got {len(vary)}")
    problem, status = _load(args, None)
    if problem is None:
        return status
    missing = [n for n in vary if n not in problem.theta or np.ndim(problem.theta[n]) != 0]
    if missing:
        return fail(f"--vary {', '.join(missing)}: not a scalar quantity of this scene")
    started = time.perf_counter()
    offsets = relative_grid(args.span, args.points)
    grid = {n: float(problem.theta[n]) * (1.0 + offsets) for n in vary}
    truth = None if problem.truth is None else {n: problem.truth[n] for n in vary}
    print(f"landscape: {args.points ** len(vary)} points, {args.batch} at a time")
    result = loss_landscape(problem.loss, problem.params, grid, batch_size=args.batch, truth=truth)
    out = Path(args.out)
    result.plot(out / "landscape.png")
    report = {**result.as_dict(), "scene": problem.path, "notes": list(problem.notes), "span": args.span,
              "wall_time_s": time.perf_counter() - started}
    _write(out / "landscape.json", report)
    if result.diverged:
        print(f"WARNING: the simulation diverged at {result.diverged} of {result.loss.size} grid points (non-finite "
              "loss): too light or too stiff for the time step there; more [simulation] substeps, or a smaller --span")
    best = result.minimum()
    if best is None:
        return fail("the loss is not finite anywhere on the grid")
    print("least loss on the grid: " + ", ".join(f"{n} = {best[n]:.6g}" for n in vary)
          + f" (loss {best['loss']:.4e}); centre " + ", ".join(f"{n} = {result.centre[n]:.6g}" for n in vary))
    print(f"written {out / 'landscape.json'}, {out / 'landscape.png'}")
    return 0


def _write(path, report) -> None:
    from gradsim_jax.sysid import write_report

    write_report(path, report)


def run(args) -> int:
    """Dispatch `args.command` (one of COMMANDS).

    Args:
        args: the parsed command line (argparse.Namespace; command names the diagnostic).

    Returns:
        The diagnostic's exit status.
    """
    return {"gradcheck": cmd_gradcheck, "horizon": cmd_horizon, "landscape": cmd_landscape}[args.command](args)
