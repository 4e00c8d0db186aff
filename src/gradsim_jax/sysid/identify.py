"""Fitting quantities to a video, the composition of the stages (gradSim, Jatavallabhula et al., ICLR 2021,
section 4): `prepare` (focus on the free quantities, decide the blur: `sysid.edges`), an optional density
field first, rounds of Adam then the Levenberg-Marquardt polish (`sysid.rounds`, `sysid.polish`) while the
loss stays above the noise floor, the identifiability report, the convergence verdict, and the other edge
model when the loss left lies on the outlines. The settings are a `FitConfig` (`sysid.config`), the losses
`sysid.losses`.

Identifiability: under gravity and internal forces alone every acceleration is (force / mass), and the
internal forces are linear in the stiffness and damping coefficients, so scaling mass, stiffness and
damping together leaves the motion unchanged; only ratios show. A known force that does not scale with
them breaks the symmetry: a push (its acceleration is push / mass) or air drag with a known
coefficient. `gauss_newton_report` on the pixel residuals at the solution flags what is left unseparated.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any, Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit import gauss_newton_report
from gradsim_jax.fit.checkpoint import checkpoint_path
from gradsim_jax.fit.convergence import FLOOR_FACTOR, assess, noise_floor, on_outlines
from gradsim_jax.fit.fit import HISTORY_FULL_SIZE
from gradsim_jax.fit.identifiability import report_from_jacobian
from gradsim_jax.fit.image_losses import loss_kind
from gradsim_jax.render.coverage_models import coverage_model
from gradsim_jax.sysid.config import BLUR_START, REPORT_MAX_SCALARS, FitConfig, SysIdResult, check_config, fit_inputs
from gradsim_jax.sysid.edges import blur_start, edge_residual
from gradsim_jax.sysid.experiment import Experiment, as_theta, split_data, with_data
from gradsim_jax.sysid.losses import loss_at, loss_frames, make_residual
from gradsim_jax.sysid.quantities import (QUANTITIES, canonical, density_field_coordinates, focused,
                                          polished, transforms_for, with_camera_pose)
from gradsim_jax.sysid.rounds import FitHistory, RoundResult, fit_round
from gradsim_jax.typing import replace_paths

Array = Any


#: A later round (`FitConfig.rounds`) must lower the loss below this fraction of the best so far, or the
#: rounds end.
ROUND_GAIN = 0.99


def identify(exp: Experiment, target: Array, initial: dict, config: FitConfig) -> SysIdResult:
    """Fit the quantities `config.free` to the target video: Adam, then the Levenberg-Marquardt polish, in up
    to `config.rounds` rounds (see `FitConfig`); the stages: `prepare`, the density field first
    (`FitConfig.density_first`), the rounds (`fit_rounds`), the estimate kept, the identifiability report, the
    other edge model (`FitConfig.edge_model`), the convergence verdict.

    Args:
        exp: the experiment (scene, camera, render settings) that made the video.
        target: [frames + 1, H, W, 4] the target video, RGBA in [0, 1].
        initial: {quantity: value} the starting guess (physical units; the experiment's values for the rest).
        config: the fit's settings.

    Returns:
        the `SysIdResult`.
    """
    started = time.perf_counter()
    check_config(config)
    exp, full, theta0, config, blur = prepare(exp, target, initial, config)
    free = tuple(config.free)
    inputs = fit_inputs(exp, target, theta0, config)
    density = None
    if config.density_first:
        theta0, density = _density_first(exp, target, theta0, config, free)
    target = jnp.asarray(target, theta0["push"].dtype)
    floor = _noise_floor(exp, target, config)
    done, best = fit_rounds(exp, target, theta0, config, floor=floor, metadata=inputs)
    history = FitHistory.empty(free)
    for r in done:
        history = history.then(r.entries)
    notes = {"rounds": len(done), "best_round": 1 + next(k for k, r in enumerate(done) if r is best)}
    estimate = _Estimate(best.theta, best.info, best.loss)
    if density is not None:
        estimate, notes["density_first"] = _density_outcome(exp, config, theta0, history, estimate, density)
    estimate, notes["start_loss"], kept_start = _not_above_start(exp, target, config, done[0], estimate)
    if blur is not None:
        notes["blur"] = blur
    if kept_start:
        notes["kept_start"] = True
    report = _report(exp, target, config, estimate)
    # With density_first: the per-particle stage's start, so that a stage that explains little more of the
    # video than the field did is not called converged by the loss ratio (the field stage's start is far off).
    initial_loss = history.loss[0] if history.loss else estimate.loss
    edges = None
    if (config.report or config.edge_model == "auto") and np.isfinite(estimate.loss) \
            and estimate.loss > FLOOR_FACTOR * floor:
        edges, edge_notes, switched = _edges(exp, target, config, estimate, history, blur)
        notes.update(edge_notes)
        if switched is not None:
            return dataclasses.replace(
                switched, wall_time=time.perf_counter() - started, inputs=inputs, resume=done[0].resumed,
                adam_iterations=switched.adam_iterations + sum(r.adam_iterations for r in done),
                lm_iterations=switched.lm_iterations + sum(r.lm_steps for r in done))
    convergence = assess(initial_loss=initial_loss, final_loss=estimate.loss, floor=floor,
                         grad_norm=best.grad_norm, last_step=best.last_step, loss_kind=config.loss, edges=edges)
    # The quantities left out as restating the scene come back with their values; those a free one superseded
    # do not (their values would contradict the fit).
    superseded = {QUANTITIES[n].field for n in free}
    theta = {**{k: v for k, v in full.items() if k in QUANTITIES and QUANTITIES[k].field not in superseded},
             **estimate.theta}
    return SysIdResult(theta={k: np.asarray(v) for k, v in theta.items()}, history={**history.as_dict(), **notes},
                       report=report, wall_time=time.perf_counter() - started,
                       adam_iterations=sum(r.adam_iterations for r in done),
                       lm_iterations=sum(r.lm_steps for r in done), loss=estimate.loss, convergence=convergence,
                       inputs=inputs, resume=done[0].resumed, experiment=exp)


def fit_rounds(exp: Experiment, target: Array, theta0: dict, config: FitConfig, *, floor: float,
               metadata: dict) -> tuple[tuple[RoundResult, ...], RoundResult]:
    """The rounds of `identify` (`fit_round`): the first from `theta0` (`config.iterations`, growing
    `config.horizon`); then, while the best loss is above FLOOR_FACTOR x `floor` and the last round lowered it
    below ROUND_GAIN x the best, another from the best estimate (`config.round_iterations` over all frames), up
    to `config.rounds`.

    Args:
        exp: the experiment fitted (focused on the free quantities).
        target: [frames + 1, H, W, 4] the target video.
        theta0: {quantity: value} the first round's start.
        config: the fit's settings (free: canonical names).
        floor: the target's noise floor (the image loss of a perfect model).
        metadata: the first round's checkpoint inputs (`fit_inputs`).

    Returns:
        (every round's `RoundResult` in order, the best of them).
    """
    free = tuple(config.free)
    iterations = config.round_iterations or max(config.iterations // 2, 1)
    done = (fit_round(exp, target, theta0, config, free, iterations=config.iterations, horizon=config.horizon,
                      checkpoint_dir=config.checkpoint_dir, metadata=metadata, resume=config.resume),)
    best = done[0]
    while len(done) < config.rounds and np.isfinite(best.loss) and best.loss > FLOOR_FACTOR * floor:
        if config.progress:
            print(f"  round {len(done) + 1}: the loss {best.loss:.3g} is {best.loss / max(floor, 1e-300):.3g} x "
                  f"the noise floor: {iterations} more Adam iterations over all frames, then the polish")
        checkpoints = (None if config.checkpoint_dir is None
                       else str(Path(config.checkpoint_dir) / f"round{len(done) + 1}"))
        done += (fit_round(exp, target, best.theta, config, free, first_iteration=_next_iteration(done),
                           iterations=iterations,
                           horizon=None, checkpoint_dir=checkpoints,
                           metadata={**fit_inputs(exp, target, best.theta, config), "round": len(done) + 1,
                                     "iterations": iterations, "horizon": None},
                           resume=config.resume and checkpoints is not None
                           and Path(checkpoint_path(checkpoints)).exists()),)
        gained = done[-1].loss < ROUND_GAIN * best.loss
        if done[-1].loss < best.loss:
            best = done[-1]
        if not gained:
            break
    return done, best


def _next_iteration(done) -> int:
    """The iteration number after the last entry of the rounds `done` (0 when none has one)."""
    return next((r.entries.next_iteration for r in reversed(done) if r.entries.iteration), 0)


@dataclasses.dataclass(frozen=True)
class _Estimate:
    """What `identify` returns as the estimate: theta {quantity: value}, info (the polish's, whose Jacobian the
    report reuses; {} when the estimate is not the polish's), loss (its image loss)."""

    theta: dict
    info: dict
    loss: float


def _noise_floor(exp: Experiment, target: Array, config: FitConfig) -> float:
    """The noise floor of the target's fitted frames and channels (`fit.convergence.noise_floor`)."""
    channels = loss_kind(config.loss).channels
    return noise_floor(np.asarray(target)[loss_frames(exp, config.frame_stride)], channels)


def _density_outcome(exp: Experiment, config: FitConfig, theta0: dict, history: FitHistory, estimate: _Estimate,
                     density: dict) -> tuple[_Estimate, dict]:
    """After `FitConfig.density_first`'s per-particle stage: (the estimate, the density record with "kept" and,
    when the lowest-loss entry is the estimate, "best_iteration")."""
    free = tuple(config.free)
    theta, info, final_loss = estimate.theta, estimate.info, estimate.loss
    # The per-particle steps bounce near the minimum (the loss is not continuous in the masses at the
    # default depth blend): the lowest-loss iterate is the estimate. Every entry of the history is a loss
    # over all frames when no horizon grows, and holds the whole values of quantities up to 64 elements.
    losses = np.asarray(history.loss, np.float64)
    whole = all(np.size(theta[n]) <= HISTORY_FULL_SIZE for n in free)
    if config.horizon is None and whole and losses.size and np.nanmin(losses) < final_loss:
        k = int(np.nanargmin(losses))
        theta = {**theta, **{n: jnp.asarray(history.params[n][k], exp.dtype) for n in free}}
        final_loss, info = float(losses[k]), {}
        density = {**density, "best_iteration": int(history.iteration[k])}
    # When they end no lower than the density field left the loss, the field's masses (and the quantities
    # fitted with it) are the estimate.
    density = {**density, "kept": bool(np.isfinite(density["loss"]) and not final_loss < density["loss"])}
    if density["kept"]:
        if config.progress:
            print(f"  the per-particle fit ended at loss {final_loss:.3e}, no lower than the density field's "
                  f"{density['loss']:.3e}: the field's masses are the estimate")
        theta = {**theta, **{n: theta0[n] for n in free}}
        final_loss, info = density["loss"], {}  # the polish's Jacobian was made elsewhere
    return _Estimate(theta, info, final_loss), density


def _not_above_start(exp: Experiment, target: Array, config: FitConfig, first: RoundResult,
                     estimate: _Estimate) -> tuple[_Estimate, float, bool]:
    """A fit never returns an estimate that explains the video worse than where it started: (the estimate, or
    the first round's start when that is lower; the start's image loss; whether the start is the estimate)."""
    start_loss, start_theta = first.start_loss, first.start
    if start_loss is None:  # the first entry is not a loss over all frames at the start: evaluate it
        start_loss = loss_at(exp, target, start_theta, config)
    if not (math.isfinite(start_loss) and not estimate.loss <= start_loss):
        return estimate, start_loss, False
    if config.progress:
        print(f"  the fit ended at loss {estimate.loss:.4e}, above its start's {start_loss:.4e}: the start is the "
              "estimate")
    theta = {**estimate.theta, **{n: start_theta[n] for n in config.free}}
    return _Estimate(theta, {}, start_loss), start_loss, True


def _report(exp: Experiment, target: Array, config: FitConfig, estimate: _Estimate):
    """The identifiability report at the estimate (`config.report`, up to REPORT_MAX_SCALARS free scalars;
    else None): from the polish's last Jacobian when the estimate is the polish's, else a Gauss-Newton one."""
    free = polished(config.free)  # the albedo, when free, is held at the estimate
    theta, info = estimate.theta, estimate.info
    n_scalars = sum(int(np.size(theta[n])) for n in free)
    if not (config.report and n_scalars <= REPORT_MAX_SCALARS):
        return None
    if "jacobian" in info:
        # The polish's last Jacobian is the report's (same residuals, all frames, same coordinates).
        return report_from_jacobian(info["jacobian"], info["residual"], info["labels"], info["values"], info["dxdz"])

    def residual(th):
        th, e, tgt = split_data(exp, th)
        return make_residual(e, tgt, config.loss, config.frame_stride, dense=True)(th)

    return gauss_newton_report(residual, with_data(theta, exp, target), free=free, transforms=transforms_for(free))


def _edges(exp: Experiment, target: Array, config: FitConfig, estimate: _Estimate, history: FitHistory,
           blur) -> tuple[dict, dict, Optional[SysIdResult]]:
    """Where the loss left lies (`sysid.edges.edge_residual`): (the edges, the history's entries of them
    ("edges", and "edge_model" when the other edge model was tried), the fit continued with the other edge
    model when that explains the video better, else None)."""
    edges = edge_residual(exp, target, estimate.theta, config)
    if not (config.edge_model == "auto" and on_outlines(edges)):
        return edges, {"edges": edges}, None
    iterations = config.round_iterations or max(config.iterations // 2, 1)
    other = _other_edge_model(exp, target, estimate.theta, config, tuple(config.free), estimate.loss, iterations)
    edges = {**edges, "tried": other["record"]}
    notes = {"edges": edges, "edge_model": other["record"]}
    if other["result"] is None:
        return edges, notes, None
    sub = other["result"]
    first = history.as_dict()
    return edges, notes, dataclasses.replace(sub, history={
        **sub.history, "edge_model": other["record"], **({} if blur is None else {"blur": blur}),
        "first_fit": {"loss": first["loss"], "iteration": first["iteration"], "params": first["params"]}})


def prepare(exp: Experiment, target: Array, initial: dict, config: FitConfig):
    """(exp, full, theta0, config, blur) as `identify` fits them: `full` the initial theta with the experiment's
    defaults, exp and theta0 `focused` on the free quantities, the blur decided (`FitConfig.blur`: measured,
    and added to the free quantities when fitted; blur: what was decided, or None), the free names canonical.

    Args:
        exp: the experiment that made the video.
        target: [frames + 1, H, W, 4] the target video, RGBA in [0, 1].
        initial: {quantity: value} the starting guess.
        config: the fit's settings.

    Returns:
        (exp, full, theta0, config, blur) as above.
    """
    free = tuple(canonical(n) for n in config.free)
    full = as_theta(exp, with_camera_pose(exp, initial) if "camera_pose" in free else initial)
    exp, theta0 = focused(exp, full, free)
    theta0, blur = blur_start(exp, target, theta0, config)
    if blur is not None and blur["free"] and "blur" not in free:
        free = free + ("blur",)
    return exp, full, theta0, dataclasses.replace(config, free=free), blur


def _other_edge_model(exp: Experiment, target: Array, theta: dict, config: FitConfig, free, loss: float,
                      iterations: int) -> dict:
    """`FitConfig.edge_model` "auto": {"record": what was tried and measured, "result": the fit continued with the
    other edge model when that explains the video better than `loss`, else None}."""
    other = coverage_model(exp.settings.coverage).alternative
    switched = dataclasses.replace(exp, settings=dataclasses.replace(exp.settings, coverage=other))
    start = dict(theta)
    if "blur" in free:
        start["blur"] = jnp.asarray(BLUR_START, exp.dtype)
    at_estimate = loss_at(switched, target, start, config)
    record = {"from": exp.settings.coverage, "to": other, "loss": float(loss), "loss_at_estimate": at_estimate,
              "switched": False}
    if config.progress:
        print(f"  edges: the loss left lies on the outlines; at the estimate {other} coverage gives {at_estimate:.3e} "
              f"against {exp.settings.coverage}'s {loss:.3e}")
    if not at_estimate < loss:
        return {"record": record, "result": None}
    if config.progress:
        print(f"  edges: continuing with [render] coverage = \"{other}\"")
    sub_config = dataclasses.replace(config, edge_model="fixed", blur="off", iterations=iterations, horizon=None,
                                     density_first=0, checkpoint_dir=None, resume=False, callback=None)
    sub = identify(switched, target, start, sub_config)
    record["final_loss"] = float(sub.loss)
    if not sub.loss < loss:
        return {"record": record, "result": None}
    record["switched"] = True
    return {"record": record, "result": sub}


def _density_first(exp: Experiment, target: Array, theta0: dict, config: FitConfig, free) -> tuple[dict, dict]:
    """The first stage of `FitConfig.density_first`: (theta0 with "particle_mass" the masses of the fitted
    density field and the other free quantities as fitted with it, {"density": kg/m^3 at the bodies'
    centroid, "field": the fitted "density_field", "range": [least, largest] density of a particle, "loss":
    the stage's final image loss, "initial_loss": its first, "losses": all of its losses, "start": the density it
    started from})."""
    volume, coordinates = (np.asarray(a, np.float64) for a in density_field_coordinates(exp.topology, exp.params))
    masses = np.asarray(theta0["particle_mass"], np.float64)
    soft = volume > 0
    if not soft.any():
        raise ValueError("density_first needs a soft body (tets): this scene has none")
    start = float(masses[soft].sum() / volume[soft].sum())
    # The stage's scene: the particles of no tet keep the initial masses (not the scene's own), and nothing
    # of the scene's own per-particle masses is left to fill in a quantity the stage does not set.
    params = replace_paths(exp.params, {"particles.mass": jnp.asarray(masses, exp.dtype)})
    stage_exp = dataclasses.replace(exp, params=params,
                                    theta={k: v for k, v in exp.theta.items() if k != "particle_mass"})
    stage_free = tuple("density_field" if n == "particle_mass" else n for n in free)
    stage_theta = {k: v for k, v in theta0.items() if k != "particle_mass"}
    stage_theta["density_field"] = jnp.asarray([math.log(start), 0.0, 0.0, 0.0], exp.dtype)
    stage = dataclasses.replace(config, free=stage_free, iterations=config.density_first,
                                learning_rate=config.density_learning_rate, density_first=0, rounds=1,
                                checkpoint_dir=None, resume=False, callback=None, report=False, clip=None)
    if config.progress:
        print(f"  density first: a density field for the soft bodies ({config.density_first} Adam iterations "
              f"from {start:.4g} kg/m^3 everywhere)")
    result = identify(stage_exp, target, stage_theta, stage)
    field = np.asarray(result.theta["density_field"], np.float64)
    rho = np.exp(field[0] + coordinates @ field[1:])
    theta = dict(theta0)
    for n in stage_free:
        if n != "density_field":
            theta[n] = jnp.asarray(result.theta[n], exp.dtype)
    theta["particle_mass"] = jnp.asarray(np.where(soft, rho * volume, masses), exp.dtype)
    least, largest = float(rho[soft].min()), float(rho[soft].max())
    if config.progress:
        print(f"  density first: {math.exp(field[0]):.6g} kg/m^3 at the centroid ({least:.4g} to {largest:.4g}; "
              f"loss {result.loss:.3e}); now every particle's mass")
    initial_loss = float(result.history["loss"][0]) if result.history["loss"] else float(result.loss)
    return theta, {"density": math.exp(field[0]), "field": field.tolist(), "range": [least, largest],
                   "loss": float(result.loss), "initial_loss": initial_loss, "start": start,
                   "losses": [float(v) for v in result.history["loss"]]}
