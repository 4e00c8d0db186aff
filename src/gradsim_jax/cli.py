"""`gradsim-jax`: recover physical parameters of a cloth from video.

    gradsim-jax demo cloth [--estimate mass,stiffness,damping] [--out runs/cloth] ...
    gradsim-jax demo cloth-control [--out runs/cloth-control] ...
    gradsim-jax demo rigid-mass | rigid-material [--estimate body_mass,body_ke,...] | rigid-restitution ...
    gradsim-jax demo rigid-shape [--out runs/rigid-shape] ...
    gradsim-jax demo fem-material [--estimate fem_mu,fem_lambda,fem_damping] | fem-mass ...
    gradsim-jax demo control-fem | control-cloth [--iterations N] [--out runs/control-fem] ...
    gradsim-jax render SCENE.toml --out target.gif      (synthetic target from the scene's [material])
    gradsim-jax fit SCENE.toml --target VIDEO [--out runs/fit] [--restarts N] ...
    gradsim-jax gradcheck | horizon SCENE.toml ...     (are the gradients right; how far are they informative)
    gradsim-jax landscape SCENE.toml --vary mass,stiffness [--span 0.5 --points 21]
    gradsim-jax --version
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gradsim_jax.cli_common import count as _count, fail as _fail, positive as _positive, preflight as _preflight

DEMO_ESTIMATES = ("velocity", "mass", "stiffness", "damping", "bending", "drag", "lift", "friction")
RIGID_MATERIAL_ESTIMATES = ("body_mass", "body_ke", "body_kd", "body_kf", "body_mu")

#: The rigid demos: (help, description, default estimate or None for a fixed one, default fit settings).
RIGID_DEMOS = {
    "rigid-mass": (
        "recover a box's mass from a rendered video (gradSim's demo_mass_known_shape)",
        "A box of known shape resting on the ground is pushed by a known force during the first frames, "
        "sliding and spinning (the push acts as F / m: it is what makes the mass visible). Fits body_mass.",
        None, {"iterations": 40, "polish": 15, "horizon": 6, "learning_rate": 0.05}),
    "rigid-material": (
        "recover a box's ground contact coefficients (penalty model: ke, kd, kf, mu) or mass",
        "A box starting level on the ground with a horizontal velocity and spin is pulled back by a known "
        "constant force (below mu m g, at mid-height so that it never tips): it slides against Coulomb "
        "friction (mu), stops and creeps back in the viscous regime at F / (4 kf) (kf); the known force "
        "separates mass from the contact coefficients, which otherwise act only as ke / m, kd / m, kf / m. "
        "Estimating only body_ke and/or body_kd, the scene is the first bounce of a level drop (where ke "
        "shows). Each coefficient alone (the others known, as in gradSim's Table 2) is "
        "recovered to below 1e-3 from 50 %% off; the joint fit of all five is ill-conditioned (see the "
        "report's identifiability section). Default: body_ke.",
        "body_ke",
        {"iterations": 80, "polish": 20, "horizon": 8, "learning_rate": 0.1}),
    "rigid-restitution": (
        "recover a box's coefficient of restitution (impulse contact model)",
        "A level cube spinning about the vertical drops onto the ground and bounces several times; each "
        "bounce's apex is e^2 times the last. Fits restitution.",
        None, {"iterations": 30, "polish": 20, "horizon": 14, "learning_rate": 0.2}),
}


#: The control demos: (help, default frames, default iterations); `gradsim_jax.scenes.control` runs them.
CONTROL_DEMOS = {
    "control-fem": ("train a policy of tet activations that makes a gear-shaped soft body crawl to the pose a "
                    "target image shows (gradSim's control_fem)", 45, 150),
    "control-cloth": ("train a policy of corner forces that throws a cloth onto the spot a target image shows "
                      "(gradSim's control_cloth, a policy instead of one initial velocity)", 40, 100),
    "control-walker": ("train a gait: a policy of tet activations that makes a four-legged soft walker walk to "
                       "the pose a target image shows (gradSim's control_walker)", 60, 100),
    "control-jellyfish": ("train a swimming stroke: a policy of bending rest angles that makes a cloth "
                          "jellyfish swim up to the height a target image shows, against quadratic drag "
                          "(gradSim's control_jellyfish)", 60, 100),
}


FEM_MATERIAL_ESTIMATES = ("fem_mu", "fem_lambda", "fem_damping")

#: The FEM soft-body demos: (help, description, default estimate or None for a fixed one, default fit settings).
FEM_DEMOS = {
    "fem-material": (
        "recover a soft body's material (FEM: shear mu, volume lambda, damping) from a rendered video",
        "A soft box of tets (stable Neo-Hookean, known density) is dropped level onto the ground: it lands, "
        "squashes, bulges and wobbles. The squash and bulge show k_lambda and k_mu, the "
        "wobble's decay k_damp (gradSim's Table 3 material experiment). Default: all three, jointly.",
        ",".join(FEM_MATERIAL_ESTIMATES), {"iterations": 40, "polish": 10, "horizon": 10, "learning_rate": 0.1,
                                           "rounds": 5, "round_iterations": 20}),
    "fem-mass": (
        "recover every particle's mass of a soft body from a rendered video (gradSim's demo_fem)",
        "A soft box of tets thrown up in free fall, each particle pushed by its own known force during the "
        "first frames (F / m per particle is what shows its mass); the material is known. Fits "
        "particle_mass (one mass per particle) and reports their mean relative error: first a density field "
        "across the body (mass = density x each particle's volume; --density-first), then every mass on its own.",
        None, {"iterations": 300, "polish": 0, "horizon": None, "learning_rate": 0.01, "density_first": 100}),
}


def demo_fit_config(free, defaults: dict, **fields):
    """The `FitConfig` of a table demo (RIGID_DEMOS, FEM_DEMOS) run with no fit flags: its fit `defaults`
    (FitConfig fields by name), the RGBA loss on every frame, and any other `fields` (progress, report, ...).
    The benchmarks fit with exactly this, so a setting added to a demo's defaults reaches them too."""
    from gradsim_jax.sysid import FitConfig

    return FitConfig(free=tuple(free), loss="rgba", frame_stride=1, **{**defaults, **fields})


