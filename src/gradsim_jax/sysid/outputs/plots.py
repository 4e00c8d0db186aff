"""The plots beside a fit's report: the loss curve (`plot_loss`) and the quantities against the iterations
(`plot_params`), saved atomically (`save_figure`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from gradsim_jax.files import atomic_file
from gradsim_jax.sysid.quantities import QUANTITIES
from gradsim_jax.sysid.outputs.report import relative_error


def save_figure(fig, path) -> Path:
    """fig.savefig to `path` atomically (PNG); returns `path` as a Path.

    Args:
        fig: a matplotlib Figure.
        path: the PNG file to write."""
    with atomic_file(path) as temporary:
        fig.savefig(temporary, format="png")
    return Path(path)


def plot_loss(path, history: dict) -> Path:
    """The image loss per iteration (log scale, one line per stage) as a PNG; returns the path.

    Args:
        path: the PNG file to write.
        history: the fit's history ("iteration", "loss", optional "stage" and "density_first")."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    it, loss = np.asarray(history["iteration"]), np.asarray(history["loss"])
    stages = np.asarray(history.get("stage", ["adam"] * len(it)))
    # One line per contiguous stage (a fit of several rounds alternates Adam and LM), one legend entry each.
    cuts = np.flatnonzero(stages[1:] != stages[:-1]) + 1
    colors = {"adam": "C0", "lm": "C1"}
    labelled = set()
    for run in np.split(np.arange(it.size), cuts):
        if run.size == 0:
            continue
        stage = str(stages[run[0]])
        ax.semilogy(it[run], np.maximum(loss[run], 1e-30), "o-" if stage == "lm" else "-", color=colors.get(stage),
                    label=None if stage in labelled else ("LM" if stage == "lm" else "Adam"))
        labelled.add(stage)
    first = (history.get("density_first") or {}).get("losses")
    if first:  # `FitConfig.density_first`: its stage ran before iteration 0
        ax.semilogy(np.arange(-len(first), 0), np.maximum(np.asarray(first, np.float64), 1e-30), "-", color="C2",
                    label="density field (Adam)")
        ax.axvline(0.0, color="0.6", lw=0.8)
    ax.set_xlabel("iteration" + (" (the density field's before 0)" if first else ""))
    ax.set_ylabel("image loss")
    if it.size or first:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no iterations", ha="center", va="center", transform=ax.transAxes)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_params(path, history: dict, truth: Optional[dict], free_particles=None) -> Path:
    """Each estimated quantity vs iteration, with the true value as a dashed line (velocity: its mean
    relative error instead), as a PNG; returns the path.

    Args:
        path: the PNG file to write.
        history: the fit's history ("iteration", "params": {name: [value per iteration]}).
        truth: {quantity name: value}, the true values, or None.
        free_particles: [n] bool, the particles the velocity error is averaged over (None: all)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = list(history["params"])
    fig = Figure(figsize=(5 * max(1, len(names)), 3.6), dpi=100)
    FigureCanvasAgg(fig)
    it = np.asarray(history["iteration"])
    for k, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), k + 1)
        values = history["params"][name]
        q = QUANTITIES.get(name)
        if not values:
            ax.text(0.5, 0.5, "no iterations", ha="center", va="center", transform=ax.transAxes)
            ax.set_ylabel(name)
        elif name == "velocity" and truth is not None and np.ndim(values[0]) > 0:
            errs = [relative_error(name, v, truth[name], free_particles) for v in values]
            ax.semilogy(it, errs)
            ax.set_ylabel("mean relative error of velocity")
        elif np.ndim(values[0]) == 0:
            ax.plot(it, values, label="estimate")
            if truth is not None and name in truth:
                ax.axhline(float(np.mean(np.asarray(truth[name]))), color="k", ls="--", label="true")
            ax.set_ylabel(f"{name} [{q.unit if q else ''}]")
            ax.legend()
        else:
            ax.plot(it, [float(np.mean(v)) for v in values])
            ax.set_ylabel(f"mean {name}")
        ax.set_xlabel("iteration")
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)
