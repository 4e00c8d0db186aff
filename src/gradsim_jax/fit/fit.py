"""The optimization loop: recover parameters by gradient descent on a differentiable loss.

One jitted step does everything an iteration needs on the device: map the free fields from the
unconstrained space to physical values, evaluate `loss_fn` and its gradient with respect to the free
fields only, update them with optax, split the PRNG key, and compute finiteness flags and the values the
history records. The host fetches those few numbers once per iteration (one transfer), checks the flags,
logs, and checkpoints. The step is traced once per `fit` call; iteration and key are traced arguments,
so later iterations never recompile.

How `loss_fn` is called (arguments in this order, optional ones only when asked for):
    loss_fn(params)                                   default
    loss_fn(params, key)                              uses_key=True: a fresh key every iteration
    loss_fn(params, iteration)                        uses_iteration=True: traced int32 scalar
    loss_fn(params, key, iteration)                   both
`params` is the full physical parameter tree (fixed fields as given, free fields from the optimizer).
It returns a scalar loss, or `(loss, aux)` with `has_aux=True`.

Back-off: when the loss or gradient turns non-finite at the parameters an update reached, `fit` goes back
to the parameters before that update, clears the optimizer's momentum (Adam's first moment, SGD's trace:
left alone it would carry the next updates over the same edge) and applies the update again at half its
length, keeping updates at that scale from then on (`backoff` times at most; each recorded in
`history["backoffs"]` and warned with `FitBackoffWarning`). A stiff simulation's loss often has a cliff
(contact or inverted elements) that a full Adam step can jump over; the fit then goes on instead of
stopping with `FitDiverged`.

Iteration numbering: iteration i evaluates the loss at the parameters after i updates; `history` entry i
holds that loss and those parameters. After `steps` iterations the result holds the parameters after
`steps` updates and the loss there (one more evaluation by the same compiled step, update discarded).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from gradsim_jax.compilation import jit
from gradsim_jax.fit.checkpoint import (
    CheckpointError,
    FitState,
    Preempted,
    check_resume,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
    stop_requested,
)
from gradsim_jax.fit.options import (FIT_SHORTHANDS, Checkpoints, LossCall, Optimization, Stopping, check_bounds,
                                     check_clip, check_fit_options)
from gradsim_jax.fit.transforms import (
    Transform,
    TransformSpec,
    get_field,
    resolve_free,
    to_physical,
    to_unconstrained,
)
from gradsim_jax.typing import grouped_options

Array = Any

#: free fields with at most this many elements are recorded whole in the history; larger ones by their mean.
HISTORY_FULL_SIZE = 64


class FitBackoffWarning(UserWarning):
    """An update reached parameters of non-finite loss or gradient and was redone at half its length."""


class FitDiverged(Exception):
    """The loss or a gradient became NaN or infinite (after `backoff` halvings of the update, if any).

    Attributes:
      iteration: the iteration whose loss or gradient was non-finite.
      fields: names of the free fields whose gradient had non-finite entries.
      loss: the loss value at that iteration (may be finite when only gradients are not).
      params: physical parameters (full tree) of the last iteration with a finite loss and gradient, or the
        starting parameters of this call when there was none.
      last_good_iteration: the iteration `params` belongs to, or None.
      history: the history up to (not including) the failing iteration.
    """

    def __init__(self, iteration, fields, loss, params, last_good_iteration, history):
        self.iteration = iteration
        self.fields = tuple(fields)
        self.loss = loss
        self.params = params
        self.last_good_iteration = last_good_iteration
        self.history = history
        grads = (
            f"non-finite gradient in field(s) {', '.join(repr(f) for f in self.fields)}"
            if self.fields
            else "all gradients finite"
        )
        if last_good_iteration is None:
            kept = "no iteration of this call was finite; .params holds the starting parameters"
        else:
            kept = f".params holds the parameters of iteration {last_good_iteration}, the last finite one"
        super().__init__(f"fit diverged at iteration {iteration}: loss = {loss}, {grads}; {kept}")


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Outcome of `fit`.

    params: full physical parameter tree after the last update (fixed fields as given).
    loss: the loss at `params`.
    history: {"iteration": [int], "loss": [float], "grad_norm": [float], "grad_norms": {name: [float]},
      "params": {name: [float | np.ndarray]}, "final": {name: np.ndarray}, "backoffs": [int]}: per iteration
      the loss, the gradient's global norm and each free field's own norm (w.r.t. the unconstrained fields,
      before any clipping), and each free field in physical units (0-d fields as floats, fields of <= 64
      elements as arrays, larger ones as their mean), and every free field's full final value. Includes the
      iterations of runs this one resumed from. "backoffs" lists the iterations whose parameters were
      non-finite and were replaced by a half-length update (see the module docstring).
    iterations: optimizer updates applied in total (including resumed ones).
    wall_time: seconds this call took, compilation included.
    converged: True when the `ftol` criterion stopped the fit.
    stop_reason: "steps" (ran them all), "converged" (ftol) or "callback" (the callback asked to stop).
    state: the final `FitState` (unconstrained parameters, optimizer state, key), e.g. to continue.
    aux: `loss_fn`'s aux output at `params` (None unless has_aux).
    grad_norm: global norm of the loss's gradient at `params` w.r.t. the unconstrained free fields (the
      history's "grad_norm" list holds it for every iteration).
    resume: None for a fresh start; on resume {"checkpoint": file, "from_iteration": int,
      "checkpoint_inputs": the checkpoint's metadata (None if it stores none), "differences": {key: [the
      checkpoint's, this fit's]}, "resume_anyway": bool}.
    """

    params: Any
    loss: float
    history: dict
    iterations: int
    wall_time: float
    converged: bool
    stop_reason: str
    state: FitState
    aux: Any = None
    grad_norm: float = float("nan")
    resume: Optional[dict] = None


