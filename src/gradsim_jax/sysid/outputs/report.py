"""The report of a fit: report.json (values, errors against the truth, convergence, identifiability, inputs,
versions, gradient norms, the body kinds' own sections: `sysid.outputs.sections`, e.g. an ODE body's energy),
written atomically with report.html beside it."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.files import atomic_file
from gradsim_jax.sysid.outputs.html import write_html
from gradsim_jax.render.camera import rotation_from_rvec
from gradsim_jax.sysid.experiment import Experiment
from gradsim_jax.sysid.config import SysIdResult
from gradsim_jax.sysid.outputs.sections import section_values
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
    # Each body kind's own sections (`sysid.outputs.sections`), None where the scene has not that kind: "energy", an
    # ODE body's energy over the fitted motion and its solver's drift (gradSim's check).
    report.update(section_values(result.experiment or exp, result.theta))
    report["inputs"] = result.inputs
    report["resume"] = result.resume
    if extra:
        report.update(extra)
    return report


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


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")
