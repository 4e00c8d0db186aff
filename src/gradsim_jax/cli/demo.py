"""`gradsim-jax demo NAME`: the built-in demos (cloth, cloth-control, rigid-*, fem-*, pendulum, double-pendulum,
bounce, smoke-buoyancy, smoke-shape, texture, shape, control-*). Each renders
its own target from known values, fits from a perturbed start (or trains a policy) and writes the videos,
plots and report.json to OUT; the scenes and their settings come from `gradsim_jax.scenes.catalog`."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from gradsim_jax.cli.demo_parsers import add_cloth_control_parser, add_cloth_parser, add_rigid_shape_parser
from gradsim_jax.cli.args import (count, fail, fit_flags, force_flag, missing_input, positive, preflight,
                                  progress_flags, rewrite_report)
from gradsim_jax.scenes.catalog import (CONTACT_DEMOS, CONTROL_DEMOS, FEM_DEMOS,
                                       FEM_MATERIAL_ESTIMATES, ODE_DEMOS, ODE_ESTIMATES, RIGID_DEMOS,
                                       RIGID_MATERIAL_ESTIMATES, contact_demo_experiment, demo_experiment,
                                       fem_demo_experiment, ode_demo_experiment, rigid_demo_experiment)
from gradsim_jax.scenes.contact import DRAPE_QUANTITIES, LIFT_QUANTITIES, STACK_QUANTITIES
from gradsim_jax.scenes.smoke import PLUME_TRUTH

#: The quantities each contact demo's scene can estimate (its --estimate's choices).
CONTACT_QUANTITIES = {"stack": STACK_QUANTITIES, "drape": DRAPE_QUANTITIES, "lift": LIFT_QUANTITIES}


def add_parser(sub) -> None:
    """`demo` and one subcommand per demo on `gradsim-jax`'s subparsers.

    Args:
      sub: the subparsers of `gradsim-jax`'s parser (`add_subparsers()`).
    """
    demo = sub.add_parser("demo", help="built-in demos: cloth, rigid and soft bodies from video, and control",
                          description="Built-in demos. Each renders its own target video from known values, "
                                      "recovers them from a perturbed start (or trains a control) and writes "
                                      "videos, plots and report.json to OUT.")
    demos = demo.add_subparsers(dest="demo", metavar="DEMO")
    add_cloth_parser(demos)
    add_cloth_control_parser(demos)

    _table_demo_parsers(demos, RIGID_DEMOS, RIGID_MATERIAL_ESTIMATES)

    add_rigid_shape_parser(demos)

    _table_demo_parsers(demos, FEM_DEMOS, FEM_MATERIAL_ESTIMATES)
    _table_demo_parsers(demos, CONTACT_DEMOS, CONTACT_QUANTITIES)
    for name, e in ODE_DEMOS.items():
        _table_demo_parser(demos, name, e.help, e.description, e.estimate, e.defaults, ODE_ESTIMATES[name], e.start)

    _smoke_demo_parsers(demos)
    _texture_demo_parser(demos)

    for name, entry in CONTROL_DEMOS.items():
        summary, frames, iterations = entry.help, entry.frames, entry.iterations
        p = demos.add_parser(name, help=_as_help(summary),
                             description=summary + ". Trains an explicit policy (tanh of phase sinusoids) by "
                             "gradient descent through simulation and rendering against a target image, scores "
                             "random policies, and writes untrained.gif, trained.gif, comparison.mp4, target.png, "
                             "loss.png, report.json and a resumable checkpoint (policy + optimizer state) to OUT.")
        p.add_argument("--size", type=count(8), default=64, help="image size in pixels (default 64)")
        p.add_argument("--frames", type=count(1), default=None, help=f"frames to simulate (default {frames})")
        p.add_argument("--iterations", type=count(0), default=None, metavar="N",
                       help=f"Adam iterations (default {iterations})")
        p.add_argument("--learning-rate", type=positive, default=None, metavar="LR",
                       help="Adam learning rate, cosine-decayed (default: the demo's own)")
        p.add_argument("--random-policies", type=count(1), default=16, metavar="N",
                       help="random policies of the baseline (default 16)")
        p.add_argument("--seed", type=int, default=0, help="seed of the initial policy (the baseline uses seed + 1)")
        p.add_argument("--out", default=f"runs/{name}", help=f"output folder (default runs/{name})")
        progress_flags(p)
        force_flag(p)



def _as_help(text: str) -> str:
    """A catalogue text as an argparse help string: argparse %-formats help (not descriptions), so a literal
    "%" is written "%%" there."""
    return text.replace("%", "%%")


def _texture_demo_parser(demos) -> None:
    """`demo texture` (`scenes.texture`)."""
    tex = demos.add_parser(
        "texture", help="recover a mesh's texture image from 8 views (the renderer alone)",
        description="gradSim's softras_texture_optimization: a textured mesh made in code (a bulging sphere, "
                    "latitude-longitude uv) is rendered from 8 cameras with its true texture; the texture is "
                    "recovered from grey by Adam through the soft rasterizer and scored by PSNR on the 8 views "
                    "and on 4 views held out of the fit. Writes target/initial/fitted GIFs (the 8 views, then the "
                    "4 held out), comparison.mp4, loss.png, texture.png and report.json to OUT.")
    tex.add_argument("--size", type=count(16), default=96, help="image size in pixels (default 96)")
    tex.add_argument("--texels", type=count(2), default=64, help="texture size, texels a side (default 64)")
    tex.add_argument("--iterations", type=count(0), default=150, help="Adam iterations (default 150)")
    tex.add_argument("--learning-rate", type=positive, default=0.2,
                     help="Adam learning rate, logit units (default 0.2)")
    tex.add_argument("--rasterizer", choices=("softras", "dibr"), default="softras",
                     help="the rasterizer's model: SoftRas (default) or DIB-R (exact colours inside faces)")
    tex.add_argument("--out", default="runs/texture", help="output folder (default runs/texture)")
    tex.add_argument("--no-progress", action="store_true", help="no progress bar")

    shape = demos.add_parser(
        "shape", help="deform an icosphere into a shape from 12 silhouettes (the renderer alone)",
        description="gradSim's softras_vertex_optimization / dibr_vertex_optimization: a superquadric made in code "
                    "(a rounded box of semi-axes 1, 0.7, 0.8 m) is seen from 12 cameras; an icosphere's vertices "
                    "are moved by Adam through the rasterizer until its silhouettes match (soft IoU loss, "
                    "Laplacian and edge-length regularization), and the result is scored by the silhouette IoU "
                    "on 4 views held out of the fit and by the chamfer distance to the true surface. Writes "
                    "target/initial/fitted GIFs (the 12 views, then the 4 held out), comparison.mp4, loss.png, "
                    "shape.png and report.json to OUT.")
    shape.add_argument("--size", type=count(16), default=64, help="image size in pixels (default 64)")
    shape.add_argument("--subdivisions", type=count(1), default=3,
                       help="icosphere subdivisions of the template (default 3: 642 vertices, 1280 triangles)")
    shape.add_argument("--iterations", type=count(0), default=300, help="Adam iterations (default 300)")
    shape.add_argument("--learning-rate", type=positive, default=0.01, help="Adam learning rate, m (default 0.01)")
    shape.add_argument("--laplacian", type=float, default=5.0, help="weight of the Laplacian term (default 5)")
    shape.add_argument("--edge-length", type=float, default=5.0, help="weight of the edge-length term (default 5)")
    shape.add_argument("--rasterizer", choices=("softras", "dibr"), default="softras",
                       help="the rasterizer's model: SoftRas (default) or DIB-R")
    shape.add_argument("--out", default="runs/shape", help="output folder (default runs/shape)")
    shape.add_argument("--no-progress", action="store_true", help="no progress bar")


def _smoke_demo_parsers(demos) -> None:
    """`demo smoke-buoyancy` and `demo smoke-shape` (`scenes.smoke`)."""
    buoy = demos.add_parser(
        "smoke-buoyancy", help="recover a smoke plume's buoyancy and inflow rate from its video",
        description="Render a rising smoke plume (a closed 1 m box, fed by a disc near the floor) from true "
                    "buoyancy (1 m/s^2 per unit density) and inflow rate (2 per s), start --offset off (buoyancy "
                    "too strong, inflow too weak), fit both back through the smoke solver and the density "
                    "renderer (Adam, then Levenberg-Marquardt), and write target/initial/fitted GIFs, "
                    "comparison.mp4, loss.png, params.png and report.json to OUT.")
    buoy.add_argument("--estimate", default="smoke_buoyancy,inflow_rate",
                      help="comma-separated: smoke_buoyancy, inflow_rate (default both)")
    buoy.set_defaults(quantities=tuple(PLUME_TRUTH))
    buoy.add_argument("--cells", type=count(8), default=48, help="grid cells per side (default 48)")
    buoy.add_argument("--frames", type=count(1), default=45, help="frames at 30 fps (default 45)")
    buoy.add_argument("--size", type=count(8), default=64, help="image size in pixels (default 64)")
    buoy.add_argument("--offset", type=float, default=0.5, help="relative offset of the start (default 0.5)")
    buoy.add_argument("--iterations", type=count(0), default=30, help="Adam iterations (default 30)")
    buoy.add_argument("--learning-rate", type=positive, default=0.1, help="Adam learning rate, log units (default 0.1)")
    buoy.add_argument("--polish", type=count(0), default=10, help="Levenberg-Marquardt steps (default 10)")
    buoy.add_argument("--frame-stride", type=count(1), default=3, help="compare every N-th frame (default 3)")
    buoy.add_argument("--out", default="runs/smoke-buoyancy", help="output folder (default runs/smoke-buoyancy)")
    buoy.add_argument("--no-progress", action="store_true", help="no progress bar")

    shape = demos.add_parser(
        "smoke-shape", help="find the initial velocity field that makes smoke form a picture",
        description="gradSim's smoke2d: smoke fills the lower third of a closed box; its initial velocity field "
                    "(every face of the grid) is optimized by Adam through --frames solver steps and the density "
                    "renderer until the smoke at the last step forms the target picture: --text drawn in code, "
                    "or --target IMAGE (its brightness is the smoke's opacity; alpha, when it has one, too). "
                    "Writes target/initial/fitted GIFs, comparison.mp4, loss.png, frames.png, target.png and "
                    "report.json to OUT.")
    shape.add_argument("--text", default="G", help="the letter(s) to draw as the target (default G)")
    shape.add_argument("--target", default=None, metavar="IMAGE", help="a picture of your own instead of --text")
    shape.add_argument("--cells", type=count(8), default=110, help="grid cells per side (default 110)")
    shape.add_argument("--frames", type=count(1), default=100, help="solver steps (default 100)")
    shape.add_argument("--iterations", type=count(0), default=40, help="Adam iterations (default 40)")
    shape.add_argument("--learning-rate", type=positive, default=0.05,
                       help="Adam learning rate, cells per step (default 0.05)")
    shape.add_argument("--smoothness", type=float, default=0.0,
                       help="weight of the initial velocity's smoothness prior (default 0)")
    shape.add_argument("--out", default="runs/smoke-shape", help="output folder (default runs/smoke-shape)")
    shape.add_argument("--no-progress", action="store_true", help="no progress bar")


def _table_demo_parsers(demos, table: dict, estimates) -> None:
    """One `demo NAME` parser per entry of a demo table (RIGID_DEMOS, FEM_DEMOS: `catalog.DemoEntry`s);
    `estimates`: --estimate's choices, or a dict of them by demo."""
    for name, entry in table.items():
        own = estimates[name] if isinstance(estimates, dict) else estimates
        _table_demo_parser(demos, name, entry.help, entry.description, entry.estimate, entry.defaults, own)