def make_step(loss_fn, transforms: dict[str, Transform], optimizer, uses_key, uses_iteration, has_aux,
               checks=None, clip=None):
    """The pure iteration `(state, base_params[, scale[, box]]) -> (state, loss, finite [1 + n_free], record,
    aux, error)`; `scale` multiplies the optimizer's update (None: not at all);
    record holds each free field (physical units), "grad_norm", the global norm of the loss's gradient
    with respect to the unconstrained parameters, and "grad_norms", {field: its own norm} (both before
    clipping); `clip` {field: c} scales a field's gradient down to norm c before the optimizer; `box`
    {field: (lo, hi)} clips the updated unconstrained values (projected steps; None or a missing field: not
    clipped); error is `checks(params)` (a checkify Error) or None. Scale and box are arguments, so fits that
    differ only in them (a schedule's length, bounds from another start) are one program.

    Args:
      loss_fn: the loss, called as the module docstring says.
      transforms: {free field: Transform}, sorted by name (`free_transforms`).
      optimizer: the optax GradientTransformation of the updates.
      uses_key: pass the iteration's key to `loss_fn`.
      uses_iteration: pass the iteration (traced int32) to `loss_fn`.
      has_aux: `loss_fn` returns `(loss, aux)`.
      checks: `checks(params) -> checkify Error` of the traced parameters, or None.
      clip: {field: c} per-field gradient norms (`check_clip`), or None.

    Returns:
      The step function `(state, base[, scale[, box]]) -> (state, loss, finite, record, aux, error)`.
    """

    def step(state: FitState, base: Any, scale=None, box=None):
        key, subkey = (None, None) if state.key is None else tuple(jax.random.split(state.key))

        def objective(u):
            args = [to_physical(base, u, transforms)]
            if uses_key:
                args.append(subkey)
            if uses_iteration:
                args.append(state.iteration)
            out = loss_fn(*args)
            return out if has_aux else (out, None)

        # Only the free fields are arguments of grad; the fixed ones are closed over through `base`.
        (loss, aux), grads = jax.value_and_grad(objective, has_aux=True)(state.u)
        norms = {n: jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree_util.tree_leaves(grads[n])))
                 for n in transforms}
        if clip:
            grads = {n: g * jnp.minimum(1.0, clip[n] / jnp.maximum(norms[n], jnp.finfo(norms[n].dtype).tiny))
                     if n in clip else g for n, g in grads.items()}
        updates, opt_state = optimizer.update(grads, state.opt_state, state.u)
        if scale is not None:
            updates = jax.tree_util.tree_map(lambda d: d * scale, updates)
        u = optax.apply_updates(state.u, updates)
        if box:
            u = {n: jnp.clip(v, *box[n]) if n in box else v for n, v in u.items()}
        finite = jnp.stack([jnp.isfinite(loss)] + [jnp.all(jnp.isfinite(grads[n])) for n in transforms])
        record = {}
        for n, t in transforms.items():
            x = t.inverse(state.u[n])
            record[n] = x if x.size <= HISTORY_FULL_SIZE else jnp.mean(x)
        record["grad_norm"] = jnp.sqrt(sum(jnp.square(v) for v in norms.values()))
        record["grad_norms"] = norms
        error = None if checks is None else checks(to_physical(base, state.u, transforms))
        return FitState(u, opt_state, key, state.iteration + 1), loss, finite, record, aux, error

    return step


