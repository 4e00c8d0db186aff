"""One round of a fit (`fit_round`): Adam on the image loss (`fit_loss`: a growing horizon, the shape
smoothness, or truncated backpropagation through windows) through `gradsim_jax.fit.fit`, then the
Levenberg-Marquardt polish (`sysid.polish`, or `polish_truncated` for a windowed fit). A round returns a
`RoundResult` holding its own history entries (`FitHistory`); `identify` joins the rounds' entries."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

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
from gradsim_jax.sysid.quantities import canonical, polished, shape_roughness, transforms_for


Array = Any


@dataclasses.dataclass(frozen=True)
class FitHistory:
    """The entries of a fit's history, oldest first (Adam iterations then LM steps, round after round).

    iteration: the iteration number of each entry (increasing across rounds).
    loss: the image loss of each entry (an LM entry: |r|^2 on the LM stage's horizon). A polish-only round
      whose polish took no step holds one more loss than iterations: the loss at its start.
    params: {quantity: [value per entry]} in physical units (`record_value`: floats, arrays of <= 64
      elements, else their mean).
    stage: "adam" or "lm" per entry.
    grad_norm: the Adam iterations' gradient norms (w.r.t. the unconstrained quantities); None while no Adam
      stage ran (the history dict then has no such key), likewise `grad_norms` ({quantity: [norm]}) and
      `backoffs` (the iterations whose update was halved).
    """

    iteration: tuple = ()
    loss: tuple = ()
    params: dict = dataclasses.field(default_factory=dict)
    stage: tuple = ()
    grad_norm: Optional[tuple] = None
    grad_norms: Optional[dict] = None
    backoffs: Optional[tuple] = None

    @staticmethod
    def empty(free) -> FitHistory:
        """No entries yet.

        Args:
            free: the fitted quantities' names (canonical), the keys of `params`.

        Returns:
            a `FitHistory` with an empty list of values per quantity.
        """
        return FitHistory(params={n: () for n in free})

    @property
    def next_iteration(self) -> int:
        """The iteration number of the next entry (0 when there is none)."""
        return self.iteration[-1] + 1 if self.iteration else 0

    def then(self, later: FitHistory) -> FitHistory:
        """This history followed by `later`'s entries.

        Args:
            later: the entries that come after (a later stage or round).

        Returns:
            a new `FitHistory`; neither input changes.
        """
        def join(a, b):
            return b if a is None else (a if b is None else a + b)

        norms = None if self.grad_norms is None and later.grad_norms is None else dict(self.grad_norms or {})
        for n, v in (later.grad_norms or {}).items():
            norms[n] = norms.get(n, ()) + v
        params = dict(self.params)
        for n, v in later.params.items():
            params[n] = params.get(n, ()) + v
        return FitHistory(iteration=self.iteration + later.iteration, loss=self.loss + later.loss, params=params,
                          stage=self.stage + later.stage, grad_norm=join(self.grad_norm, later.grad_norm),
                          grad_norms=norms, backoffs=join(self.backoffs, later.backoffs))

    def as_dict(self) -> dict:
        """The history as `SysIdResult.history` holds it: {"iteration", "loss", "params": {name: [...]},
        "stage"} of lists, and "grad_norm", "grad_norms", "backoffs" when an Adam stage ran."""
        out = {"iteration": list(self.iteration), "loss": list(self.loss),
               "params": {n: list(v) for n, v in self.params.items()}, "stage": list(self.stage)}
        if self.grad_norm is not None:
            out["grad_norm"] = list(self.grad_norm)
        if self.grad_norms is not None:
            out["grad_norms"] = {n: list(v) for n, v in self.grad_norms.items()}
        if self.backoffs is not None:
            out["backoffs"] = list(self.backoffs)
        return out


@dataclasses.dataclass(frozen=True)
class RoundResult:
    """What one round of `identify` (`fit_round`) ends with.

    theta: the round's estimate {quantity: value} (the experiment's own arrays left out).
    loss: the image loss at its end (the last LM step's |r|^2 over all frames, else the Adam stage's final
      loss; nan when the round made no entry).
    info: the Levenberg-Marquardt polish's information ("jacobian", "residual", "labels", "values", "dxdz",
      "grad_norm", "gn_step"; `sysid.polish.levenberg_marquardt`); {} when that polish did not run.
    grad_norm: the gradient norm at the end (w.r.t. the unconstrained quantities; nan when nothing measured it).
    last_step: the relative size of the last step (the Gauss-Newton step the polish would still take, else
      `relative_last_step` over the round's entries; inf with fewer than two).
    adam_iterations: the Adam iterations the round ran (resumed ones included).
    lm_steps: the polish's accepted steps.
    resumed: `FitResult.resume` of its Adam stage (None: a fresh start, or no Adam stage).
    start: the theta the round started from (within the stable bounds when Adam ran).
    start_loss: the image loss at its start over all frames when its first entry is that, else None.
    entries: the round's history entries (`FitHistory`).
    """

    theta: dict
    loss: float
    info: dict
    grad_norm: float
    last_step: Optional[float]
    adam_iterations: int
    lm_steps: int
    resumed: Optional[dict]
    start: dict
    start_loss: Optional[float]
    entries: FitHistory


@dataclasses.dataclass(frozen=True)
class _AdamStage:
    """The Adam stage of a round: theta after it (after the multiple-shooting polish when there is one),
    start (theta it began from), entries, iterations, grad_norm, resumed (`FitResult.resume`) and shot (the
    `WindowedFitResult` of multiple shooting, else None)."""

    theta: dict
    start: dict
    entries: FitHistory
    iterations: int = 0
    grad_norm: float = float("nan")
    resumed: Optional[dict] = None
    shot: Any = None


@dataclasses.dataclass(frozen=True)
class _Polish:
    """The polish of a round: theta after it, records [(loss, {quantity: value})] of its accepted steps (None:
    no polish ran), info (the Levenberg-Marquardt polish's, else {}), levenberg_marquardt (whether that ran)."""

    theta: dict
    records: Optional[list]
    info: dict
    levenberg_marquardt: bool = False


def fit_loss(exp: Experiment, config: FitConfig, ramp=None) -> Callable:
    """The Adam stage's loss `loss_fn(theta, *iteration)` of a theta that carries the experiment's arrays and
    the target (`with_data`): the image loss (`make_loss`, with the horizon `ramp`) plus the shape
    smoothness term when `config.smoothness`.

    Args:
        exp: the experiment fitted.
        config: the fit's settings (loss, frame_stride, smoothness, window).
        ramp: the growing horizon (first frames, iterations to reach all frames), or None (all frames).

    Returns:
        loss_fn(theta, *iteration) -> the scalar loss.
    """

    if config.window is not None:
        from gradsim_jax.sysid.windows.windowed import windowed_loss

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
    """Whether the fit is windowed by multiple shooting.

    Args:
        config: the fit's settings (window, shooting).

    Returns:
        True when `config.window` is set and `config.shooting` is "multiple".
    """
    return config.window is not None and config.shooting == "multiple"


def _multiple_shooting(exp: Experiment, target: Array, theta: dict, free, config: FitConfig, *, iterations: int,
                       checkpoint_dir, resume: bool, first: int):
    """The Adam stage as multiple shooting (`windowed.fit_windowed`: windows of `config.window` frames, start
    states read off the video, the join penalty tightened), then `config.polish` Gauss-Newton steps on every
    unknown where the start states are small (`shooting.polish_multiple`); returns (its `FitResult`, the
    `WindowedFitResult`)."""
    from gradsim_jax.sysid.windows.shooting import STATE_LIMIT, state_size
    from gradsim_jax.sysid.windows.windowed import fit_windowed

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
    recording is the whole recording).

    Args:
        exp: the experiment fitted (its frames).
        config: the fit's settings (window, frame_stride).

    Returns:
        the `sysid.windows.windowed.Windows`.
    """
    from gradsim_jax.sysid.windows.windowed import Windows

    return Windows(exp.frames, min(int(config.window), exp.frames), 0, config.frame_stride)


def fit_round(exp: Experiment, target: Array, theta: dict, config: FitConfig, free, *, first_iteration: int = 0,
              iterations: int, horizon, checkpoint_dir, metadata: dict, resume: bool) -> RoundResult:
    """One round of `identify` from `theta`: `iterations` Adam iterations (growing `horizon`), then the
    polish.

    Args:
        exp: the experiment fitted (focused on the free quantities).
        target: [frames + 1, H, W, 4] the target video.
        theta: {quantity: value} the round's start.
        config: the fit's settings.
        free: the fitted quantities (canonical names).
        first_iteration: the iteration number of the round's first history entry (the history's next).
        iterations: Adam iterations (0: the polish alone).
        horizon: the first frames the horizon grows from (over half the iterations), or None (all frames).
        checkpoint_dir: the folder of the Adam stage's checkpoints, or None.
        metadata: the inputs recorded in the checkpoints (`fit_inputs`).
        resume: resume the Adam stage from its checkpoint.

    Returns:
        the `RoundResult`, its history entries numbered from `first_iteration`.
    """
    if iterations > 0:
        adam = _adam_stage(exp, target, theta, config, free, first_iteration=first_iteration, iterations=iterations,
                           horizon=horizon, checkpoint_dir=checkpoint_dir, metadata=metadata, resume=resume)
    else:
        adam = _AdamStage(theta=theta, start=theta, entries=FitHistory.empty(free))
    # The loss at the round's start over all frames: the first Adam entry, when it is one.
    start_loss = float(adam.entries.loss[0]) if iterations > 0 and horizon is None and adam.entries.loss else None
    polish = _polish_stage(exp, target, adam.theta, config, free, adam.shot)
    entries, records, info = adam.entries, polish.records, polish.info
    grad_norm, last_step = adam.grad_norm, None
    if polish.levenberg_marquardt:
        grad_norm = info.get("grad_norm", grad_norm)
        last_step = info.get("gn_step")
        if iterations == 0 and not records:  # no step taken: the loss at the start
            entries = entries.then(FitHistory(loss=(float(np.sum(np.square(info["residual"]))),)))
    if records is not None:
        entries = entries.then(_lm_entries(records, free, entries.next_iteration if entries.iteration
                                           else first_iteration))
    # |r|^2 of the last LM step (over all frames) is the image loss; else the fit's own final loss.
    loss = entries.loss[-1] if entries.loss else float("nan")
    if last_step is None:
        last_step = relative_last_step(entries.params)
    return RoundResult(theta=polish.theta, loss=loss, info=info, grad_norm=grad_norm, last_step=last_step,
                       adam_iterations=adam.iterations, lm_steps=0 if records is None else len(records),
                       resumed=adam.resumed, start=adam.start, start_loss=start_loss, entries=entries)


def _adam_stage(exp: Experiment, target: Array, theta: dict, config: FitConfig, free, *, first_iteration: int,
                iterations: int, horizon, checkpoint_dir, metadata: dict, resume: bool) -> _AdamStage:
    """A round's Adam stage (`gradsim_jax.fit.fit`, or multiple shooting): its `_AdamStage`, the entries
    numbered from `first_iteration`, the state after the last update as the last entry."""
    ramp = None if horizon is None else (horizon, iterations // 2)
    loss_fn = fit_loss(exp, config, ramp)
    callback = None
    if config.callback is not None:
        def callback(it, params, loss, aux):
            return config.callback(first_iteration + it, split_data(exp, params)[0], loss, aux)
    theta, bounds = stable_bounds(exp, theta, free)
    start_theta, shot = theta, None
    if multiple_shooting(config):
        result, shot = _multiple_shooting(exp, target, theta, free, config, iterations=iterations,
                                          checkpoint_dir=checkpoint_dir, resume=resume, first=first_iteration)
    else:
        result = run_fit(
            loss_fn, with_data(theta, exp, target), free=free, transforms=transforms_for(free),
            optimizer=optax.adam(config.learning_rate), schedule=cosine_schedule(max(iterations, 1), alpha=0.02),
            steps=iterations, checkpoint_dir=checkpoint_dir, checkpoint_every=config.checkpoint_every,
            resume=resume, progress=config.progress, callback=callback, uses_iteration=ramp is not None,
            metadata=metadata,
            resume_anyway=config.resume_anyway, checks=traced_checks(exp),
            clip={canonical(k): v for k, v in config.clip.items()} if config.clip else None, bounds=bounds,
        )
    theta = {k: v for k, v in split_data(exp, result.params)[0].items() if not k.startswith("_window")}
    entries = _adam_entries(result, theta, free, first_iteration)
    if shot is not None:  # after its Gauss-Newton steps
        theta = {**theta, **{n: jnp.asarray(shot.theta[n]) for n in free}}
    return _AdamStage(theta=theta, start=start_theta, entries=entries, iterations=result.iterations,
                      grad_norm=result.grad_norm, resumed=result.resume, shot=shot)


def _adam_entries(result, theta: dict, free, first: int) -> FitHistory:
    """The history entries of an Adam `FitResult` numbered from `first`, then the state after its last update
    (`theta`, the result's loss) as one more entry."""
    h = result.history
    iterations = tuple(first + i for i in h["iteration"]) + (first + result.iterations,)
    return FitHistory(
        iteration=iterations, loss=tuple(h["loss"]) + (result.loss,),
        params={n: tuple(h["params"][n]) + (record_value(theta[n]),) for n in free},
        stage=("adam",) * len(iterations), grad_norm=tuple(h.get("grad_norm", [])),
        grad_norms={n: tuple(v) for n, v in h.get("grad_norms", {}).items()},
        backoffs=tuple(first + int(b) for b in h.get("backoffs", [])))


def _lm_entries(records, free, first: int) -> FitHistory:
    """The history entries of the polish's accepted steps `records` [(loss, {quantity: value})], numbered
    from `first`."""
    return FitHistory(iteration=tuple(first + k for k in range(len(records))),
                      loss=tuple(cost for cost, _ in records),  # |r|^2 = the image loss (on the LM stage's horizon)
                      params={n: tuple(record_value(values[n]) for _, values in records) for n in free},
                      stage=("lm",) * len(records))


def _polish_stage(exp: Experiment, target: Array, theta: dict, config: FitConfig, free, shot) -> _Polish:
    """A round's polish after its Adam stage (`_Polish`). Multiple shooting's polish ran inside its Adam stage
    (`shot`): its steps are read off."""
    n_scalars = sum(int(np.size(theta[n])) for n in polished(free))
    if config.polish > 0 and n_scalars > LM_MAX_SCALARS and config.progress:
        print(f"  (no Levenberg-Marquardt polish: {n_scalars} free scalars > {LM_MAX_SCALARS})")
    scalars_only = all(np.size(theta[n]) == 1 for n in free)
    if config.polish > 0 and config.window is not None and not scalars_only and config.progress \
            and not multiple_shooting(config):
        print("  (no Levenberg-Marquardt polish: a windowed fit polishes scalar quantities only)")
    if multiple_shooting(config):
        polish = (shot.history.get("polish") if shot is not None else None) or {"loss": []}
        return _Polish(theta, [(c, {n: polish[n][k] for n in free}) for k, c in enumerate(polish["loss"])], {})
    if config.polish > 0 and config.window is not None and scalars_only and n_scalars <= LM_MAX_SCALARS:
        from gradsim_jax.sysid.windows.truncated import polish_truncated

        theta, records = polish_truncated(exp, target, theta, free, truncation_windows(exp, config),
                                          steps=config.polish, kind=config.loss, progress=config.progress)
        return _Polish({k: jnp.asarray(v) for k, v in theta.items()}, records, {})
    moved = polished(free)  # the albedo, when free, is held at Adam's estimate
    held = {n: theta[n] for n in free if n not in moved}
    if config.polish > 0 and moved and sum(int(np.size(theta[n])) for n in moved) <= LM_MAX_SCALARS:
        info: dict = {}  # levenberg_marquardt fills it
        theta, records = levenberg_marquardt(exp, target, theta, moved, steps=config.polish, kind=config.loss,
                                             frame_stride=config.frame_stride, progress=config.progress, info=info)
        records = [(cost, {**held, **values}) for cost, values in records]
        return _Polish(theta, records, info, levenberg_marquardt=True)
    return _Polish(theta, None, {})


def record_value(x):
    """A quantity's value as a history entry holds it.

    Args:
        x: the value (a scalar or an array, any units).

    Returns:
        a float for a scalar, a copy of the array up to 64 elements, else the mean as a float.
    """
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else (x.copy() if x.size <= 64 else float(np.mean(x)))
