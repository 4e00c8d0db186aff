"""What the command line's commands share: argument types (`count`, `positive`), the one-line error
(`fail`) and the checks before anything compiles (`preflight`). The commands' modules (`gradsim_jax.cli`,
`gradsim_jax.diagnostics.commands`) import them from here, never from each other."""

from __future__ import annotations

import argparse
import math
import sys


def count(least: int):
    """argparse type: an integer >= `least` (the message says what is allowed)."""
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
    """argparse type: a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def fail(message: str) -> int:
    print(f"gradsim-jax: error: {message}", file=sys.stderr)
    return 2


#: Estimates above these are printed before a run starts.
BIG_RUN_BYTES = 2**30
BIG_RUN_SECONDS = 120.0


def preflight(exp, args, config=None):
    """Before anything compiles: warn when the scene starts in deep ground contact (or its contact is too
    stiff for the step); print the memory and time estimate of a big run, and refuse (exit status 2) one
    that needs more memory than is available, unless --force. Returns an exit status, or None to go on.
    `config`: the FitConfig of a fit (None: a forward simulation and render only)."""
    import numpy as np

    from gradsim_jax.physics import available_memory_bytes, contact_report, estimate_cost
    from gradsim_jax.physics.cost import human_bytes
    from gradsim_jax.sysid import LM_MAX_SCALARS, REPORT_MAX_SCALARS

    contact = contact_report(exp.topology, exp.params, exp.state0, dt=exp.frame_dt / exp.substeps)
    if contact.message:
        print(f"WARNING: {contact.message}")
    kw = {}
    if config is not None:
        scalars = sum(int(np.size(exp.theta[n])) if n in exp.theta else 6 for n in config.free)
        loss_frames = len(range(1, exp.frames + 1, config.frame_stride))
        dense = ((config.polish > 0 and scalars <= LM_MAX_SCALARS)
                 or (config.report and scalars <= REPORT_MAX_SCALARS))
        kw = dict(gradient=True, iterations=config.iterations, frames_rendered=loss_frames,
                  dense_frames=loss_frames if dense else 0, dense_columns=scalars if dense else 0)
    itemsize = np.dtype(exp.dtype).itemsize
    est = estimate_cost(exp.topology, exp.frames, exp.substeps, render_size=(exp.camera.height, exp.camera.width),
                        tile_capacity=exp.settings.tile_capacity, pixel_capacity=exp.settings.pixel_capacity,
                        itemsize=itemsize, **kw)
    available = available_memory_bytes()
    if available is not None and est.memory_bytes > available and not args.force:
        return fail(f"this run would need about {human_bytes(est.memory_bytes)} of memory, more than the "
                     f"{human_bytes(available)} available ({est.text}). Use a coarser grid, fewer frames or "
                     "pixels, or [render] tile_capacity and pixel_capacity; --force runs it anyway")
    if est.memory_bytes > BIG_RUN_BYTES or est.seconds > BIG_RUN_SECONDS:
        print(f"estimate: {est.text}")
    return None
