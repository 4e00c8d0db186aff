"""The one report writer of a fit: report.json (values, errors, convergence, identifiability, inputs,
versions), the videos and plots beside it, and the console summary; every file written atomically."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.files import atomic_file
from gradsim_jax.sysid.report_html import write_html
from gradsim_jax.render.camera import rotation_from_rvec
from gradsim_jax.physics.ode import EDRIFT, energy_drift, ode_trajectory
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, rollout
from gradsim_jax.sysid.config import SysIdResult
from gradsim_jax.sysid.quantities import QUANTITIES, canonical, canonical_theta


def relative_error(name: str, estimate, truth, free_particles=None) -> float:
    """|est - true| / |true| for scalars (a float, 1 = 100 %); for "velocity" the mean over free particles of
    |v_est - v_true| / |v_true| (gradSim's Table 3 metric); for another array (per-particle masses) the mean
    of the elements' relative errors (over the free particles when it has one per particle).

    Args:
        name: the quantity's canonical name ("camera_pose": the relative error of its six numbers, see `pose_error`).
        estimate: the estimated value (scalar or array), in the quantity's unit.
        truth: the true value, same unit.
        free_particles: [n] bool, the free particles (None: all)."""
    est, tru = np.asarray(estimate, np.float64), np.asarray(truth, np.float64)
    if name == "camera_pose":  # |pose_est - pose_true| / |pose_true| over the six numbers; see pose_error
        return float(np.linalg.norm(est - tru) / max(np.linalg.norm(tru), 1e-300))
    if name == "velocity":
        sel = slice(None) if free_particles is None else np.asarray(free_particles)
        num = np.linalg.norm(est[sel] - tru[sel], axis=-1)
        den = np.maximum(np.linalg.norm(tru[sel], axis=-1), 1e-12)
        return float(np.mean(num / den))
    if est.ndim > 0 or tru.ndim > 0:  # a per-element quantity (per-particle masses): the mean of the elements'
        est, tru = np.broadcast_arrays(est, tru)  # errors (a one-element array, a pendulum's length, too)
        rel = np.abs(est - tru) / np.maximum(np.abs(tru), 1e-300)
        if free_particles is not None and rel.shape[:1] == np.shape(free_particles):
            rel = rel[np.asarray(free_particles)]
        return float(np.mean(rel))
    return float(abs(est - tru) / max(abs(tru), 1e-300))


def pose_error(estimate, truth) -> dict:
    """Angle (degrees) between two camera poses and the distance (m) between their centres (dict).

    Args:
        estimate: [6], the estimated pose: rvec [3] rad (axis-angle), tvec [3] m (OpenCV's convention).
        truth: [6], the true pose, likewise."""
    est, tru = np.asarray(estimate, np.float64), np.asarray(truth, np.float64)
    r_est = np.asarray(rotation_from_rvec(jnp.asarray(est[:3])), np.float64)
    r_tru = np.asarray(rotation_from_rvec(jnp.asarray(tru[:3])), np.float64)
    cos = np.clip((np.trace(r_est @ r_tru.T) - 1.0) / 2.0, -1.0, 1.0)
    centre = np.linalg.norm(r_est.T @ est[3:] - r_tru.T @ tru[3:])
    return {"rotation_deg": float(np.degrees(np.arccos(cos))), "centre_m": float(centre)}


def _summary(value):
    value = np.asarray(value)
    return float(value) if value.ndim == 0 else value.tolist()


def package_versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("gradsim-jax", "jax", "jaxlib", "optax", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def build_report(exp: Experiment, free, truth: Optional[dict], initial: dict, result: SysIdResult,
                 extra: Optional[dict] = None) -> dict:
    """The report.json dictionary: values, relative errors, iterations, wall time, identifiability, versions.

    Args:
        exp: the experiment fitted.
        free: names of the fitted quantities.
        truth: {quantity name: value}, the true values when known (relative errors), or None.
        initial: {quantity name: value}, the initial guess.
        result: the fit's `SysIdResult`.
        extra: entries added to the dictionary last, or None."""
    free = tuple(canonical(n) for n in free)
    initial = canonical_theta(initial)
    truth = None if truth is None else canonical_theta(truth)
    report = {
        "experiment": exp.name,
        "free": list(free),
        "frames": exp.frames, "substeps": exp.substeps, "frame_dt": exp.frame_dt,
        "image_size": [exp.camera.height, exp.camera.width],
        "estimated": {n: _summary(result.theta[n]) for n in free},
        "initial": {n: _summary(initial[n]) for n in free},
        "units": {n: QUANTITIES[n].unit for n in free},
        "iterations": {"adam": result.adam_iterations, "levenberg_marquardt": result.lm_iterations,
                       "rounds": int(result.history.get("rounds", 1)),
                       "best_round": int(result.history.get("best_round", 1))},
        "final_loss": result.loss,
        "wall_time_s": result.wall_time,
        # `FitConfig.density_first`: its density field stage (`identify._density_first`), or None.
        "density_first": result.history.get("density_first"),
        # `FitConfig.blur` and `edge_model`: what was measured and decided about the target's edges, the blur
        # fitted (pixels), the edge model the estimate renders with, and where the loss left lies.
        "edges": {"blur": result.history.get("blur"),
                  "blur_px": (float(np.asarray(result.theta["blur"])) if "blur" in result.theta else None),
                  "coverage": (result.experiment or exp).settings.coverage,
                  "edge_model": result.history.get("edge_model"), "residual": result.history.get("edges")},
        # The fit ended above its start's loss and returned the start (`identify`).
        "kept_start": bool(result.history.get("kept_start", False)),
        "versions": package_versions(),
    }
    if truth is not None:
        report["true"] = {n: _summary(truth[n]) for n in free}
        report["relative_error"] = {
            n: relative_error(n, result.theta[n], truth[n], exp.free_particles) for n in free
        }
        report["initial_relative_error"] = {
            n: relative_error(n, initial[n], truth[n], exp.free_particles) for n in free
        }
    conv = result.convergence
    report["convergence"] = conv.as_dict() if conv is not None else None
    if "camera_pose" in free and truth is not None:
        report["camera_pose_error"] = pose_error(result.theta["camera_pose"], truth["camera_pose"])
    rep = result.report
    if rep is not None:
        report["identifiability"] = {
            # Curvature at a point that is not the solution says nothing about the solution.
            "valid": bool(conv is None or conv.converged),
            "condition_number": rep.condition_number if np.isfinite(rep.condition_number) else None,
            "identifiable": rep.identifiable,
            "unidentifiable_combinations": list(rep.unidentifiable),
            "labels": list(rep.labels),
            "stderr_scaled": [float(s) if np.isfinite(s) else None for s in rep.stderr],
            "stderr_physical": [float(s) if np.isfinite(s) else None for s in rep.stderr_physical],
            "eigenvalues": [float(e) for e in rep.eigenvalues],
        }
    else:
        report["identifiability"] = None
    report["gradient_norms"] = gradient_norms(result.history)
    # Iterations whose update reached a non-finite loss or gradient and was redone at half length (gs.fit).
    report["backoffs"] = [int(i) for i in result.history.get("backoffs", [])]
    # An ODE body's energy over the fitted motion and its solver's drift (gradSim's check), or None.
    report["energy"] = energy_report(result.experiment or exp, result.theta)
    report["inputs"] = result.inputs
    report["resume"] = result.resume
    if extra:
        report.update(extra)
    return report


def _ode_motions(exp: Experiment, theta: dict):
    """(ODE params, world, its motion [frames + 1], the conservative twin's params and motion, or None twice)."""
    params, traj = rollout(exp, theta)
    twin = exp.topology.ode.system.conservative(params.ode)
    if twin is None:
        return params.ode, params.world, traj.ode, None, None
    y0 = jax.tree.map(lambda a: a[0], traj.ode)
    return (params.ode, params.world, traj.ode, twin,
            ode_trajectory(exp.topology.ode, twin, params.world, y0, exp.frames, exp.frame_dt, exp.substeps))


def energy_report(exp: Experiment, theta: dict) -> Optional[dict]:
    """The energy of an ODE body's motion at `theta`, the way gradSim checks its double pendulum: per body the
    initial and final energy and max_t |E(t) - E(0)| of the fitted motion (joint damping, lost restitution and
    friction included: it falls by design), and the same of its conservative twin (`OdeSystem.conservative`:
    the same start with no dissipation), whose drift is the solver's alone, with gradSim's limit `EDRIFT`
    (0.05 J). None when the scene has no ODE body or its system has no energy.

    Args:
        exp: the experiment.
        theta: {quantity name: value}, missing entries from the experiment's defaults."""
    if exp.topology.ode is None or getattr(exp.topology.ode.system, "energy", None) is None:
        return None
    ode_params, world, motion, twin, twin_motion = compiled(exp, _ode_motions, "energy_report")(as_theta(exp, theta))
    system = exp.topology.ode.system
    out = energy_drift(system, ode_params, world, motion)
    if twin is not None:
        conservative = energy_drift(system, twin, world, twin_motion)
        out.update({"conservative_max_drift": conservative["max_drift"],
                    "conservative_relative": conservative["relative"], "edrift": EDRIFT,
                    "within_edrift": bool(max(conservative["max_drift"]) <= EDRIFT)})
    return out


def gradient_norms(history: dict) -> Optional[dict]:
    """The Adam iterations' gradient norms (w.r.t. the unconstrained quantities, before any clipping):
    {"total": [float], "per_quantity": {name: [float]}, "growth": last / first total norm}, or None when the
    history has none (no Adam iterations).

    Args:
        history: the fit's history (`SysIdResult.history`: its "grad_norm" and "grad_norms")."""
    total = [float(v) for v in history.get("grad_norm", [])]
    if not total:
        return None
    per = {n: [float(v) for v in vs] for n, vs in history.get("grad_norms", {}).items()}
    growth = total[-1] / total[0] if total[0] > 0 else None
    return {"total": total, "per_quantity": per, "growth": growth}


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


def write_report(path, report: dict) -> Path:
    """Write `report` as JSON to `path` atomically; return the path. A report.json gets its report.html beside
    it (`report_html.write_html`: the videos, curves, estimates and verdict on one self-contained page).

    Args:
        path: the JSON file to write.
        report: the report dict (numpy numbers and arrays allowed)."""
    text = json.dumps(report, indent=2, default=_json_default)
    with atomic_file(path) as temporary:
        Path(temporary).write_text(text)
    if Path(path).name == "report.json":
        write_html(path, json.loads(text))
    return Path(path)


def save_figure(fig, path) -> Path:
    """fig.savefig to `path` atomically (PNG); returns `path` as a Path.

    Args:
        fig: a matplotlib Figure.
        path: the PNG file to write."""
    with atomic_file(path) as temporary:
        fig.savefig(temporary, format="png")
    return Path(path)


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


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


def _list(values) -> str:
    """Numbers of a per-body list, to 3 significant figures ("a, b")."""
    return ", ".join(f"{v:.3g}" for v in values)


def verdict_line(conv: dict) -> str:
    """"  converged: yes/NO (final loss, initial, noise floor, ratio)" from `Convergence.as_dict()`.

    Args:
        conv: the dict of `Convergence.as_dict()` (non-finite numbers as None)."""
    ratio = conv.get("floor_ratio")
    # as_dict writes non-finite numbers as None (JSON): a fit of 0 iterations has no final loss.
    g = lambda v: "n/a" if v is None else f"{v:.3g}"  # noqa: E731
    return (f"  converged: {'yes' if conv['converged'] else 'NO'} (final loss {g(conv['final_loss'])}, initial "
            f"{g(conv['initial_loss'])}, noise floor {g(conv['noise_floor'])}"
            + (f", {ratio:.3g} x floor" if ratio is not None else "") + ")")


def advice_lines(conv) -> list[str]:
    """The lines after a fit's summary: why it did not converge and what to try, or its notes.

    Args:
        conv: a `fit.convergence.Convergence`, or None (no lines)."""
    if conv is None:
        return []
    if not conv.converged:
        return (["WARNING: the fit did not converge: " + "; ".join(conv.reasons) + "."]
                + [f"  try: {tip}" for tip in conv.advice])
    return [f"note: {tip}" for tip in conv.advice]


def convergence_lines(conv) -> list[str]:
    """The verdict line and the advice of a fit whose report has no `summary_lines`.

    Args:
        conv: a `fit.convergence.Convergence`, or None (no lines)."""
    return [] if conv is None else [verdict_line(conv.as_dict()), *advice_lines(conv)]


#: A quantity of up to this many values (a pendulum's arm lengths) is printed whole by `summary_lines`; a larger
#: one (a velocity per particle) by its count, with its relative error.
SUMMARY_VALUES = 4


def _values(value) -> str:
    flat = np.ravel(np.asarray(value, np.float64))
    return f"{flat[0]:.6g}" if flat.size == 1 else "[" + ", ".join(f"{v:.6g}" for v in flat) + "]"


def summary_lines(report: dict) -> list[str]:
    """Readable lines: each estimated quantity with truth and relative error, identifiability flags.

    Args:
        report: the report dict (`build_report`)."""
    lines = []
    for n in report["free"]:
        values = [report["estimated"][n], report["initial"][n]] + ([report["true"][n]] if "true" in report else [])
        size = int(np.size(values[0]))
        if size > SUMMARY_VALUES:
            line = f"  {n:<10} ({size} values)"
        else:
            shown = [_values(v) for v in values]
            line = f"  {n:<10} estimated {shown[0]}  (initial {shown[1]}"
            line += f", true {shown[2]})" if "true" in report else ")"
        if "relative_error" in report:
            line += f"  relative error {report['relative_error'][n]:.2e}"
        lines.append(line)
    norms = report.get("gradient_norms")
    if norms and norms["per_quantity"]:
        lines.append("  gradient norm (first -> last Adam iteration): " + ", ".join(
            f"{n} {v[0]:.3g} -> {v[-1]:.3g}" for n, v in norms["per_quantity"].items() if v))
    conv = report.get("convergence")
    if conv:
        lines.append(verdict_line(conv))
    if "camera_pose_error" in report:
        err = report["camera_pose_error"]
        lines.append(f"  camera pose off by {err['rotation_deg']:.3g} deg and {err['centre_m'] * 100:.3g} cm")
    energy = report.get("energy")
    if energy:
        unit = energy["unit"]
        line = (f"  energy: {_list(energy['initial'])} -> {_list(energy['final'])} {unit}, "
                f"largest change {_list(energy['max_drift'])} {unit}")
        if "conservative_max_drift" in energy:
            line += (f"; with no dissipation it drifts {_list(energy['conservative_max_drift'])} {unit} "
                     f"(gradSim's limit {energy['edrift']:g}: {'within' if energy['within_edrift'] else 'OVER'})")
        lines.append(line)
    ident = report.get("identifiability")
    if ident and not ident.get("valid", True):
        lines.append("  identifiability: not assessed (the fit did not converge)")
    elif ident:
        cond = ident["condition_number"]
        lines.append(f"  identifiability: cond(J^T J) = {cond:.3g}" if cond else "  identifiability: J^T J singular")
        for combo in ident["unidentifiable_combinations"]:
            lines.append(f"    NOT separable by the video: {combo}")
    return lines


