"""One round of a fit (`fit_round`): Adam on the image loss (`fit_loss`: a growing horizon, the shape
smoothness, or truncated backpropagation through windows) through `gradsim_jax.fit.fit`, then the
Levenberg-Marquardt polish (`sysid.polish`, or `polish_truncated` for a windowed fit), appending both to
the history."""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
import optax

from gradsim_jax.fit import cosine_schedule
from gradsim_jax.fit import fit as run_fit
from gradsim_jax.fit.convergence import relative_last_step
from gradsim_jax.sysid.bounds import stable_bounds
from gradsim_jax.sysid.config import LM_MAX_SCALARS, FitConfig
from gradsim_jax.sysid.experiment import Experiment, split_data, with_data, traced_checks
from gradsim_jax.sysid.losses import make_loss
from gradsim_jax.sysid.polish import levenberg_marquardt
from gradsim_jax.sysid.quantities import canonical, shape_roughness, transforms_for


Array = Any

def fit_loss(exp: Experiment, config: FitConfig, ramp=None) -> Callable:
    """The Adam stage's loss `loss_fn(theta, *iteration)` of a theta that carries the experiment's arrays and
    the target (`with_data`): the image loss (`make_loss`, with the horizon `ramp`) plus the shape
    smoothness term when `config.smoothness`."""

    if config.window is not None:
        from gradsim_jax.sysid.windowed import windowed_loss

        windows = truncation_windows(exp, config)

        def windowed(theta, *iteration):
            theta, e, tgt = split_data(exp, theta)
            return windowed_loss(e, tgt, windows, shooting="truncated", kind=config.loss)(theta)

        return windowed

    def loss_fn(theta, *iteration):
        theta, e, tgt = split_data(exp, theta)
        loss = make_loss(e, tgt, config.loss, config.frame_stride, ramp)(theta, *iteration)
        if config.smoothness:
            loss = loss + config.smoothness * shape_roughness(theta["shape"], e.topology.rigid.faces)
        return loss

    return loss_fn


def multiple_shooting(config: FitConfig) -> bool:
    return config.window is not None and config.shooting == "multiple"


def _multiple_shooting(exp: Experiment, target: Array, theta: dict, free, config: FitConfig, *, iterations: int,
                       checkpoint_dir, resume: bool, first: int):
    """The Adam stage as multiple shooting (`windowed.fit_windowed`: windows of `config.window` frames, start
    states read off the video, the join penalty tightened), then `config.polish` Gauss-Newton steps on every
    unknown where the start states are small (`shooting.polish_multiple`); returns (its `FitResult`, the
    `WindowedFitResult`)."""
    from gradsim_jax.sysid.shooting import STATE_LIMIT, state_size
    from gradsim_jax.sysid.windowed import fit_windowed

    callback = None
    if config.callback is not None:
        def callback(it, th, loss):
            return config.callback(first + it, th, loss, None)

    window = min(int(config.window), exp.frames)
    polish = config.polish if state_size(exp) <= STATE_LIMIT else 0
    if config.polish and not polish and config.progress:
        print(f"  (no Gauss-Newton polish: {state_size(exp)} numbers per window start > {STATE_LIMIT})")
    result = fit_windowed(exp, target, theta, free, window=window, shooting="multiple", iterations=iterations,
                          polish=polish,
                          learning_rate=config.learning_rate, kind=config.loss, frame_stride=config.frame_stride,
                          progress=config.progress, checkpoint_dir=checkpoint_dir,
                          checkpoint_every=config.checkpoint_every, resume=resume, callback=callback)
    if config.progress:
        joins = ", ".join(f"{k} {v:.3g}" for k, v in result.terms.items() if k.startswith("join") and v)
        print(f"  multiple shooting: {result.windows.count} windows of {window} frames, start states from "
              f"{result.start_from}; largest join mismatch at the end: {joins or 'none'}")
    return result.fit, result


def truncation_windows(exp: Experiment, config: FitConfig):
    """The `Windows` of `config.window` (truncated backpropagation: no overlap; a window longer than the
    recording is the whole recording)."""
    from gradsim_jax.sysid.windowed import Windows

    return Windows(exp.frames, min(int(config.window), exp.frames), 0, config.frame_stride)