def _table_demo_parser(demos, name, summary, text, estimate, fit_defaults, estimates, start=None) -> None:
    """The `demo NAME` parser of one demo table entry; `start`: the demo's own initial guesses (then --perturb
    has no default)."""
    p = demos.add_parser(name, help=_as_help(summary),
                         description=text + " Writes the same outputs as `demo cloth` to OUT (target/initial/fitted "
                         "GIFs, comparison.mp4, loss.png, params.png, report.json).")
    if estimate is not None:
        p.add_argument("--estimate", default=estimate,
                       help=f"comma-separated quantities: {', '.join(estimates)} (default {estimate})")
        p.set_defaults(quantities=estimates)
    p.add_argument("--size", type=count(1), default=64, help="image size in pixels (default 64)")
    p.add_argument("--frames", type=count(1), default=None, help="frames to simulate (default: scene's own)")
    if start is None:
        p.add_argument("--perturb", type=float, nargs=2, default=(0.5, 0.5), metavar=("LOW", "HIGH"),
                       help="relative offset of the initial guess from the truth (default 0.5 0.5: 50 %% off)")
    else:
        given = ", ".join(f"{k} = {v}" for k, v in start.items())
        p.add_argument("--perturb", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                       help=f"relative offset of the initial guess from the truth (default: the demo's own "
                            f"start, {given})")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial perturbation (its sign)")
    p.add_argument("--out", default=f"runs/{name}", help=f"output folder (default runs/{name})")
    fit_flags(p, iterations=fit_defaults["iterations"], polish=fit_defaults["polish"])
    if "density_first" in fit_defaults:
        first = fit_defaults["density_first"]
        p.add_argument("--density-first", type=count(0), default=first, metavar="N",
                       help=f"first fit a density field (log-linear across the body; mass = density x "
                            f"lumped volume) in N Adam iterations (learning rate 0.1), then every mass from "
                            f"there at --learning-rate (default {first} and {fit_defaults['learning_rate']}; "
                            f"0: per-particle masses from the start)")
    progress_flags(p)
    force_flag(p)