def _clear_momentum(opt_state):
    """`opt_state` with its momentum zeroed: the fields named "mu" (Adam and its kin) or "trace" (SGD with
    momentum) wherever exactly one such field exists; others are unchanged."""
    for name in ("mu", "trace"):
        try:
            value = optax.tree_utils.tree_get(opt_state, name)
        except (KeyError, ValueError):  # several such fields (a chain of two momenta): leave them
            continue
        if value is not None:
            opt_state = optax.tree_utils.tree_set(opt_state, **{name: optax.tree_utils.tree_zeros_like(value)})
    return opt_state


def _numbered(fn):
    """`fn` traced with deterministic checkify codes (`physics.checks.deterministic_check_codes`): the same
    fit traced again is the same program, found in the persistent compilation cache."""
    from gradsim_jax.physics.checks import deterministic_check_codes

    @functools.wraps(fn)
    def traced(*args):
        with deterministic_check_codes():
            return fn(*args)

    return traced


def _converged(losses: list[float], ftol: float, patience: int) -> bool:
    """True when each of the last `patience` iterations changed the loss by at most `ftol` relatively."""
    if len(losses) <= patience:
        return False
    recent = np.asarray(losses[-patience - 1 :])
    change = np.abs(np.diff(recent)) / np.maximum(np.abs(recent[:-1]), np.finfo(np.float64).tiny)
    return bool(np.all(change <= ftol))


def cosine_schedule(steps: int, alpha: float = 0.0) -> Callable[[int], float]:
    """The factor `i -> (1 - alpha) (1 + cos(pi min(i, steps) / steps)) / 2 + alpha` for `fit(schedule=...)`:
    from 1 down to `alpha` over `steps` updates, as `optax.cosine_decay_schedule(1.0, steps, alpha)`.

    Args:
      steps: the updates the factor decays over (a positive int).
      alpha: the final factor, in [0, 1].

    Returns:
      The function of the iteration i giving the factor.
    """
    if not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive int; got {steps!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1]; got {alpha}")

    def factor(i: int) -> float:
        return (1.0 - alpha) * 0.5 * (1.0 + math.cos(math.pi * min(int(i), steps) / steps)) + alpha

    return factor