def fit_round(exp: Experiment, target: Array, theta: dict, config: FitConfig, free, history: dict, *,
               iterations: int, horizon, checkpoint_dir, metadata: dict, resume: bool) -> dict:
    """One round of `identify` from `theta`: `iterations` Adam iterations (growing `horizon`), then the
    polish; appends to `history` and returns theta, loss (the image loss at the end of the round), info (the
    polish's), grad_norm, last_step, adam_iterations, lm_steps and resumed."""
    tf = transforms_for(free)
    round_start = len(history["loss"])
    adam_iterations, grad_norm, resumed, shot = 0, float("nan"), None, None
    next_iteration = history["iteration"][-1] + 1 if history["iteration"] else 0
    if iterations > 0:
        ramp = None if horizon is None else (horizon, iterations // 2)

        loss_fn = fit_loss(exp, config, ramp)
        callback = None
        if config.callback is not None:
            def callback(it, params, loss, aux):
                return config.callback(next_iteration + it, split_data(exp, params)[0], loss, aux)
        theta, bounds = stable_bounds(exp, theta, free)
        start_theta = theta
        if multiple_shooting(config):
            result, shot = _multiple_shooting(exp, target, theta, free, config, iterations=iterations,
                                        checkpoint_dir=checkpoint_dir, resume=resume, first=next_iteration)
        else:
            result = run_fit(
                loss_fn, with_data(theta, exp, target), free=free, transforms=tf,
                optimizer=optax.adam(config.learning_rate), schedule=cosine_schedule(max(iterations, 1), alpha=0.02),
                steps=iterations, checkpoint_dir=checkpoint_dir, checkpoint_every=config.checkpoint_every,
                resume=resume, progress=config.progress, callback=callback, uses_iteration=ramp is not None,
                metadata=metadata,
                resume_anyway=config.resume_anyway, checks=traced_checks(exp),
                clip={canonical(k): v for k, v in config.clip.items()} if config.clip else None, bounds=bounds,
            )
        resumed = result.resume
        theta = {k: v for k, v in split_data(exp, result.params)[0].items() if not k.startswith("_window")}
        adam_theta = theta
        adam_iterations = result.iterations
        grad_norm = result.grad_norm
        history.setdefault("grad_norm", []).extend(result.history.get("grad_norm", []))
        norms = history.setdefault("grad_norms", {})
        for n, v in result.history.get("grad_norms", {}).items():
            norms.setdefault(n, []).extend(v)
        history.setdefault("backoffs", []).extend(next_iteration + int(b) for b in result.history.get("backoffs", []))
        history["iteration"].extend(next_iteration + i for i in result.history["iteration"])
        history["loss"].extend(result.history["loss"])
        for n in free:
            history["params"][n].extend(result.history["params"][n])
        history["stage"].extend(["adam"] * len(result.history["iteration"]))
        # The state after the last update, as the next entry.
        history["iteration"].append(next_iteration + adam_iterations)
        history["loss"].append(result.loss)
        for n in free:
            history["params"][n].append(record_value(theta[n]))
        history["stage"].append("adam")
        if shot is not None:  # after its Gauss-Newton steps
            theta = {**adam_theta, **{n: jnp.asarray(shot.theta[n]) for n in free}}
    else:
        start_theta = theta
    # The loss at the round's start over all frames: the first Adam entry, when it is one.
    whole = iterations > 0 and horizon is None and len(history["loss"]) > round_start
    start_loss = float(history["loss"][round_start]) if whole else None
    n_scalars = sum(int(np.size(theta[n])) for n in free)
    lm_steps = 0
    info: dict = {}
    last_step = None
    if config.polish > 0 and n_scalars > LM_MAX_SCALARS and config.progress:
        print(f"  (no Levenberg-Marquardt polish: {n_scalars} free scalars > {LM_MAX_SCALARS})")
    scalars_only = all(np.size(theta[n]) == 1 for n in free)
    if config.polish > 0 and config.window is not None and not scalars_only and config.progress \
            and not multiple_shooting(config):
        print("  (no Levenberg-Marquardt polish: a windowed fit polishes scalar quantities only)")
    records = None
    if multiple_shooting(config):
        polish = (shot.history.get("polish") if shot is not None else None) or {"loss": []}
        records = [(c, {n: polish[n][k] for n in free}) for k, c in enumerate(polish["loss"])]
    elif config.polish > 0 and config.window is not None and scalars_only and n_scalars <= LM_MAX_SCALARS:
        from gradsim_jax.sysid.windowed import polish_truncated

        theta, records = polish_truncated(exp, target, theta, free, truncation_windows(exp, config),
                                          steps=config.polish, kind=config.loss, progress=config.progress)
        theta = {k: jnp.asarray(v) for k, v in theta.items()}
    elif config.polish > 0 and n_scalars <= LM_MAX_SCALARS:
        theta, records = levenberg_marquardt(exp, target, theta, free, steps=config.polish, kind=config.loss,
                                             frame_stride=config.frame_stride, progress=config.progress, info=info)
        grad_norm = info.get("grad_norm", grad_norm)
        last_step = info.get("gn_step")
        if iterations == 0 and not records:
            history["loss"].append(float(np.sum(np.square(info["residual"]))))  # no step taken: at the start
    if records is not None:
        start = history["iteration"][-1] + 1 if history["iteration"] else 0
        for k, (cost, values) in enumerate(records):
            history["iteration"].append(start + k)
            history["loss"].append(cost)  # |r|^2 = the image loss (on the LM stage's horizon)
            for n in free:
                history["params"][n].append(record_value(values[n]))
            history["stage"].append("lm")
        lm_steps = len(records)
    # |r|^2 of the last LM step (over all frames) is the image loss; else the fit's own final loss.
    loss = history["loss"][-1] if len(history["loss"]) > round_start else float("nan")
    if last_step is None:
        last_step = relative_last_step({n: v[round_start:] for n, v in history["params"].items()})
    return {"theta": theta, "loss": loss, "info": info, "grad_norm": grad_norm, "last_step": last_step,
            "adam_iterations": adam_iterations, "lm_steps": lm_steps, "resumed": resumed, "start": start_theta,
            "start_loss": start_loss}


def record_value(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else (x.copy() if x.size <= 64 else float(np.mean(x)))
