"""What the commands of `gradsim-jax` share: argument types (`count`, `positive`, `fraction`, `spread`,
`blur_mode`, `parse_clip`), groups of flags (`fit_flags`, `progress_flags`, `force_flag`, `restart_flags`), the
one-line error (`fail`), warnings as one line (`show_warning`) and the checks before anything compiles
(`missing_input`, `preflight`). Every command's module imports them from here, never from another command's."""

from __future__ import annotations

import argparse
import math
import sys

from gradsim_jax.fit.image_losses import LOSSES


def count(least: int):
    """argparse type: an integer >= `least` (the message says what is allowed).

    Args:
        least: the smallest integer allowed.

    Returns:
        The type function: text -> int, raising argparse.ArgumentTypeError otherwise.
    """
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < least:
            allowed = "0 or more" if least == 0 else f"at least {least}"
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value

    return parse


def positive(text):
    """argparse type: a positive finite number.

    Args:
        text: the option's value as given.

    Returns:
        The number (float).

    Raises:
        argparse.ArgumentTypeError: for text that is not a positive finite number.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def fail(message: str) -> int:
    """Print the one-line error "gradsim-jax: error: MESSAGE" on stderr.

    Args:
        message: what went wrong.

    Returns:
        The exit status 2.
    """
    print(f"gradsim-jax: error: {message}", file=sys.stderr)
    return 2


def missing_input(args) -> str | None:
    """The message naming the option when --target or --mask names nothing on disk (None when both exist or
    are not given): what a loader's "no video at PATH" means on the command line.

    Args:
        args: the parsed command line (argparse.Namespace; target and mask read when present).

    Returns:
        The message, or None.
    """
    from pathlib import Path

    for option in ("target", "mask"):
        path = getattr(args, option, None)
        if path is not None and not Path(path).exists():
            return f"--{option} {path}: no such file or folder"
    return None


def fraction(text):
    """argparse type: a number in (0, 1) (a relative offset).

    Args:
        text: the option's value as given.

    Returns:
        The number (float).

    Raises:
        argparse.ArgumentTypeError: for text that is not a number in (0, 1).
    """
    value = positive(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1) (a relative offset), got {text}")
    return value


def spread(text):
    """argparse type: a finite number > 1 (the factor of the range of random starts).

    Args:
        text: the option's value as given.

    Returns:
        The number (float).

    Raises:
        argparse.ArgumentTypeError: for text that is not a finite number > 1.
    """
    value = positive(text)
    if value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number > 1 (a factor: 3 draws from x/3 to 3x), got {text}")
    return value


def blur_mode(text: str):
    """--blur: auto, fit, off, or a width in pixels in [0, BLUR_MAX].

    Args:
        text: the option's value as given.

    Returns:
        "auto", "fit", "off", or the width in pixels (float).

    Raises:
        argparse.ArgumentTypeError: for anything else.
    """
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


def parse_clip(text: str) -> dict:
    """argparse type of `fit --clip`: "mass=1.0,stiffness=0.5" -> {canonical quantity: positive float}.

    Args:
        text: the option's value as given, comma-separated QUANTITY=NORM items.

    Returns:
        {canonical quantity name: positive float}.

    Raises:
        argparse.ArgumentTypeError: for an item without "=", an unknown quantity, a norm that is not positive,
            or no item at all.
    """
    from gradsim_jax.sysid import canonical

    out = {}
    for item in (t.strip() for t in text.split(",") if t.strip()):
        name, sep, value = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected QUANTITY=NORM, got {item!r}")
        try:
            out[canonical(name)] = positive(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    if not out:
        raise argparse.ArgumentTypeError("names no quantity")
    return out


def progress_flags(p):
    """Add --resume, --resume-anyway, --checkpoint-every and --no-progress.

    Args:
        p: the argparse parser of a command.
    """
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in OUT/checkpoint")
    p.add_argument("--resume-anyway", action="store_true",
                   help="with --resume: continue even from a checkpoint made for another target, scene or "
                        "settings (the report records both)")
    p.add_argument("--checkpoint-every", type=count(1), default=25, metavar="N",
                   help="write a checkpoint every N Adam iterations (default 25)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def force_flag(p):
    """Add --force (run even when the estimated memory exceeds what is available).

    Args:
        p: the argparse parser of a command.
    """
    p.add_argument("--force", action="store_true",
                   help="run even when the estimated memory exceeds what is available")


def fit_flags(p, *, iterations=None, polish=None):
    """Add the fit's flags: --iterations, --learning-rate, --polish, --rounds, --round-iterations, --loss,
    --frame-stride, --horizon, --window, --shooting.

    Args:
        p: the argparse parser of a command.
        iterations: default of --iterations, shown in its help; None: the command picks its own.
        polish: default of --polish; None: the command picks its own.
    """
    p.add_argument("--iterations", type=count(0), default=iterations, metavar="N",
                   help="Adam iterations" + (f" (default {iterations})" if iterations is not None else ""))
    p.add_argument("--learning-rate", type=positive, default=None, metavar="LR",
                   help="Adam learning rate, cosine-decayed (log space for positive quantities)")
    p.add_argument("--polish", type=count(0), default=polish, metavar="N",
                   help="Levenberg-Marquardt steps on the pixel residuals after Adam (few free scalars)")
    p.add_argument("--rounds", type=count(1), default=None, metavar="R",
                   help="up to R rounds of Adam then the polish: while the loss stays over 4 x the target's noise "
                        "floor (a local minimum), another round of --round-iterations Adam iterations over all "
                        "frames starts from the estimate (default 1; fem-material: 5)")
    p.add_argument("--round-iterations", type=count(1), default=None, metavar="N",
                   help="Adam iterations of each later round (default: half of --iterations; fem-material: 20)")
    p.add_argument("--loss", choices=LOSSES, default=None,
                   help="image loss (default: rgba when the target's alpha is observed: an alpha channel, a "
                        "mask or a key colour; else rgb against the render over the known background)")
    p.add_argument("--frame-stride", type=count(1), default=None, metavar="K",
                   help="use every K-th frame in the loss")
    p.add_argument("--horizon", type=count(1), default=None, metavar="T",
                   help="fit the first T frames first, growing to all over half the Adam iterations")
    p.add_argument("--window", type=count(1), default=None, metavar="W",
                   help="long recordings: truncated backpropagation, each frame's gradient reaching back at most "
                        "W frames (pick W from `gradsim-jax horizon`: the marked horizon / (3 x substeps)); "
                        "the polish uses the same truncated Jacobian")
    p.add_argument("--shooting", choices=("truncated", "multiple"), default=None,
                   help="with --window: truncated backpropagation (default) or multiple shooting (each window from "
                        "its own start state, read off the video and fitted with the quantities; the polish then "
                        "takes Gauss-Newton steps on all of them for an ODE body's small states)")


def restart_flags(p):
    """Add the group of random restarts and devices: --restarts, --restart-spread, --seed, --batch-mode,
    --coordinator, --num-processes, --process-id, --distributed.

    Args:
        p: the argparse parser of a command.
    """
    g = p.add_argument_group("random restarts and devices (docs/howto/scaling.md)")
    g.add_argument("--restarts", type=count(1), default=1, metavar="N",
                   help="fit N starts at once (the first is [initial], the others drawn around it), keep the one "
                        "of lowest final loss, fit it again through the whole pipeline and report the spread "
                        "(default 1: a single start)")
    g.add_argument("--restart-spread", type=spread, default=3.0, metavar="S",
                   help="range of the starts: positive quantities log-uniform in [x/S, x*S], bounded ones +-ln S "
                        "in logit space, others x +- (S-1)|x| (default 3)")
    g.add_argument("--seed", type=int, default=0, help="seed of the random starts (default 0)")
    g.add_argument("--batch-mode", choices=("vmap", "map", "sequential"), default=None,
                   help="how the starts are batched: vmap, lax.map, or one after another (default: map on a "
                        "CPU, vmap on a GPU); with several devices they are split over all of them")
    g.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                   help="multi-host: address of process 0's coordinator (with --num-processes, --process-id)")
    g.add_argument("--num-processes", type=count(1), default=None, metavar="N", help="multi-host: processes in all")
    g.add_argument("--process-id", type=count(0), default=None, metavar="I", help="multi-host: this process's index")
    g.add_argument("--distributed", action="store_true",
                   help="multi-host: join a job described by the environment (SLURM, Open MPI) without the three "
                        "options above")


def show_warning(message, category, filename, lineno, file=None, line=None):
    """Warnings as one line for the user, without the source line Python shows by default.

    Args:
        message: the warning (its text is printed).
        category: the warning's class (not shown).
        filename: the file that warned (not shown).
        lineno: its line (not shown).
        file: the stream written to; None: stderr.
        line: the source line (not shown).
    """
    print(f"gradsim-jax: warning: {message}", file=sys.stderr if file is None else file)


def rewrite_report(report):
    """Write `report` again to its own report.json (report["outputs"]["report"]).

    Args:
        report: the run's report dict, with its outputs' paths.
    """
    from gradsim_jax.sysid import write_report

    write_report(report["outputs"]["report"], report)


#: Estimates above these are printed before a run starts.
BIG_RUN_BYTES = 2**30

BIG_RUN_SECONDS = 120.0

def preflight(exp, args, config=None):
    """Before anything compiles: warn when the scene starts in deep ground contact (or its contact is too
    stiff for the step); print the memory and time estimate of a big run, and refuse (exit status 2) one
    that needs more memory than is available, unless --force. Returns an exit status, or None to go on.
    `config`: the FitConfig of a fit (None: a forward simulation and render only).

    Args:
        exp: the `Experiment` to run.
        args: the parsed command line (argparse.Namespace; force read).
        config: the `FitConfig` of a fit; None: a forward simulation and render only.

    Returns:
        2 (after the one-line error) when the run needs more memory than is available, else None.
    """
    import numpy as np

    from gradsim_jax.physics import available_memory_bytes, contact_report, estimate_cost
    from gradsim_jax.physics.impulse_contact import contact_pair_rounds
    from gradsim_jax.physics.cost import human_bytes
    from gradsim_jax.sysid import LM_MAX_SCALARS, REPORT_MAX_SCALARS

    contact = contact_report(exp.topology, exp.params, exp.state0, dt=exp.frame_dt / exp.substeps)
    if contact.message and exp.integrator.contact is None:  # impulses: no penalty spring
        print(f"WARNING: {contact.message}")
    kw = {}
    if config is not None:
        scalars = sum(int(np.size(exp.theta[n])) if n in exp.theta else 6 for n in config.free)
        loss_frames = len(range(1, exp.frames + 1, config.frame_stride))
        dense = ((config.polish > 0 and scalars <= LM_MAX_SCALARS)
                 or (config.report and scalars <= REPORT_MAX_SCALARS))
        kw = dict(gradient=True, iterations=config.iterations, frames_rendered=loss_frames,
                  dense_frames=loss_frames if dense else 0, dense_columns=scalars if dense else 0,
                  dense_passes=max(config.polish, 0) + bool(config.report))
    itemsize = np.dtype(exp.dtype).itemsize
    est = estimate_cost(exp.topology, exp.frames, exp.substeps, render_size=(exp.camera.height, exp.camera.width),
                        tile_capacity=exp.settings.tile_capacity, pixel_capacity=exp.settings.pixel_capacity,
                        itemsize=itemsize, step_cost=exp.integrator.step_cost(),
                        contact_pair_rounds=contact_pair_rounds(exp.integrator, exp.topology), **kw)
    available = available_memory_bytes()
    if available is not None and est.memory_bytes > available and not args.force:
        return fail(f"this run would need about {human_bytes(est.memory_bytes)} of memory, more than the "
                     f"{human_bytes(available)} available ({est.text}). Use a coarser grid, fewer frames or "
                     "pixels, or [render] tile_capacity and pixel_capacity; --force runs it anyway")
    if est.memory_bytes > BIG_RUN_BYTES or est.seconds > BIG_RUN_SECONDS:
        print(f"estimate: {est.text}")
    return None
