"""The files a fit writes into its output folder (`FIT_OUTPUTS`: videos, plots, report.json, report.html), the
check that a resumed fit keeps its inputs, and the line that names them; every file written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

from gradsim_jax.sysid.experiment import Experiment
from gradsim_jax.sysid.config import SysIdResult
from gradsim_jax.sysid.outputs.plots import plot_loss, plot_params
from gradsim_jax.sysid.outputs.report import write_report


#: The files a fit writes in its output folder (`write_outputs`, `write_report`), besides its checkpoint folder.
FIT_OUTPUTS = ("target.gif", "initial.gif", "fitted.gif", "comparison.mp4", "loss.png", "params.png", "report.json",
               "report.html")


def check_inputs_kept(out_dir, inputs: dict) -> None:
    """ValueError, before a fit starts, when writing its outputs in `out_dir` would overwrite or change one of its
    `inputs`: a file of FIT_OUTPUTS' names in `out_dir`, anything in its checkpoint folder, or a folder of frames
    that is `out_dir` itself.

    Args:
        out_dir: the output folder.
        inputs: {what the user calls it, e.g. "--target": path or None}."""
    out = Path(out_dir).resolve()
    for option, path in inputs.items():
        if path is None:
            continue
        given = Path(path).resolve()
        clash = (given == out or given.parent == out and given.name in FIT_OUTPUTS
                 or out / "checkpoint" in given.parents)
        if clash:
            what = "is the output folder" if given == out else "lies where the fit writes its outputs"
            raise ValueError(f"{option} {path} {what} ({out}): the fit would overwrite it; pass another --out")


def write_outputs(out_dir, exp: Experiment, *, target: np.ndarray, initial_video: np.ndarray,
                  fitted_video: np.ndarray, report: dict, result: SysIdResult, truth: Optional[dict]) -> dict:
    """Write target.gif, initial.gif, fitted.gif, comparison.mp4, loss.png, params.png, report.json, each
    atomically (a temporary file in `out_dir`, then renamed over the old one); returns {kind: path as str}.

    Args:
        out_dir: the output folder (created when missing).
        exp: the experiment (its frame_dt s sets the videos' frame rate, at most 50 per s).
        target: [T, H, W, 4], the target video.
        initial_video: [T, H, W, 4], the video of the initial guess.
        fitted_video: [T, H, W, 4], the video of the estimate.
        report: the report dict (`build_report`).
        result: the fit's `SysIdResult` (its history is plotted).
        truth: {quantity name: value}, the true values drawn in params.png, or None."""
    from gradsim_jax.render.video import write_comparison, write_gif

    out = ensure_writable_folder(out_dir)
    fps = min(50.0, 1.0 / exp.frame_dt)
    target_gif, initial_gif, fitted_gif, comparison = FIT_OUTPUTS[:4]
    paths = {
        "target": write_gif(out / target_gif, target, fps),
        "initial": write_gif(out / initial_gif, initial_video, fps),
        "fitted": write_gif(out / fitted_gif, fitted_video, fps),
        "comparison": write_comparison(out / comparison, [target, initial_video, fitted_video],
                                       ["target", "initial", "fitted"], fps=fps),
    }
    paths["loss"] = plot_loss(out / "loss.png", result.history)
    paths["params"] = plot_params(out / "params.png", result.history, truth, exp.free_particles)
    paths["report"] = write_report(out / "report.json", report)
    return {k: str(v) for k, v in paths.items()}


def outputs_line(out_dir, seconds: Optional[float] = None) -> str:
    """The line a command ends with: the folder, every file written in it (sorted; the checkpoint folder is left
    out), the page to open first (report.html, where there is one) and the total time where given.

    Args:
        out_dir: the output folder.
        seconds: s, the command's total time (None: left out)."""
    out = Path(out_dir)
    names = sorted(p.name for p in out.iterdir() if p.is_file() and not p.name.startswith("."))
    line = f"outputs written to {out.resolve()}: {', '.join(names)}"
    if "report.html" in names:
        line += " (open report.html)"
    return line if seconds is None else f"{line}; total time {seconds:.1f} s"


def ensure_writable_folder(folder) -> Path:
    """Create `folder` if needed and write and delete a probe file in it, so that a fit learns it cannot
    save its results before it starts rather than after; ValueError naming the folder otherwise. Returns it as a Path.

    Args:
        folder: the folder's path."""
    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"cannot write in {folder}: {existing} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"cannot write in {folder}: {e.strerror or e}") from None
    return folder