def _config(args, free, *, iterations, learning_rate, polish, rounds=1, round_iterations=None, density_first=0):
    from gradsim_jax.sysid import FitConfig

    return FitConfig(
        free=tuple(free),
        iterations=args.iterations if args.iterations is not None else iterations,
        learning_rate=args.learning_rate if args.learning_rate is not None else learning_rate,
        loss=args.loss or "rgba",  # the demos render their own targets, alpha included
        frame_stride=args.frame_stride if args.frame_stride is not None else 1,
        polish=args.polish if args.polish is not None else polish,
        rounds=args.rounds if getattr(args, "rounds", None) is not None else rounds,
        round_iterations=(args.round_iterations if getattr(args, "round_iterations", None) is not None
                          else round_iterations),
        horizon=args.horizon,
        window=getattr(args, "window", None),
        shooting=getattr(args, "shooting", None) or "truncated",
        density_first=(args.density_first if getattr(args, "density_first", None) is not None else density_first),
        checkpoint_dir=str(Path(args.out) / "checkpoint"),
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        resume_anyway=args.resume_anyway,
        progress=not args.no_progress,
    )


def _estimates(args, default=None):
    """The canonical names of --estimate (or `default` for a demo without one); ValueError naming the option,
    and for a name that is no quantity the closest of the demo's own (`args.quantities`) and all of them."""
    from gradsim_jax import sysid
    from gradsim_jax.sysid.registry import unknown_quantity

    text = getattr(args, "estimate", None) or default
    free = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        try:
            free.append(sysid.canonical(name))
        except ValueError as e:
            own = getattr(args, "quantities", None)
            raise ValueError(f"--estimate: {unknown_quantity(name, own) if own else e}") from None
    if not free:
        raise ValueError("--estimate names no quantity")
    return tuple(dict.fromkeys(free))