def fit(
    loss_fn: Callable[..., Any],
    params: Any,
    *,
    free: Optional[tuple[str, ...]] = None,
    transforms: Optional[dict[str, TransformSpec]] = None,
    optimization: Optional[Optimization] = None,
    stopping: Optional[Stopping] = None,
    checkpoints: Optional[Checkpoints] = None,
    loss_call: Optional[LossCall] = None,
    key: Optional[Array] = None,
    progress: bool = True,
    callback: Optional[Callable[[int, Any, float, Any], Optional[bool]]] = None,
    **flat,
) -> FitResult:
    """Minimize `loss_fn` over the free fields of `params`.

    The options come in four frozen records (`fit.options`), or as their fields under flat keyword names
    (`FIT_SHORTHANDS`): `fit(loss, p, steps=50, learning_rate=0.1)` is
    `fit(loss, p, stopping=Stopping(steps=50), optimization=Optimization(learning_rate=0.1))`.

    Args:
      loss_fn: scalar loss of the physical parameter tree; see the module docstring for its signature.
      params: parameter tree (registered dataclass or dict of arrays), physical units; initial guess.
      free: fields to optimize; None means every floating-point field. The others stay fixed.
      transforms: {field: "identity" | "log" | "softplus" | Bounded(lo, hi)}; unnamed free fields get
        "identity". Positive quantities should use "log" (or "softplus"); the initial values must lie in
        the transform's domain.
      optimization: `Optimization`: optimizer, learning_rate, schedule, clip_norm, clip, bounds, backoff.
      stopping: `Stopping`: steps, ftol, patience.
      checkpoints: `Checkpoints`: dir, every, resume, resume_anyway, metadata.
      loss_call: `LossCall`: uses_key, uses_iteration, has_aux, checks.
      key: PRNG key carried by the fit and split every iteration (saved in checkpoints; on resume the
        saved key is used).
      progress: show a tqdm progress bar (loss, it/s, ETA).
      callback: `callback(iteration, params, loss, aux)` after every iteration, with the physical
        parameters that loss was evaluated at; returning True stops the fit.
      **flat: the records' fields by flat name (`FIT_SHORTHANDS`): optimizer, learning_rate, schedule,
        clip_norm, clip, bounds, backoff; steps, ftol, patience; checkpoint_dir, checkpoint_every, resume,
        resume_anyway, metadata; uses_key, uses_iteration, has_aux, checks. TypeError for another name, or
        for one given together with its record.
    Returns:
      FitResult.
    Raises:
      FitDiverged: a non-finite loss or gradient that `backoff` halvings did not avoid, or at the starting
        (or resumed) parameters (names the fields and the iteration).
      TracedCheckError: a `checks` check failed (a ValueError).
      CheckpointError: resume from a missing, corrupt, or different problem's checkpoint, or from one
        past `steps`.
      Preempted: SIGTERM arrived under `checkpoint.preemptible`: the checkpoint of the next iteration boundary is
        written (when `checkpoints.dir` is set), then the fit stops.
      ValueError: bad arguments, detected before compilation.
    """
    options = grouped_options("fit", {"optimization": (Optimization(), optimization),
                                      "stopping": (Stopping(), stopping), "checkpoints": (Checkpoints(), checkpoints),
                                      "loss_call": (LossCall(), loss_call)}, flat, FIT_SHORTHANDS)
    opt, stop, ckpt, call = (options[k] for k in ("optimization", "stopping", "checkpoints", "loss_call"))
    check_fit_options(opt, stop, ckpt, call, key)
    started = time.perf_counter()
    tf, clip, box, optimizer, state = _prepare(params, free, transforms, opt, key)
    extra = _checkpoint_extra(tf, clip, opt.bounds, ckpt.metadata)
    step = make_step(loss_fn, tf, optimizer, call.uses_key, call.uses_iteration, call.has_aux, call.checks, clip)
    loop = _Loop(step=jit(_numbered(step)), params=params, tf=tf, box=_full_box(box, tf, state.u),
                 schedule=opt.schedule, backoff=opt.backoff, steps=stop.steps, ftol=stop.ftol, patience=stop.patience,
                 ckpt_file=checkpoint_path(ckpt.dir) if ckpt.dir is not None else None, every=ckpt.every,
                 extra=extra, callback=callback, progress=progress)
    history: dict = {"iteration": [], "loss": [], "params": {n: [] for n in tf}, "backoffs": []}
    resumed = None
    if ckpt.resume:
        state, history, resumed = _resume(loop.ckpt_file, state, extra, ckpt)
    start = int(state.iteration)
    if start > stop.steps:
        raise CheckpointError(f"{loop.ckpt_file}: the checkpoint is at iteration {start}, past steps={stop.steps}: "
                              f"ask for at least {start} iterations to resume it")
    state, loss, record, aux, stop_reason = _iterate(loop, state, history, start, ckpt.resume)
    history["final"] = {n: np.asarray(tf[n].inverse(state.u[n])) for n in tf}
    return FitResult(params=to_physical(params, state.u, tf), loss=float(loss), history=history,
                     iterations=int(state.iteration), wall_time=time.perf_counter() - started,
                     converged=stop_reason == "converged", stop_reason=stop_reason, state=state,
                     aux=aux if call.has_aux else None, grad_norm=float(record["grad_norm"]), resume=resumed)


