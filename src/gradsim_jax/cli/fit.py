"""`gradsim-jax fit SCENE.toml --target VIDEO`: one trip down the layers. The arguments, the scene file read as
plain data and the target loaded (`scenefile.load_fit_job`: parse, then build the scene, camera and
experiment), the preflight, then the fit and its report (`sysid.run`), or N random restarts first
(`sysid.restarts`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gradsim_jax.cli.args import (blur_mode, fail, fit_flags, force_flag, missing_input, parse_clip,
                                  preflight, progress_flags, restart_flags, rewrite_report)


def add_parser(sub) -> None:
    """`fit` on `gradsim-jax`'s subparsers.

    Args:
        sub: the subparsers action of `gradsim-jax`'s parser (`add_subparsers`).
    """
    from gradsim_jax.scenefile import help_text

    fit = sub.add_parser("fit", help="fit a scene file (cloth, rigid bodies, soft bodies) to a target video",
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
    fit.add_argument("--blur", type=blur_mode, default=None, metavar="MODE",
                     help="a Gaussian blur of the rendered frames, for a target whose edges are softer than the "
                          "render's (a lens, another renderer): auto (fitted when they measure blurrier at the "
                          "start), fit, off, or a fixed width in pixels (default: [fit] blur, else auto; off with "
                          "--true)")
    fit.add_argument("--edge-model", choices=("auto", "fixed"), default=None,
                     help="auto: when the loss left lies on the outlines, try the other [render] coverage (box or "
                          "softras) at the estimate and continue with it if it explains the video better (default: "
                          "[fit] edge_model, else auto; fixed with --true)")
    fit_flags(fit)
    fit.add_argument("--clip", type=parse_clip, default=None, metavar="Q=C[,Q=C]",
                     help="clip each named quantity's Adam gradient to norm C, e.g. mass=1.0 (the report records the "
                          "norms per iteration before clipping)")
    progress_flags(fit)
    force_flag(fit)
    restart_flags(fit)



def run(args) -> int:
    """CLI arguments -> the scene-file loader (`load_fit_job`) -> preflight -> fit and report (`sysid.run`), with
    SIGTERM turned into a checkpoint at the next iteration boundary and a clean stop (`fit.checkpoint.preemptible`).

    Args:
        args: the parsed command line (argparse.Namespace of the fit parser).

    Returns:
        The exit status: 0 (also on a process other than 0 of a multi-host job), 2 after a one-line error, or
        `EXIT_PREEMPTED` (143) after SIGTERM once the checkpoint is written.
    """
    from gradsim_jax.fit.checkpoint import EXIT_PREEMPTED, Preempted, preemptible

    try:
        _start_distributed(args)  # first: jax's preemption notifier takes SIGTERM over when it starts
    except (ValueError, RuntimeError) as e:
        return fail(str(e))
    try:
        with preemptible():
            return _run(args)
    except Preempted as e:
        print(f"gradsim-jax fit: {e}", flush=True)
        return EXIT_PREEMPTED


def _run(args) -> int:
    """`run` under the SIGTERM handler, after joining a multi-host job."""
    from gradsim_jax import sysid
    from gradsim_jax.scenefile import SceneFileError, load_fit_job
    from gradsim_jax.scenefile.capacities import capacity_hint

    try:
        try:
            sysid.ensure_writable_folder(args.out)
        except ValueError as e:
            raise ValueError(f"--out: {e}") from None
        job = load_fit_job(
            args.scene, target=args.target, mask=args.mask, out_dir=args.out, key_color=args.key_color,
            true_values=args.true,
            iterations=args.iterations, learning_rate=args.learning_rate, polish=args.polish, rounds=args.rounds,
            round_iterations=args.round_iterations, loss=args.loss,
            frame_stride=args.frame_stride, horizon=args.horizon, window=getattr(args, "window", None),
            shooting=getattr(args, "shooting", None), clip=args.clip,
            checkpoint_dir=str(Path(args.out) / "checkpoint"),
            checkpoint_every=args.checkpoint_every, resume=args.resume, resume_anyway=args.resume_anyway,
            progress=not args.no_progress, blur=args.blur, edge_model=args.edge_model)
    except (SceneFileError, ValueError) as e:
        return fail(str(e))
    except FileNotFoundError as e:
        return fail(missing_input(args) or str(e))
    frames, config = job.frames, job.config
    print(f"fit {job.spec.path}: estimating {', '.join(config.free)} from {frames.shape[0]} frames "
          f"at {frames.shape[2]} x {frames.shape[1]} px ({'; '.join(job.notes)})")
    for warning in job.warnings:
        print(f"WARNING: {warning}")
    hint = capacity_hint(job.experiment)
    if hint:  # a large scene rendered exactly: what smaller capacities are worth
        print(f"hint: {hint}")
    status = preflight(job.experiment, args, config)
    if status is not None:
        return status
    started = time.perf_counter()
    initial, extra = job.initial, job.extra
    if args.restarts > 1:
        from gradsim_jax.fit.checkpoint import CheckpointError

        try:
            initial, extra = _restarts(args, job)
        except (ValueError, CheckpointError) as e:
            return fail(str(e))
        if initial is None:  # not process 0 of a multi-host job: process 0 writes the outputs
            return 0
        config = _refit_config(config)
    report = sysid.run(job.experiment, frames, initial, config, args.out, truth=job.truth, extra=extra)
    report["total_wall_time_s"] = time.perf_counter() - started
    rewrite_report(report)
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


def _refit_config(config):
    """The refit's settings after --restarts: with --resume, it resumes only when it had written a checkpoint (a run
    stopped during the restarts' stage had not: the refit then starts fresh)."""
    import dataclasses

    from gradsim_jax.fit.checkpoint import checkpoint_path

    if config.resume and not Path(checkpoint_path(config.checkpoint_dir)).exists():
        return dataclasses.replace(config, checkpoints=dataclasses.replace(config.checkpoints, resume=False))
    return config


def _restart_checkpoints(args, mode: str):
    """The batched stage's `Checkpoints` (OUT/checkpoint/restarts), or None for mode "sequential" (one member
    after another: no common iteration to checkpoint)."""
    from gradsim_jax.fit.checkpoint import checkpoint_path
    from gradsim_jax.fit.options import Checkpoints

    if mode == "sequential":
        print("note: --batch-mode sequential writes no checkpoint of the restarts' stage (--resume refits the starts)")
        return None
    folder = Path(args.out) / "checkpoint" / "restarts"
    resume = args.resume and Path(checkpoint_path(str(folder))).exists()
    if args.resume and not resume:
        print(f"note: no checkpoint of the restarts in {folder}: the starts are fitted from the beginning")
    return Checkpoints(dir=str(folder), every=args.checkpoint_every, resume=resume, resume_anyway=args.resume_anyway)


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
    from gradsim_jax.sysid.restarts import batch_mode

    mode = batch_mode(args.batch_mode)
    result = fit_restarts(job.experiment, job.frames, job.initial, job.config, restarts=args.restarts,
                          spread=args.restart_spread, key=jax.random.key(args.seed), mode=mode, mesh=mesh,
                          checkpoints=_restart_checkpoints(args, mode))
    if result.fit.resume is not None:
        print(f"restarts: resumed from {result.fit.resume['checkpoint']} at iteration "
              f"{result.fit.resume['from_iteration']}")
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