def _progress_flags(p):
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in OUT/checkpoint")
    p.add_argument("--resume-anyway", action="store_true",
                   help="with --resume: continue even from a checkpoint made for another target, scene or "
                        "settings (the report records both)")
    p.add_argument("--checkpoint-every", type=_count(1), default=25, metavar="N",
                   help="write a checkpoint every N Adam iterations (default 25)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _force_flag(p):
    p.add_argument("--force", action="store_true",
                   help="run even when the estimated memory exceeds what is available")


def _fit_flags(p, *, iterations=None, polish=None):
    p.add_argument("--iterations", type=_count(0), default=iterations, metavar="N",
                   help="Adam iterations" + (f" (default {iterations})" if iterations is not None else ""))
    p.add_argument("--learning-rate", type=_positive, default=None, metavar="LR",
                   help="Adam learning rate, cosine-decayed (log space for positive quantities)")
    p.add_argument("--polish", type=_count(0), default=polish, metavar="N",
                   help="Levenberg-Marquardt steps on the pixel residuals after Adam (few free scalars)")
    p.add_argument("--rounds", type=_count(1), default=None, metavar="R",
                   help="up to R rounds of Adam then the polish: while the loss stays over 4 x the target's noise "
                        "floor (a local minimum), another round of --round-iterations Adam iterations over all "
                        "frames starts from the estimate (default 1; fem-material: 5)")
    p.add_argument("--round-iterations", type=_count(1), default=None, metavar="N",
                   help="Adam iterations of each later round (default: half of --iterations; fem-material: 20)")
    p.add_argument("--loss", choices=("rgba", "rgb", "silhouette"), default=None,
                   help="image loss (default: rgba when the target's alpha is observed: an alpha channel, a "
                        "mask or a key colour; else rgb against the render over the known background)")
    p.add_argument("--frame-stride", type=_count(1), default=None, metavar="K",
                   help="use every K-th frame in the loss")
    p.add_argument("--horizon", type=_count(1), default=None, metavar="T",
                   help="fit the first T frames first, growing to all over half the Adam iterations")
    p.add_argument("--window", type=_count(1), default=None, metavar="W",
                   help="long recordings: truncated backpropagation, each frame's gradient reaching back at most "
                        "W frames (pick W from `gradsim-jax horizon`: the marked horizon / (3 x substeps)); "
                        "the polish uses the same truncated Jacobian")


def _table_demo_parsers(demos, table: dict, estimates) -> None:
    """One `demo NAME` parser per entry of a demo table (RIGID_DEMOS, FEM_DEMOS): (help, description, default
    --estimate or None for a fixed quantity, fit defaults)."""
    for name, (summary, text, estimate, fit_defaults) in table.items():
        p = demos.add_parser(name, help=summary, description=text + " Writes the same outputs as `demo cloth` to "
                             "OUT (target/initial/fitted GIFs, comparison.mp4, loss.png, params.png, report.json).")
        if estimate is not None:
            p.add_argument("--estimate", default=estimate,
                           help=f"comma-separated quantities: {', '.join(estimates)} (default {estimate})")
        p.add_argument("--size", type=_count(1), default=64, help="image size in pixels (default 64)")
        p.add_argument("--frames", type=_count(1), default=None, help="frames to simulate (default: scene's own)")
        p.add_argument("--perturb", type=float, nargs=2, default=(0.5, 0.5), metavar=("LOW", "HIGH"),
                       help="relative offset of the initial guess from the truth (default 0.5 0.5: 50 %% off)")
        p.add_argument("--seed", type=int, default=0, help="seed of the initial perturbation (its sign)")
        p.add_argument("--out", default=f"runs/{name}", help=f"output folder (default runs/{name})")
        _fit_flags(p, iterations=fit_defaults["iterations"], polish=fit_defaults["polish"])
        if "density_first" in fit_defaults:
            first = fit_defaults["density_first"]
            p.add_argument("--density-first", type=_count(0), default=first, metavar="N",
                           help=f"first fit a density field (log-linear across the body; mass = density x "
                                f"lumped volume) in N Adam iterations (learning rate 0.1), then every mass from "
                                f"there at --learning-rate (default {first} and {fit_defaults['learning_rate']}; "
                                f"0: per-particle masses from the start)")
        _progress_flags(p)
        _force_flag(p)


def _spread(text):
    """argparse type: a finite number > 1 (the factor of the range of random starts)."""
    value = _positive(text)
    if value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number > 1 (a factor: 3 draws from x/3 to 3x), got {text}")
    return value


def _restart_flags(p):
    g = p.add_argument_group("random restarts and devices (docs/scaling.md)")
    g.add_argument("--restarts", type=_count(1), default=1, metavar="N",
                   help="fit N starts at once (the first is [initial], the others drawn around it), keep the one "
                        "of lowest final loss, fit it again through the whole pipeline and report the spread "
                        "(default 1: a single start)")
    g.add_argument("--restart-spread", type=_spread, default=3.0, metavar="S",
                   help="range of the starts: positive quantities log-uniform in [x/S, x*S], bounded ones +-ln S "
                        "in logit space, others x +- (S-1)|x| (default 3)")
    g.add_argument("--seed", type=int, default=0, help="seed of the random starts (default 0)")
    g.add_argument("--batch-mode", choices=("vmap", "map", "sequential"), default=None,
                   help="how the starts are batched: vmap, lax.map, or one after another (default: map on a "
                        "CPU, vmap on a GPU); with several devices they are split over all of them")
    g.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                   help="multi-host: address of process 0's coordinator (with --num-processes, --process-id)")
    g.add_argument("--num-processes", type=_count(1), default=None, metavar="N", help="multi-host: processes in all")
    g.add_argument("--process-id", type=_count(0), default=None, metavar="I", help="multi-host: this process's index")
    g.add_argument("--distributed", action="store_true",
                   help="multi-host: join a job described by the environment (SLURM, Open MPI) without the three "
                        "options above")


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
    cloth.add_argument("--size", type=_count(1), default=48, help="image size in pixels (default 48)")
    cloth.add_argument("--frames", type=_count(1), default=30, help="frames to simulate (default 30)")
    cloth.add_argument("--cells", type=_count(1), default=None, help="cloth cells per side (default: scene's own)")
    cloth.add_argument("--perturb", type=float, nargs=2, default=(0.3, 0.5), metavar=("LOW", "HIGH"),
                       help="relative offset of the initial guess from the truth (default 0.3 0.5)")
    cloth.add_argument("--no-push", action="store_true",
                       help="drop the known push (then mass is not separable from stiffness and damping)")
    cloth.add_argument("--seed", type=int, default=0, help="seed of the initial perturbation")
    cloth.add_argument("--out", default="runs/cloth", help="output folder (default runs/cloth)")
    _fit_flags(cloth, polish=None)
    _progress_flags(cloth)
    _force_flag(cloth)

    ctrl = demos.add_parser(
        "cloth-control", help="find the initial velocity that makes a cloth land where a target image shows",
        description="gradSim's control_cloth: optimize one initial velocity (a 3-vector) so that the last "
                    "rendered frame matches a target image rendered with a hidden velocity; reports the final "
                    "position error. Writes the same outputs as `demo cloth` to OUT.")
    ctrl.add_argument("--size", type=_count(1), default=48, help="image size in pixels (default 48)")
    ctrl.add_argument("--frames", type=_count(1), default=30, help="frames to simulate (default 30)")
    ctrl.add_argument("--iterations", type=_count(0), default=150, help="Adam iterations (default 150)")
    ctrl.add_argument("--learning-rate", type=_positive, default=0.15,
                      help="Adam learning rate, m/s (default 0.15)")
    ctrl.add_argument("--seed", type=int, default=0, help="seed of the hidden target velocity")
    ctrl.add_argument("--out", default="runs/cloth-control", help="output folder (default runs/cloth-control)")
    _progress_flags(ctrl)
    _force_flag(ctrl)

    _table_demo_parsers(demos, RIGID_DEMOS, RIGID_MATERIAL_ESTIMATES)

    shape = demos.add_parser(
        "rigid-shape", help="recover a rigid body's shape from a rendered video",
        description="Fit per-vertex offsets of a rigid body's hull to a video of the true shape moving.")
    shape.add_argument("--size", type=_count(1), default=64, help="image size in pixels (default 64)")
    shape.add_argument("--frames", type=_count(1), default=None, help="frames to simulate (default: scene's own)")
    shape.add_argument("--iterations", type=_count(0), default=None, metavar="N",
                       help="Adam iterations (default: the demo's own)")
    shape.add_argument("--smoothness", type=float, default=None,
                       help="weight of the shape smoothness prior (default: the demo's own)")
    shape.add_argument("--seed", type=int, default=0, help="seed of the initial guess")
    shape.add_argument("--out", default="runs/rigid-shape", help="output folder (default runs/rigid-shape)")
    _progress_flags(shape)
    _force_flag(shape)

    _table_demo_parsers(demos, FEM_DEMOS, FEM_MATERIAL_ESTIMATES)

    for name, (summary, frames, iterations) in CONTROL_DEMOS.items():
        p = demos.add_parser(name, help=summary, description=summary + ". Trains an explicit policy (tanh of "
                             "phase sinusoids) by gradient descent through simulation and rendering against a "
                             "target image, scores random policies, and writes untrained.gif, trained.gif, "
                             "comparison.mp4, target.png, loss.png, report.json and a resumable checkpoint "
                             "(policy + optimizer state) to OUT.")
        p.add_argument("--size", type=_count(8), default=64, help="image size in pixels (default 64)")
        p.add_argument("--frames", type=_count(1), default=None, help=f"frames to simulate (default {frames})")
        p.add_argument("--iterations", type=_count(0), default=None, metavar="N",
                       help=f"Adam iterations (default {iterations})")
        p.add_argument("--learning-rate", type=_positive, default=None, metavar="LR",
                       help="Adam learning rate, cosine-decayed (default: the demo's own)")
        p.add_argument("--random-policies", type=_count(1), default=16, metavar="N",
                       help="random policies of the baseline (default 16)")
        p.add_argument("--seed", type=int, default=0, help="seed of the initial policy (the baseline uses seed + 1)")
        p.add_argument("--out", default=f"runs/{name}", help=f"output folder (default runs/{name})")
        _progress_flags(p)
        _force_flag(p)

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
    fit.add_argument("--blur", type=_blur_mode, default=None, metavar="MODE",
                     help="a Gaussian blur of the rendered frames, for a target whose edges are softer than the "
                          "render's (a lens, another renderer): auto (fitted when they measure blurrier at the "
                          "start), fit, off, or a fixed width in pixels (default: [fit] blur, else auto; off with "
                          "--true)")
    fit.add_argument("--edge-model", choices=("auto", "fixed"), default=None,
                     help="auto: when the loss left lies on the outlines, try the other [render] coverage (box or "
                          "softras) at the estimate and continue with it if it explains the video better (default: "
                          "[fit] edge_model, else auto; fixed with --true)")
    _fit_flags(fit)
    from gradsim_jax.diagnostics.commands import parse_clip

    fit.add_argument("--clip", type=parse_clip, default=None, metavar="Q=C[,Q=C]",
                     help="clip each named quantity's Adam gradient to norm C, e.g. mass=1.0 (the report records the "
                          "norms per iteration before clipping)")
    _progress_flags(fit)
    _force_flag(fit)
    _restart_flags(fit)

    ren = sub.add_parser("render", help="render a scene file's [material] values to a video (a synthetic target)",
                         epilog=help_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ren.add_argument("scene", help="scene file (TOML)")
    ren.add_argument("--out", required=True, help="output .gif or .mp4 (or a folder: one RGBA PNG per frame)")
    _force_flag(ren)
    from gradsim_jax.diagnostics.commands import add_parsers as add_diagnostic_parsers

    add_diagnostic_parsers(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Warnings as one line for the user, without the source line Python shows by default."""
    print(f"gradsim-jax: warning: {message}", file=sys.stderr if file is None else file)


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
        density_first=(args.density_first if getattr(args, "density_first", None) is not None else density_first),
        checkpoint_dir=str(Path(args.out) / "checkpoint"),
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
        resume_anyway=args.resume_anyway,
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
        kw["bend_ke"] = 0.05
    if not push:
        kw["push"] = 0.0
    return demos.hanging_cloth(**kw)


def _estimates(args, default=None):
    """The canonical names of --estimate (or `default` for a demo without one); ValueError names the bad one."""
    from gradsim_jax import sysid

    text = getattr(args, "estimate", None) or default
    free = tuple(dict.fromkeys(sysid.canonical(n) for n in text.split(",") if n.strip()))
    if not free:
        raise ValueError("--estimate names no quantity")
    return free


def _run_demo(args, label: str, free, build, *, iterations, learning_rate, polish, horizon=None,
              extra=None, rounds=1, round_iterations=None, density_first=0) -> int:
    """One synthetic system-identification demo: check OUT, build the experiment (`build()`, ValueError is a
    usage error), render the target from its theta, perturb the free quantities by --perturb, fit, write
    every output and the total time."""
    from gradsim_jax import sysid

    try:
        sysid.ensure_writable_folder(args.out)
    except ValueError as e:
        return _fail(f"--out: {e}")
    started = time.perf_counter()
    try:
        exp = build()
    except ValueError as e:
        return _fail(str(e))
    print(f"demo {label}: estimating {', '.join(free)} ({exp.camera.height} px, {exp.frames} frames)")
    truth = dict(exp.theta)
    config = _config(args, free, iterations=iterations, learning_rate=learning_rate, polish=polish, rounds=rounds,
                     round_iterations=round_iterations, density_first=density_first)
    if args.horizon is None and config.window is None:  # a demo's own growing horizon, unless windowed
        config.horizon = horizon
    status = _preflight(exp, args, config)
    if status is not None:
        return status
    _, target = sysid.simulate_video(exp, truth)
    low, high = args.perturb
    initial = sysid.perturbed(truth, free, seed=args.seed, low=low, high=high, free_particles=exp.free_particles)
    report = sysid.run(exp, target, initial, config, args.out, truth=truth,
                       extra={"command": f"demo {label}", "seed": args.seed, **(extra or {})})
    total = time.perf_counter() - started
    report["total_wall_time_s"] = total
    _rewrite(report)
    print(f"total time {total:.1f} s")
    return 0


def cmd_demo_cloth(args) -> int:
    try:
        free = _estimates(args)
    except ValueError as e:
        return _fail(str(e))
    velocity = "velocity" in free
    return _run_demo(args, "cloth", free,
                     lambda: demo_experiment(free, size=args.size, frames=args.frames, cells=args.cells,
                                             push=not args.no_push),
                     iterations=30 if velocity else 60, learning_rate=0.05, polish=10 if velocity else 15,
                     extra={"push": not args.no_push})


def _scene_kwargs(demo: str, free, allowed, *, size, frames) -> dict:
    """Keyword arguments of a demo scene builder (size, and frames when given); ValueError when `free` names a
    quantity the demo's scene does not estimate (`allowed`; None: any)."""
    unknown = [n for n in free if allowed is not None and n not in allowed]
    if unknown:
        raise ValueError(f"demo {demo} estimates {', '.join(allowed)}; not {', '.join(unknown)}")
    return {"size": size} if frames is None else {"size": size, "frames": frames}


def rigid_demo_experiment(demo: str, free, *, size, frames=None):
    """The scene of the rigid demo `demo` ("rigid-mass", ...) estimating `free` (canonical names)."""
    from gradsim_jax.scenes import rigid

    if demo == "rigid-mass":
        return rigid.rigid_mass(**_scene_kwargs(demo, free, None, size=size, frames=frames))
    if demo == "rigid-restitution":
        return rigid.rigid_restitution(**_scene_kwargs(demo, free, None, size=size, frames=frames))
    kw = _scene_kwargs(demo, free, RIGID_MATERIAL_ESTIMATES, size=size, frames=frames)
    return rigid.rigid_material(estimate=free, **kw)


def fem_demo_experiment(demo: str, free, *, size, frames=None):
    """The scene of the FEM demo `demo` ("fem-material", "fem-mass") estimating `free` (canonical names)."""
    from gradsim_jax.scenes import fem

    if demo == "fem-mass":
        return fem.fem_mass(**_scene_kwargs(demo, free, None, size=size, frames=frames))
    kw = _scene_kwargs(demo, free, FEM_MATERIAL_ESTIMATES, size=size, frames=frames)
    return fem.fem_material(estimate=free, **kw)


def _cmd_table_demo(args, default_estimate: str, defaults: dict, experiment) -> int:
    """A demo of a table (RIGID_DEMOS, FEM_DEMOS): --estimate (or `default_estimate`), the table's fit
    defaults, the scene from `experiment(demo, free, size=, frames=)`."""
    try:
        free = _estimates(args, default_estimate)
    except ValueError as e:
        return _fail(str(e))
    return _run_demo(args, args.demo, free,
                     lambda: experiment(args.demo, free, size=args.size, frames=args.frames), **defaults)


def cmd_demo_rigid(args) -> int:
    _, _, estimate, defaults = RIGID_DEMOS[args.demo]
    fixed = {"rigid-mass": "body_mass", "rigid-restitution": "restitution"}
    return _cmd_table_demo(args, fixed.get(args.demo, estimate), defaults, rigid_demo_experiment)


def cmd_demo_fem(args) -> int:
    _, _, estimate, defaults = FEM_DEMOS[args.demo]
    return _cmd_table_demo(args, estimate if estimate is not None else "particle_mass", defaults,
                           fem_demo_experiment)


def cmd_demo_rigid_shape(args) -> int:
    # Imported here: the CLI works without that module, and a missing one is a message, not a traceback.
    try:
        from gradsim_jax.scenes.rigid_shape import run_demo
    except ModuleNotFoundError as e:
        if e.name != "gradsim_jax.scenes.rigid_shape":
            raise
        return _fail("demo rigid-shape is not available: this installation has no gradsim_jax.scenes.rigid_shape")
    return run_demo(args)


def _rewrite(report):
    from gradsim_jax.sysid import write_report

    write_report(report["outputs"]["report"], report)


def cmd_demo_control(args) -> int:
    import numpy as np

    from gradsim_jax import sysid
    from gradsim_jax.scenes import demos

    try:
        sysid.ensure_writable_folder(args.out)
    except ValueError as e:
        return _fail(f"--out: {e}")
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    v_true = np.asarray([rng.uniform(0.8, 1.6), rng.uniform(1.0, 2.0), rng.uniform(-0.6, 0.6)], np.float32)
    v_guess = np.zeros(3, np.float32)
    exp = demos.control_cloth(v_true, v_guess, size=args.size, frames=args.frames)
    status = _preflight(exp, args, sysid.FitConfig(free=("velocity",), iterations=args.iterations, polish=0,
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
        "wall_time_s": result.wall_time, "versions": sysid._versions(),
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
    print(f"outputs written to {out.resolve()}; total time {report['total_wall_time_s']:.1f} s")
    return 0


def cmd_demo_policy(args) -> int:
    """`demo control-fem | control-cloth | control-walker | control-jellyfish` (`scenes.control.run_demo`)."""
    from gradsim_jax.scenes.control import run_demo

    return run_demo(args)


def _blur_mode(text: str):
    """--blur: auto, fit, off, or a width in pixels in [0, BLUR_MAX]."""
    from gradsim_jax.render.blur import BLUR_MAX

    if text in ("auto", "fit", "off"):
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be auto, fit, off or a width in pixels, got {text!r}") from None
    if not 0.0 <= value <= BLUR_MAX:
        raise argparse.ArgumentTypeError(f"a width in pixels must be in [0, {BLUR_MAX:g}], got {text}")
    return value


def cmd_fit(args) -> int:
    """CLI arguments -> the scene-file loader (`load_fit_job`) -> preflight -> fit and report (`sysid.run`)."""
    from gradsim_jax import sysid
    from gradsim_jax.scenefile import SceneFileError, load_fit_job

    try:
        _start_distributed(args)
    except (ValueError, RuntimeError) as e:
        return _fail(str(e))
    try:
        if args.restarts > 1 and args.resume:
            raise ValueError("--resume continues a single fit; with --restarts the starts are fitted again (leave "
                             "out --resume, or --restarts)")
        try:
            sysid.ensure_writable_folder(args.out)
        except ValueError as e:
            raise ValueError(f"--out: {e}") from None
        job = load_fit_job(
            args.scene, target=args.target, mask=args.mask, key_color=args.key_color, true_values=args.true,
            iterations=args.iterations, learning_rate=args.learning_rate, polish=args.polish, rounds=args.rounds,
            round_iterations=args.round_iterations, loss=args.loss,
            frame_stride=args.frame_stride, horizon=args.horizon, window=getattr(args, "window", None), clip=args.clip,
            checkpoint_dir=str(Path(args.out) / "checkpoint"),
            checkpoint_every=args.checkpoint_every, resume=args.resume, resume_anyway=args.resume_anyway,
            progress=not args.no_progress, blur=args.blur, edge_model=args.edge_model)
    except (SceneFileError, ValueError, FileNotFoundError) as e:
        return _fail(str(e))
    frames, config = job.frames, job.config
    print(f"fit {job.spec.path}: estimating {', '.join(config.free)} from {frames.shape[0]} frames "
          f"at {frames.shape[2]} x {frames.shape[1]} px ({'; '.join(job.notes)})")
    for warning in job.warnings:
        print(f"WARNING: {warning}")
    status = _preflight(job.experiment, args, config)
    if status is not None:
        return status
    started = time.perf_counter()
    initial, extra = job.initial, job.extra
    if args.restarts > 1:
        try:
            initial, extra = _restarts(args, job)
        except ValueError as e:
            return _fail(str(e))
        if initial is None:  # not process 0 of a multi-host job: process 0 writes the outputs
            return 0
    report = sysid.run(job.experiment, frames, initial, config, args.out, truth=job.truth, extra=extra)
    report["total_wall_time_s"] = time.perf_counter() - started
    _rewrite(report)
    return 0


def _start_distributed(args) -> None:
    """Join a multi-host job when asked (--coordinator/--num-processes/--process-id or --distributed): before
    anything touches a device."""
    given = (args.coordinator, args.num_processes, args.process_id)
    if not args.distributed and all(v is None for v in given):
        return
    if args.distributed and any(v is not None for v in given):
        raise ValueError("--distributed reads the job from the environment: leave out --coordinator, "
                         "--num-processes and --process-id (or --distributed)")
    if args.restarts < 2:
        raise ValueError("several processes share the work of --restarts N (N >= 2); a single fit runs in one")
    from gradsim_jax.parallel import initialize_distributed

    info = initialize_distributed(args.coordinator, args.num_processes, args.process_id)
    print(f"process {info['process_index']} of {info['process_count']}: {info['local_devices']} local of "
          f"{info['devices']} devices")


def _restarts(args, job):
    """--restarts N: fit N starts at once (over every device of every process), print the table and return
    (the best start, the report's extra entries with the restarts' summary); (None, None) on a process other
    than 0 of a multi-host job."""
    import jax

    from gradsim_jax.parallel import batch_mesh
    from gradsim_jax.sysid.restarts import fit_restarts, table_lines

    mesh = batch_mesh() if jax.device_count() > 1 else None
    devices = f" over {jax.device_count()} devices" if mesh is not None else ""
    print(f"restarts: {args.restarts} starts within a factor {args.restart_spread:g} of [initial] (seed "
          f"{args.seed}){devices}")
    result = fit_restarts(job.experiment, job.frames, job.initial, job.config, restarts=args.restarts,
                          spread=args.restart_spread, key=jax.random.key(args.seed), mode=args.batch_mode, mesh=mesh)
    for line in table_lines(result, job.truth):
        print(line)
    best = result.best
    if best is None:
        raise ValueError(f"all {args.restarts} starts diverged: try a smaller --restart-spread or learning rate")
    if jax.process_index() != 0:
        print(f"process {jax.process_index()}: done; process 0 refits start {best} and writes the outputs")
        return None, None
    summary = result.summary(job.truth)
    summary.update(spread_factor=args.restart_spread, seed=args.seed)
    print(f"refitting start {best} (the lowest final loss, {result.fit.loss[best]:.4e}) through the whole pipeline")
    initial = dict(job.initial)
    initial.update({n: v for n, v in result.start(best).items()})
    return initial, {**job.extra, "restarts": summary}


def _check_render_out(out: Path) -> None:
    """ValueError unless the video `out` (a file, or a PNG folder when it has no suffix) can be written:
    checked before simulating, so a typo costs nothing."""
    from gradsim_jax.sysid import ensure_writable_folder

    if out.suffix and out.is_dir():
        raise ValueError(f"--out {out}: is a folder; a {out.suffix} video is a file")
    if not out.suffix and out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: is a file; without a suffix --out names a folder of PNG frames")
    try:
        ensure_writable_folder(out.parent)
    except ValueError as e:
        raise ValueError(f"--out {out}: {e}") from None


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
        _check_render_out(out)
    except (SceneFileError, ValueError) as e:
        return _fail(str(e))
    if cal is not None and cal.distorted:
        print("note: the frames are those of an ideal pinhole camera: [camera] distortion is not applied")
    status = _preflight(exp, args)
    if status is not None:
        return status
    _, frames = sysid.simulate_video(exp, {})
    try:
        write_video(out, frames, fps=1.0 / exp.frame_dt)
    except (OSError, ValueError) as e:
        return _fail(f"--out {out}: {e}")
    print(f"rendered {frames.shape[0]} frames of {spec.path} to {out}")
    return 0


def main(argv=None) -> int:
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    from gradsim_jax.fit import CheckpointError, CheckpointMismatch, FitDiverged
    from gradsim_jax.physics import SimulationDiverged
    from gradsim_jax.physics.checks import TracedCheckError

    with warnings.catch_warnings():
        # imageio-ffmpeg starts ffmpeg with a fork while JAX's threads run; ffmpeg does not touch them.
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        warnings.showwarning = _show_warning
        try:
            if args.command == "demo" and args.demo == "cloth":
                return cmd_demo_cloth(args)
            if args.command == "demo" and args.demo == "cloth-control":
                return cmd_demo_control(args)
            if args.command == "demo" and args.demo in RIGID_DEMOS:
                return cmd_demo_rigid(args)
            if args.command == "demo" and args.demo == "rigid-shape":
                return cmd_demo_rigid_shape(args)
            if args.command == "demo" and args.demo in FEM_DEMOS:
                return cmd_demo_fem(args)
            if args.command == "demo" and args.demo in CONTROL_DEMOS:
                return cmd_demo_policy(args)
            if args.command == "fit":
                return cmd_fit(args)
            if args.command == "render":
                return cmd_render(args)
            if args.command in ("gradcheck", "horizon", "landscape"):
                from gradsim_jax.diagnostics.commands import run as run_diagnostic

                return run_diagnostic(args)
        except CheckpointMismatch as e:
            return _fail(e.describe("--resume-anyway continues it regardless"))
        except (CheckpointError, FitDiverged, SimulationDiverged, TracedCheckError) as e:
            return _fail(str(e))
        except OSError as e:  # a full disk, a folder removed during the run: no traceback, the reason
            return _fail(f"{str(e.filename) + ': ' if e.filename else ''}{e.strerror or e}")
    parser.print_help() if args.command is None else parser.parse_args([args.command, "--help"])
    return 2


if __name__ == "__main__":
    sys.exit(main())