def _full_box(box: Optional[dict], tf: dict, u0: dict) -> dict:
    """Every free field's (lo, hi) in the unconstrained space: its bounds', or (-inf, inf) where it has none, so
    bounded and unbounded fits share a program."""
    return {n: box[n] if box and n in box else tuple(jnp.asarray(b, u0[n].dtype) for b in (-jnp.inf, jnp.inf))
            for n in tf}


def free_transforms(params, free, transforms) -> dict[str, Transform]:
    """{free field: its transform} of `params`, sorted by name.

    Sorted: JAX orders dict leaves by key, so the compiled step returns the free fields sorted; keeping them in
    that order everywhere lets a checkpoint of free=("w", "b") resume and names the right field when one turns
    non-finite.

    Args:
      params: the parameter tree (physical units).
      free: the fields to optimize; None: every floating-point field.
      transforms: {field: transform spec}; unnamed free fields get "identity".

    Returns:
      {field: Transform}, sorted by field name.
    """
    return dict(sorted(resolve_free(params, free, transforms).items()))


def _prepare(params, free, transforms, opt: Optimization, key):
    """`fit`'s first stage: (free transforms, checked clip, unconstrained bounds box or None, optax optimizer,
    starting FitState)."""
    tf = free_transforms(params, free, transforms)
    clip = check_clip(opt.clip, tf)
    box = check_bounds(opt.bounds, tf, {n: get_field(params, n) for n in tf})
    optimizer = opt.transformation()
    u0 = to_unconstrained(params, tf)
    return tf, clip, box, optimizer, FitState(u=u0, opt_state=optimizer.init(u0), key=key, iteration=jnp.int32(0))


def _checkpoint_extra(tf, clip, bounds, metadata) -> dict:
    """What a checkpoint records besides the state and history, for the checks on resume."""
    extra = {"transforms": {n: repr(t) for n, t in tf.items()}}
    if clip:
        extra["clip"] = clip
    if bounds:
        extra["bounds"] = {n: [None if b is None else float(b) for b in bounds[n]] for n in sorted(bounds)}
    if metadata is not None:
        extra["metadata"] = metadata
    return extra