def _run_demo(args, label: str, free, build, *, iterations, learning_rate, polish, horizon=None,
              extra=None, rounds=1, round_iterations=None, density_first=0, start=None) -> int:
    """One synthetic system-identification demo: check OUT, build the experiment (`build()`, ValueError is a
    usage error), render the target from its theta, perturb the free quantities by --perturb, fit, write
    every output and the total time."""
    from gradsim_jax import sysid

    started = time.perf_counter()
    try:
        exp = build()
    except ValueError as e:
        return fail(str(e))
    print(f"demo {label}: estimating {', '.join(free)} ({exp.camera.height} px, {exp.frames} frames)")
    truth = dict(exp.theta)
    config = _config(args, free, iterations=iterations, learning_rate=learning_rate, polish=polish, rounds=rounds,
                     round_iterations=round_iterations, density_first=density_first)
    if args.horizon is None and config.window is None:  # a demo's own growing horizon, unless windowed
        config = dataclasses.replace(config, horizon=horizon)
    status = preflight(exp, args, config)
    if status is not None:
        return status
    _, target = sysid.simulate_video(exp, truth)
    if args.perturb is None and start is not None:  # the demo's own initial guess
        import jax.numpy as jnp
        import numpy as np

        initial = {**truth, **{k: jnp.asarray(np.broadcast_to(v, np.shape(truth[k])), truth[k].dtype)
                               for k, v in start.items() if k in free}}
    else:
        low, high = args.perturb
        initial = sysid.perturbed(truth, free, seed=args.seed, low=low, high=high, free_particles=exp.free_particles)
    report = sysid.run(exp, target, initial, config, args.out, truth=truth,
                       extra={"command": f"demo {label}", "seed": args.seed, **(extra or {})})
    total = time.perf_counter() - started
    report["total_wall_time_s"] = total
    rewrite_report(report)
    print(f"total time {total:.1f} s")
    return 0


