"""One complete run of system identification: an initial guess (`perturbed`), the fit, the initial and
fitted videos, every output file and the console summary (`run`)."""

from __future__ import annotations

from typing import Callable, Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit import check_resume, checkpoint_path
from gradsim_jax.sysid.experiment import Experiment, as_theta
from gradsim_jax.sysid.simulated import simulate_video
from gradsim_jax.sysid.config import FitConfig, check_config, fit_inputs
from gradsim_jax.sysid.identify import identify, prepare
from gradsim_jax.sysid.quantities import canonical, canonical_theta, with_camera_pose
from gradsim_jax.sysid.outputs.summary import advice_lines, summary_lines
from gradsim_jax.sysid.outputs.report import build_report, write_report
from gradsim_jax.sysid.outputs.files import ensure_writable_folder, outputs_line, write_outputs


def perturbed(theta: dict, free, *, seed: int = 0, low: float = 0.3, high: float = 0.5,
              free_particles=None) -> dict:
    """An initial guess: each free scalar scaled by 1 +- U(low, high) (random sign, seeded); velocity gets
    per-particle noise of relative size U(low, high) times the mean speed, on free particles.

    Args:
        theta: {quantity name: value}, the values to perturb (usually the truth).
        free: names of the quantities to perturb.
        seed: the random generator's seed.
        low: the smallest relative change (1 = 100 %).
        high: the largest relative change.
        free_particles: [n] bool, the particles whose velocity gets noise; None: every particle.

    Returns:
        a new theta {canonical name: value}, the free quantities perturbed, in their own dtypes.
    """
    rng = np.random.default_rng(seed)
    theta = canonical_theta(theta)
    out = dict(theta)
    for n in (canonical(name) for name in free):
        value = np.asarray(theta[n], np.float64)
        if n == "velocity":
            speed = float(np.mean(np.linalg.norm(value, axis=-1))) or 1.0
            noise = rng.normal(size=value.shape)
            noise *= rng.uniform(low, high) * speed / max(float(np.sqrt(np.mean(np.sum(noise ** 2, -1)))), 1e-12)
            if free_particles is not None:
                noise[~np.asarray(free_particles)] = 0.0
            new = value + noise
        else:
            sign = rng.choice([-1.0, 1.0])
            new = value * (1.0 + sign * rng.uniform(low, high))
        out[n] = jnp.asarray(new, jnp.asarray(theta[n]).dtype)
    return out


def run(exp: Experiment, target: np.ndarray, initial: dict, config: FitConfig, out_dir, *,
        truth: Optional[dict] = None, extra: Optional[dict] = None, echo: Callable[[str], None] = print) -> dict:
    """Fit, render initial and fitted videos, write every output file; returns the report dict
    (with "outputs": {kind: path}).

    Before anything compiles: ValueError when `out_dir` cannot be written or `config` is invalid,
    CheckpointError when resuming from a missing or unreadable checkpoint or (CheckpointMismatch) from
    one made for other inputs (`fit_inputs`) without `config.resume_anyway`.

    Args:
        exp: the experiment.
        target: [frames + 1, H, W, 4], the target video.
        initial: {quantity name: value}, the initial guess (missing entries from the experiment's defaults).
        config: how to fit (`FitConfig`).
        out_dir: the folder the outputs are written to (created when missing).
        truth: {quantity name: value}, the true values when known (relative errors in the report), or None.
        extra: entries added to the report dict, or None.
        echo: prints one line of the console summary.

    Returns:
        the report dict (`build_report`) with "outputs": {kind: path}.
    """
    free = tuple(canonical(n) for n in config.free)
    ensure_writable_folder(out_dir)
    check_config(config)
    initial = as_theta(exp, with_camera_pose(exp, initial) if "camera_pose" in free else initial)
    if config.resume and config.iterations > 0 and config.checkpoint_dir is not None:
        prepared, _, start, settled, _ = prepare(exp, target, initial, config)  # the inputs the fit will record
        check_resume(checkpoint_path(config.checkpoint_dir), fit_inputs(prepared, target, start, settled),
                     config.resume_anyway)
    _, initial_video = simulate_video(exp, initial)
    result = identify(exp, target, initial, config)
    if result.experiment is not None and result.experiment.settings != exp.settings:
        exp = result.experiment  # FitConfig.edge_model chose the other edge model: the fitted video has it
        echo(f"note: the target's edges are {exp.settings.coverage}'s: the fit continued with [render] coverage = "
             f"\"{exp.settings.coverage}\"")
    _, fitted_video = simulate_video(exp, result.theta)
    report = build_report(exp, free, truth, {n: np.asarray(initial[n]) for n in free}, result, extra)
    report["outputs"] = write_outputs(out_dir, exp, target=np.asarray(target), initial_video=initial_video,
                                      fitted_video=fitted_video, report=report, result=result, truth=truth)
    write_report(report["outputs"]["report"], report)
    echo(f"fit finished in {result.wall_time:.1f} s ({result.adam_iterations} Adam iterations, "
         f"{result.lm_iterations} Levenberg-Marquardt steps"
         + (f", {result.history['rounds']} rounds, the estimate from round {result.history['best_round']}"
            if result.history.get("rounds", 1) > 1 else "") + f"), final loss {result.loss:.3e}")
    for line in summary_lines(report):
        echo(line)
    if report.get("backoffs"):
        echo(f"note: {len(report['backoffs'])} update(s) reached a non-finite loss or gradient and were redone "
             f"at half length (Adam iterations {', '.join(map(str, report['backoffs']))}); later updates kept "
             "the shorter length")
    for line in advice_lines(result.convergence):
        echo(line)
    echo(outputs_line(out_dir))
    return report