def _resume(ckpt_file, state: FitState, extra: dict, ckpt: Checkpoints):
    """(state, history, `FitResult.resume`) of the checkpoint in `ckpt_file`, after checking it was made for this
    fit (CheckpointError, or a warning where `resume_anyway` or where it records no inputs)."""
    metadata = ckpt.metadata
    saved, differences = (None, {}) if metadata is None else check_resume(ckpt_file, metadata, ckpt.resume_anyway)
    if saved is None and metadata is not None:
        warnings.warn(f"{ckpt_file}: the checkpoint records no inputs (written by an older version), so "
                      "nothing shows it was made for this target and these settings; resuming anyway",
                      stacklevel=3)
    saved_ckpt = load_checkpoint(ckpt_file, like=state)
    if saved_ckpt.extra.get("transforms") != extra["transforms"]:
        raise CheckpointError(
            f"{ckpt_file}: checkpoint was written with transforms {saved_ckpt.extra.get('transforms')}, "
            f"this fit uses {extra['transforms']}"
        )
    if saved_ckpt.extra.get("clip") != extra.get("clip"):
        raise CheckpointError(f"{ckpt_file}: checkpoint was written with gradient clipping "
                              f"{saved_ckpt.extra.get('clip')}, this fit uses {extra.get('clip')}")
    if saved_ckpt.extra.get("bounds") != extra.get("bounds"):
        text = f"{ckpt_file}: checkpoint was written with bounds {saved_ckpt.extra.get('bounds')}, this fit uses " \
               f"{extra.get('bounds')}"
        if not ckpt.resume_anyway:
            raise CheckpointError(text)
        warnings.warn(text + "; resuming anyway with this fit's bounds", stacklevel=3)
    state, history = saved_ckpt.state, saved_ckpt.history
    # Per-field norms travel in the checkpoint's JSON extras (exact for floats); none in older ones.
    history["grad_norms"] = {n: [float(v) for v in vs] for n, vs in saved_ckpt.extra.get("grad_norms", {}).items()}
    history["backoffs"] = [int(i) for i in saved_ckpt.extra.get("backoffs", [])]
    resumed = {"checkpoint": ckpt_file, "from_iteration": int(state.iteration), "checkpoint_inputs": saved,
               "differences": differences, "resume_anyway": ckpt.resume_anyway}
    return state, history, resumed


@dataclasses.dataclass(frozen=True)
class _Loop:
    """What `fit`'s iterations need besides the state and the history."""

    step: Callable
    params: Any
    tf: dict
    box: dict
    schedule: Optional[Callable[[int], float]]
    backoff: int
    steps: int
    ftol: Optional[float]
    patience: int
    ckpt_file: Any
    every: int
    extra: dict
    callback: Optional[Callable]
    progress: bool


def _iterate(loop: _Loop, state: FitState, history: dict, start: int, resumed: bool):
    """`fit`'s iterations from `state` (iteration `start`), recording into `history`: (final state, its loss,
    its record, its aux, the stop reason)."""
    stop_reason = "steps"
    prev = None
    saved_at = start if resumed else None
    it = start
    with tqdm(total=loop.steps, initial=start, disable=not loop.progress, desc="fit", unit="it",
              dynamic_ncols=True) as bar:
        while True:
            # Iteration `it` evaluates the loss at `state` (the parameters after `it` updates); past the last
            # iteration, or once stopped, that evaluation is the result's loss and its update is dropped.
            # Each back-off halves the updates from then on.
            new_state, loss, finite, record, aux, error = loop.step(
                state, loop.params, _update_scale(loop.schedule, it, len(history["backoffs"])), loop.box)
            # The only host sync of the iteration: loss, flags, checks and the recorded values in one transfer.
            loss, finite, record, error = jax.device_get((loss, finite, record, error))
            _raise_failed_checks(it, error)
            if not finite.all():
                state = _back_off(loop, it, loss, finite, prev, state, history)
                continue
            # `state` is finite here, so a checkpoint of it resumes past any back-off it needed.
            if loop.ckpt_file is not None and it != saved_at and (
                    (it > start and it % loop.every == 0) or it == loop.steps or stop_reason != "steps"):
                saved_at = it
                _save(loop, state, history)
            if it == loop.steps or stop_reason != "steps":
                break
            _stop_if_asked(loop, state, history, it, saved_at)
            _append_record(history, it, loss, record)
            bar.set_postfix(loss=f"{float(loss):.4e}", refresh=False)
            bar.update(1)
            prev, state = state, new_state
            it += 1
            stop_reason = _stop_reason(loop, history, it - 1, prev, float(loss), aux)
    return state, loss, record, aux, stop_reason