def cmd_demo_cloth(args) -> int:
    """`demo cloth`: fit the cloth's quantities (--estimate) to its rendered video.

    Args:
      args: the parsed command line (`argparse.Namespace` of the demo's subcommand).

    Returns:
      the exit status.
    """
    free = _estimates(args)
    velocity = "velocity" in free
    return _run_demo(args, "cloth", free,
                     lambda: demo_experiment(free, size=args.size, frames=args.frames, cells=args.cells,
                                             push=not args.no_push),
                     iterations=30 if velocity else 60, learning_rate=0.05, polish=10 if velocity else 15,
                     extra={"push": not args.no_push})


def _cmd_table_demo(args, default_estimate: str, defaults: dict, experiment, start=None) -> int:
    """A demo of a table (RIGID_DEMOS, FEM_DEMOS): --estimate (or `default_estimate`), the table's fit
    defaults, the scene from `experiment(demo, free, size=, frames=)`."""
    free = _estimates(args, default_estimate)
    return _run_demo(args, args.demo, free,
                     lambda: experiment(args.demo, free, size=args.size, frames=args.frames), start=start, **defaults)


def cmd_demo_rigid(args) -> int:
    """`gradsim-jax demo NAME` for a demo of `catalog.RIGID_DEMOS`; returns the exit status.

    Args:
        args: the parsed command line (args.demo: the demo's name)."""
    entry = RIGID_DEMOS[args.demo]
    fixed = {"rigid-mass": "body_mass", "rigid-restitution": "restitution"}
    return _cmd_table_demo(args, fixed.get(args.demo, entry.estimate), entry.defaults, rigid_demo_experiment)


def cmd_demo_fem(args) -> int:
    """`gradsim-jax demo NAME` for a demo of `catalog.FEM_DEMOS`; returns the exit status.

    Args:
        args: the parsed command line (args.demo: the demo's name)."""
    entry = FEM_DEMOS[args.demo]
    return _cmd_table_demo(args, entry.estimate if entry.estimate is not None else "particle_mass", entry.defaults,
                           fem_demo_experiment)


def cmd_demo_contact(args) -> int:
    """`gradsim-jax demo NAME` for a demo of `catalog.CONTACT_DEMOS`; returns the exit status.

    Args:
        args: the parsed command line (args.demo: the demo's name)."""
    entry = CONTACT_DEMOS[args.demo]
    return _cmd_table_demo(args, entry.estimate, entry.defaults, contact_demo_experiment)


def cmd_demo_ode(args) -> int:
    """`gradsim-jax demo NAME` for a demo of `catalog.ODE_DEMOS`; returns the exit status.

    Args:
        args: the parsed command line (args.demo: the demo's name)."""
    entry = ODE_DEMOS[args.demo]
    return _cmd_table_demo(args, entry.estimate, entry.defaults, ode_demo_experiment, entry.start)


def _scene_runner(name: str):
    """The runner of a demo that `scenes` runs whole (control, smoke, texture, shape), or None."""
    if name in CONTROL_DEMOS:
        from gradsim_jax.scenes.control import run_demo

        return run_demo
    if name in ("smoke-buoyancy", "smoke-shape"):
        from gradsim_jax.scenes.smoke import run_buoyancy_demo, run_shape_demo

        return run_buoyancy_demo if name == "smoke-buoyancy" else run_shape_demo
    if name == "texture":
        from gradsim_jax.scenes.texture import run_texture_demo

        return run_texture_demo
    if name == "shape":
        from gradsim_jax.scenes.shape import run_shape_demo

        return run_shape_demo
    return None


def cmd_demo_rigid_shape(args) -> int:
    # Imported here: the CLI works without that module, and a missing one is a message, not a traceback.
    """`demo rigid-shape` (`scenes.rigid_shape.run_demo`); a message when that module is missing.

    Args:
      args: the parsed command line (`argparse.Namespace` of the demo's subcommand).

    Returns:
      the exit status.
    """
    try:
        from gradsim_jax.scenes.rigid_shape import run_demo
    except ModuleNotFoundError as e:
        if e.name != "gradsim_jax.scenes.rigid_shape":
            raise
        return fail("demo rigid-shape is not available: this installation has no gradsim_jax.scenes.rigid_shape")
    return run_demo(args)