def _stop_if_asked(loop: _Loop, state: FitState, history: dict, it: int, saved_at: Optional[int]) -> None:
    """After SIGTERM under `checkpoint.preemptible`: write the checkpoint of iteration `it` (unless just written)
    and raise `Preempted`."""
    signum = stop_requested()
    if signum is None:
        return
    if loop.ckpt_file is not None and it != saved_at:
        _save(loop, state, history)
    raise Preempted(loop.ckpt_file, it, signum)


def _update_scale(schedule, i: int, backoffs: int) -> float:
    """The update's scale at iteration i: the schedule's factor, halved for each back-off so far."""
    value = 0.5 ** backoffs * (1.0 if schedule is None else float(schedule(i)))
    if not np.isfinite(value):
        raise ValueError(f"schedule({i}) is {value}; it must be a finite number")
    return value


def _raise_failed_checks(it: int, error) -> None:
    """TracedCheckError for a failed `checks` check of the parameters iteration `it` evaluated its loss at."""
    if error is not None:
        from gradsim_jax.physics.checks import raise_if_error

        raise_if_error(error, f"fit iteration {it}")


def _back_off(loop: _Loop, it: int, loss, finite, prev: Optional[FitState], state: FitState,
              history: dict) -> FitState:
    """The state of update `it` redone from `prev` at half its length (recorded and warned), or FitDiverged when
    there is no finite `prev` or no back-off left."""
    if prev is None or len(history["backoffs"]) >= loop.backoff:
        bad = [n for n, ok in zip(loop.tf, finite[1:]) if not ok]
        good = prev if prev is not None else state
        raise FitDiverged(iteration=it, fields=bad, loss=float(loss), params=to_physical(loop.params, good.u, loop.tf),
                          last_good_iteration=int(good.iteration) if prev is not None else None, history=history)
    history["backoffs"].append(it)
    scale = _update_scale(loop.schedule, it - 1, len(history["backoffs"]))  # update `it` again, from `prev`
    warnings.warn(FitBackoffWarning(
        f"fit iteration {it}: the loss or gradient is non-finite at the parameters the last update "
        f"reached; that update is redone at {0.5 ** len(history['backoffs']):g} of its length (later "
        f"ones too; {loop.backoff - len(history['backoffs'])} more halvings allowed)"), stacklevel=4)
    return loop.step(prev._replace(opt_state=_clear_momentum(prev.opt_state)), loop.params, scale, loop.box)[0]


def _save(loop: _Loop, state: FitState, history: dict) -> None:
    """Write the checkpoint of `state` and `history`."""
    save_checkpoint(loop.ckpt_file, state, history, {**loop.extra, "grad_norms": history.get("grad_norms", {}),
                                                     "backoffs": history["backoffs"]})


def _append_record(history: dict, it: int, loss, record: dict) -> None:
    """Add iteration `it`'s loss, gradient norms and free fields to `history` (taking the norms out of `record`)."""
    history["iteration"].append(it)
    history["loss"].append(float(loss))
    history.setdefault("grad_norm", []).append(float(record.pop("grad_norm")))
    norms = history.setdefault("grad_norms", {})
    for n, v in record.pop("grad_norms").items():
        norms.setdefault(n, []).append(float(v))
    for n, x in record.items():
        history["params"][n].append(float(x) if np.ndim(x) == 0 else np.array(x))


def _stop_reason(loop: _Loop, history: dict, it: int, state: FitState, loss: float, aux) -> str:
    """"callback" when the callback asks to stop after iteration `it` (evaluated at `state`), "converged" when
    `ftol` is met, else "steps"."""
    if loop.callback is not None and loop.callback(it, to_physical(loop.params, state.u, loop.tf), loss, aux):
        return "callback"
    if loop.ftol is not None and _converged(history["loss"], loop.ftol, loop.patience):
        return "converged"
    return "steps"