def cmd_demo_control(args) -> int:
    """`demo cloth-control`: fit the initial velocity that makes the cloth land as a target image shows.

    Args:
      args: the parsed command line (`argparse.Namespace` of the demo's subcommand).

    Returns:
      the exit status.
    """
    import numpy as np

    from gradsim_jax import sysid
    from gradsim_jax.scenes import demos

    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    v_true = np.asarray([rng.uniform(0.8, 1.6), rng.uniform(1.0, 2.0), rng.uniform(-0.6, 0.6)], np.float32)
    v_guess = np.zeros(3, np.float32)
    exp = demos.control_cloth(v_true, v_guess, size=args.size, frames=args.frames)
    status = preflight(exp, args, sysid.FitConfig(free=("velocity",), iterations=args.iterations, polish=0,
                                                   report=False))
    if status is not None:
        return status
    _, target = sysid.simulate_video(exp, {})
    _, initial_video = sysid.simulate_video(exp, {"velocity": np.broadcast_to(v_guess, np.shape(exp.state0.particles.x))})
    print(f"demo cloth-control: find the initial velocity that lands the cloth where the last frame shows "
          f"({args.size} px, {args.frames} frames)")
    v_est, result = sysid.fit_control(exp, target[-1], v_guess, iterations=args.iterations,
                                      learning_rate=args.learning_rate,
                                      checkpoint_dir=str(Path(args.out) / "checkpoint"),
                                      checkpoint_every=args.checkpoint_every, resume=args.resume,
                                      resume_anyway=args.resume_anyway, progress=not args.no_progress)
    _, fitted_video = sysid.simulate_video(exp, {"velocity": np.broadcast_to(v_est, np.shape(exp.state0.particles.x))})
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
        "wall_time_s": result.wall_time, "versions": sysid.package_versions(),
    }
    out = Path(args.out)
    paths = sysid.write_outputs(out, exp, target=target, initial_video=initial_video, fitted_video=fitted_video,
                                report=report, result=res, truth=None)
    report["outputs"] = paths
    report["total_wall_time_s"] = time.perf_counter() - started
    sysid.write_report(paths["report"], report)
    print(f"  true velocity      {np.round(v_true, 4).tolist()} m/s")
    print(f"  estimated velocity {np.round(v_est, 4).tolist()} m/s")
    print(f"  final position error: mean {errors['mean_particle_error_m'] * 1000:.2f} mm per particle, "
          f"center {errors['center_error_m'] * 1000:.2f} mm (the cloth travels {errors['travel_m']:.3f} m)")
    print(sysid.outputs_line(out, report["total_wall_time_s"]))
    return 0


def run(args) -> int:
    """Run the demo `args.demo` after the checks every demo shares (OUT can be written, the files named
    exist, --estimate's names are the demo's quantities); usage (exit 2) when none is named.

    Args:
      args: the parsed command line (`argparse.Namespace` of the demo's subcommand).

    Returns:
      the exit status, or None when no (known) demo is named.
    """
    from gradsim_jax import sysid

    if args.demo is None:
        return None
    try:
        try:
            sysid.ensure_writable_folder(args.out)
        except ValueError as e:
            raise ValueError(f"--out: {e}") from None
        message = missing_input(args)
        if message is not None:
            raise ValueError(message)
        if getattr(args, "estimate", None) is not None:
            _estimates(args)
    except ValueError as e:
        return fail(str(e))
    runner = runner_of(args.demo)
    if runner is None:
        return None
    try:  # the runners raise ValueError for what the user gave (their OUT, a picture, a run too big, ...)
        return runner(args)
    except ValueError as e:
        return fail(str(e))


def runner_of(name: str):
    """The function that runs demo `name` (`args -> exit status`), or None for no such demo. Demos of one family
    share theirs (the rigid, FEM, contact, ODE and control demos): a test of one runs the others' code.

    Args:
      name: the demo's name ("cloth", "rigid-mass", ...).

    Returns:
      the runner, or None.
    """
    families = {"cloth": cmd_demo_cloth, "cloth-control": cmd_demo_control, "rigid-shape": cmd_demo_rigid_shape,
                **dict.fromkeys(RIGID_DEMOS, cmd_demo_rigid), **dict.fromkeys(FEM_DEMOS, cmd_demo_fem),
                **dict.fromkeys(CONTACT_DEMOS, cmd_demo_contact), **dict.fromkeys(ODE_DEMOS, cmd_demo_ode)}
    return families.get(name) or _scene_runner(name)
