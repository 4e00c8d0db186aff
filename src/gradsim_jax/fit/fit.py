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
    check_resume,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from gradsim_jax.fit.transforms import (
    Transform,
    TransformSpec,
    get_field,
    resolve_free,
    to_physical,
    to_unconstrained,
)

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
    differ only in them (a schedule's length, bounds from another start) are one program."""

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


def _check_clip(clip, tf) -> Optional[dict]:
    """{field: float} of a valid `clip` (free fields, positive finite norms), or None; ValueError otherwise."""
    if clip is None:
        return None
    if not isinstance(clip, dict):
        raise ValueError(f"clip must be a dict {{field: max gradient norm}}; got {clip!r}")
    out = {}
    for n, c in clip.items():
        if n not in tf:
            raise ValueError(f"clip names {n!r}, which is not a free field; free: {list(tf)}")
        try:
            c = float(c)
        except (TypeError, ValueError):
            raise ValueError(f"clip[{n!r}] must be a positive number; got {c!r}") from None
        if not (np.isfinite(c) and c > 0):
            raise ValueError(f"clip[{n!r}] must be a positive finite number; got {c}")
        out[n] = c
    return dict(sorted(out.items())) or None


def check_bounds(bounds, tf, starts: dict) -> Optional[dict]:
    """{field: (lo, hi)} in the unconstrained space for `fit`'s `bounds` (free fields, lo < hi, the initial
    values `starts` {field: array} inside), or None; ValueError otherwise."""
    if not bounds:
        return None
    if not isinstance(bounds, dict):
        raise ValueError(f"bounds must be a dict {{field: (lo, hi)}}; got {bounds!r}")
    box = {}
    for n, pair in bounds.items():
        if n not in tf:
            raise ValueError(f"bounds names {n!r}, which is not a free field; free: {list(tf)}")
        try:
            lo, hi = pair
            lo, hi = (None if b is None else float(b) for b in (lo, hi))
        except (TypeError, ValueError):
            raise ValueError(f"bounds[{n!r}] must be a pair (lo, hi) of numbers or None; got {pair!r}") from None
        if lo is not None and hi is not None and not lo < hi:
            raise ValueError(f"bounds[{n!r}] needs lo < hi; got ({lo}, {hi})")
        x = np.asarray(starts[n], np.float64)
        if (lo is not None and np.any(x < lo)) or (hi is not None and np.any(x > hi)):
            raise ValueError(f"field {n!r} starts outside its bounds ({lo}, {hi}): {x.ravel()[:4]}")
        t = tf[n]
        dtype = jnp.asarray(starts[n]).dtype
        edge = lambda b, inf: jnp.asarray(inf if b is None else t.forward(jnp.asarray(b, dtype)), dtype)  # noqa: E731
        box[n] = (edge(lo, -jnp.inf), edge(hi, jnp.inf))
    return box


def _converged(losses: list[float], ftol: float, patience: int) -> bool:
    """True when each of the last `patience` iterations changed the loss by at most `ftol` relatively."""
    if len(losses) <= patience:
        return False
    recent = np.asarray(losses[-patience - 1 :])
    change = np.abs(np.diff(recent)) / np.maximum(np.abs(recent[:-1]), np.finfo(np.float64).tiny)
    return bool(np.all(change <= ftol))


def cosine_schedule(steps: int, alpha: float = 0.0) -> Callable[[int], float]:
    """The factor `i -> (1 - alpha) (1 + cos(pi min(i, steps) / steps)) / 2 + alpha` for `fit(schedule=...)`:
    from 1 down to `alpha` over `steps` updates, as `optax.cosine_decay_schedule(1.0, steps, alpha)`."""
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
    optimizer: Optional[optax.GradientTransformation] = None,
    learning_rate: float = 1e-2,
    steps: int = 100,
    clip_norm: Optional[float] = None,
    clip: Optional[dict[str, float]] = None,
    checkpoint_dir: Optional[str] = None,
    checkpoint_every: int = 100,
    resume: bool = False,
    key: Optional[Array] = None,
    uses_key: bool = False,
    uses_iteration: bool = False,
    has_aux: bool = False,
    progress: bool = True,
    callback: Optional[Callable[[int, Any, float, Any], Optional[bool]]] = None,
    ftol: Optional[float] = None,
    patience: int = 5,
    metadata: Optional[dict] = None,
    resume_anyway: bool = False,
    checks: Optional[Callable[[Any], Any]] = None,
    backoff: int = 4,
    bounds: Optional[dict[str, tuple]] = None,
    schedule: Optional[Callable[[int], float]] = None,
) -> FitResult:
    """Minimize `loss_fn` over the free fields of `params`.

    Args:
      loss_fn: scalar loss of the physical parameter tree; see the module docstring for its signature.
      params: parameter tree (registered dataclass or dict of arrays), physical units; initial guess.
      free: fields to optimize; None means every floating-point field. The others stay fixed.
      transforms: {field: "identity" | "log" | "softplus" | Bounded(lo, hi)}; unnamed free fields get
        "identity". Positive quantities should use "log" (or "softplus"); the initial values must lie in
        the transform's domain.
      optimizer: an optax optimizer; default `optax.adam(learning_rate)`.
      learning_rate: used by the default optimizer only.
      steps: total number of iterations (on resume: including those already done).
      clip_norm: when set, gradients are clipped to this global norm before the optimizer.
      clip: {field: c}: each named free field's gradient (w.r.t. its unconstrained value) is scaled down to
        norm c when it is longer, before the optimizer (and before `clip_norm`); the history records the
        norms before clipping. A checkpoint resumes only with the same `clip`.
      checkpoint_dir: directory for `checkpoint.npz`, written every `checkpoint_every` iterations and at
        the end; None writes nothing.
      resume: continue from the checkpoint in `checkpoint_dir` (it must exist: CheckpointError otherwise).
        The result is bitwise the one of an uninterrupted run on the same machine.
      key: PRNG key carried by the fit and split every iteration (saved in checkpoints; on resume the
        saved key is used).
      uses_key / uses_iteration: pass the per-iteration key / the iteration to `loss_fn`.
      has_aux: `loss_fn` returns `(loss, aux)`.
      progress: show a tqdm progress bar (loss, it/s, ETA).
      callback: `callback(iteration, params, loss, aux)` after every iteration, with the physical
        parameters that loss was evaluated at; returning True stops the fit.
      ftol, patience: stop ("converged") when the loss changed by at most `ftol` relatively in each of
        the last `patience` iterations; None never stops early.
      metadata: JSON-serializable description of what this fit is made for (content hashes of its data,
        its settings), stored in every checkpoint. On resume a checkpoint whose metadata differs is refused
        (CheckpointMismatch naming each difference) unless `resume_anyway`; one storing none (an older
        checkpoint) resumes with a warning. `FitResult.resume` records both.
      resume_anyway: resume even from a checkpoint whose metadata differs.
      checks: `checks(params) -> jax.experimental.checkify.Error` of the traced parameters (e.g.
        `gradsim_jax.physics.validate_traced`), evaluated in every iteration's compiled step; a failed
        check stops the fit with TracedCheckError naming the field, the index and the value.
      backoff: how many times in all an update that reached a non-finite loss or gradient is redone at half
        its length (later updates keep the reduced length); 0 raises FitDiverged at the first one. The
        scale and the iterations travel in checkpoints, so a resumed fit goes on as the uninterrupted one.
      bounds: {field: (lo, hi)} in physical units (None: that side open): every update that would leave the
        interval stops at its edge (a projected step, in the transform's space); the optimizer's state is
        kept, so it leaves the edge once the gradient turns. For limits a transform cannot carry because they
        depend on the problem, e.g. the damping that the explicit step allows (`sysid`); the initial values
        must lie inside. A checkpoint resumes only with the same bounds (or with `resume_anyway`, under the
        new ones).
      schedule: `schedule(i)`, a factor of update i + 1 (the one from the parameters after i updates), e.g.
        `cosine_schedule(steps)`: evaluated here and passed to the compiled step as data, so fits that differ in
        their length, their bounds or their start compile one program (a schedule inside `optimizer`, such as
        `optax.cosine_decay_schedule`, is a constant of the program). For Adam, `optax.adam(lr)` with
        `schedule=s` makes the updates of `optax.adam(lambda i: lr * s(i))`. None: 1.
    Returns:
      FitResult.
    Raises:
      FitDiverged: a non-finite loss or gradient that `backoff` halvings did not avoid, or at the starting
        (or resumed) parameters (names the fields and the iteration).
      TracedCheckError: a `checks` check failed (a ValueError).
      CheckpointError: resume from a missing, corrupt, or different problem's checkpoint, or from one
        past `steps`.
      ValueError: bad arguments, detected before compilation.
    """
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative int; got {steps!r}")
    if not isinstance(checkpoint_every, (int, np.integer)) or checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be a positive int; got {checkpoint_every!r}")
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs checkpoint_dir")
    if uses_key and key is None:
        raise ValueError("uses_key=True needs an explicit key, e.g. key=jax.random.key(0)")
    if patience < 1:
        raise ValueError(f"patience must be >= 1; got {patience}")
    if schedule is not None and not callable(schedule):
        raise ValueError(f"schedule must be a function of the iteration (e.g. cosine_schedule(steps)); got "
                         f"{schedule!r}")
    if not isinstance(backoff, (int, np.integer)) or backoff < 0:
        raise ValueError(f"backoff must be a non-negative int; got {backoff!r}")
    started = time.perf_counter()

    # Sorted by name: JAX orders dict leaves by key, so the compiled step returns the free fields sorted;
    # keeping them in that order everywhere lets a checkpoint of free=("w", "b") resume and names the
    # right field when one turns non-finite.
    tf = dict(sorted(resolve_free(params, free, transforms).items()))
    clip = _check_clip(clip, tf)
    box = check_bounds(bounds, tf, {n: get_field(params, n) for n in tf})
    optimizer = optimizer if optimizer is not None else optax.adam(learning_rate)
    if clip_norm is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(clip_norm), optimizer)
    u0 = to_unconstrained(params, tf)
    state = FitState(u=u0, opt_state=optimizer.init(u0), key=key, iteration=jnp.int32(0))
    history: dict = {"iteration": [], "loss": [], "params": {n: [] for n in tf}, "backoffs": []}
    extra = {"transforms": {n: repr(t) for n, t in tf.items()}}
    if clip:
        extra["clip"] = clip
    if bounds:
        extra["bounds"] = {n: [None if b is None else float(b) for b in bounds[n]] for n in sorted(bounds)}
    if metadata is not None:
        extra["metadata"] = metadata
    ckpt_file = checkpoint_path(checkpoint_dir) if checkpoint_dir is not None else None
    resumed = None
    if resume:
        saved, differences = (None, {}) if metadata is None else check_resume(ckpt_file, metadata, resume_anyway)
        if saved is None and metadata is not None:
            warnings.warn(f"{ckpt_file}: the checkpoint records no inputs (written by an older version), so "
                          "nothing shows it was made for this target and these settings; resuming anyway",
                          stacklevel=2)
        ckpt = load_checkpoint(ckpt_file, like=state)
        if ckpt.extra.get("transforms") != extra["transforms"]:
            raise CheckpointError(
                f"{ckpt_file}: checkpoint was written with transforms {ckpt.extra.get('transforms')}, "
                f"this fit uses {extra['transforms']}"
            )
        if ckpt.extra.get("clip") != extra.get("clip"):
            raise CheckpointError(f"{ckpt_file}: checkpoint was written with gradient clipping "
                                  f"{ckpt.extra.get('clip')}, this fit uses {extra.get('clip')}")
        if ckpt.extra.get("bounds") != extra.get("bounds"):
            text = f"{ckpt_file}: checkpoint was written with bounds {ckpt.extra.get('bounds')}, this fit uses " \
                   f"{extra.get('bounds')}"
            if not resume_anyway:
                raise CheckpointError(text)
            warnings.warn(text + "; resuming anyway with this fit's bounds", stacklevel=2)
        state, history = ckpt.state, ckpt.history
        # Per-field norms travel in the checkpoint's JSON extras (exact for floats); none in older ones.
        history["grad_norms"] = {n: [float(v) for v in vs] for n, vs in ckpt.extra.get("grad_norms", {}).items()}
        history["backoffs"] = [int(i) for i in ckpt.extra.get("backoffs", [])]
        resumed = {"checkpoint": ckpt_file, "from_iteration": int(state.iteration), "checkpoint_inputs": saved,
                   "differences": differences, "resume_anyway": resume_anyway}
    start = int(state.iteration)
    if start > steps:
        raise CheckpointError(f"{ckpt_file}: the checkpoint is at iteration {start}, past steps={steps}: ask for "
                              f"at least {start} iterations to resume it")

    step = jit(_numbered(make_step(loss_fn, tf, optimizer, uses_key, uses_iteration, has_aux, checks, clip)))
    # Every field is clipped (by -inf, inf where it has no bounds), so bounded and unbounded fits share a program.
    box = {n: box[n] if box and n in box else tuple(jnp.asarray(b, u0[n].dtype) for b in (-jnp.inf, jnp.inf))
           for n in tf}

    def factor(i, backoffs):
        """The update's scale at iteration i: the schedule's factor, halved for each back-off so far."""
        value = 0.5 ** backoffs * (1.0 if schedule is None else float(schedule(i)))
        if not np.isfinite(value):
            raise ValueError(f"schedule({i}) is {value}; it must be a finite number")
        return value

    def save():
        save_checkpoint(ckpt_file, state, history, {**extra, "grad_norms": history.get("grad_norms", {}),
                                                    "backoffs": history["backoffs"]})

    def check(it, error):
        if error is not None:  # checks of the parameters this iteration's loss was evaluated at
            from gradsim_jax.physics.checks import raise_if_error

            raise_if_error(error, f"fit iteration {it}")

    def diverged(it, loss, finite, prev):
        bad = [n for n, ok in zip(tf, finite[1:]) if not ok]
        good = prev if prev is not None else state
        return FitDiverged(
            iteration=it,
            fields=bad,
            loss=float(loss),
            params=to_physical(params, good.u, tf),
            last_good_iteration=int(good.iteration) if prev is not None else None,
            history=history,
        )

    stop_reason = "steps"
    prev = None
    saved_at = start if resume else None
    it = start
    with tqdm(total=steps, initial=start, disable=not progress, desc="fit", unit="it", dynamic_ncols=True) as bar:
        while True:
            # Iteration `it` evaluates the loss at `state` (the parameters after `it` updates); past the last
            # iteration, or once stopped, that evaluation is the result's loss and its update is dropped.
            # Each back-off halves the updates from then on.
            new_state, loss, finite, record, aux, error = step(state, params, factor(it, len(history["backoffs"])),
                                                               box)
            # The only host sync of the iteration: loss, flags, checks and the recorded values in one transfer.
            loss, finite, record, error = jax.device_get((loss, finite, record, error))
            check(it, error)
            if not finite.all():
                if prev is None or len(history["backoffs"]) >= backoff:
                    raise diverged(it, loss, finite, prev)
                history["backoffs"].append(it)
                scale = factor(it - 1, len(history["backoffs"]))  # update `it` again, from `prev`
                warnings.warn(FitBackoffWarning(
                    f"fit iteration {it}: the loss or gradient is non-finite at the parameters the last update "
                    f"reached; that update is redone at {0.5 ** len(history['backoffs']):g} of its length (later "
                    f"ones too; {backoff - len(history['backoffs'])} more halvings allowed)"), stacklevel=2)
                state = step(prev._replace(opt_state=_clear_momentum(prev.opt_state)), params, scale, box)[0]
                continue
            # `state` is finite here, so a checkpoint of it resumes past any back-off it needed.
            if ckpt_file is not None and it != saved_at and (
                    (it > start and it % checkpoint_every == 0) or it == steps or stop_reason != "steps"):
                saved_at = it
                save()
            if it == steps or stop_reason != "steps":
                break
            history["iteration"].append(it)
            history["loss"].append(float(loss))
            history.setdefault("grad_norm", []).append(float(record.pop("grad_norm")))
            norms = history.setdefault("grad_norms", {})
            for n, v in record.pop("grad_norms").items():
                norms.setdefault(n, []).append(float(v))
            for n, x in record.items():
                history["params"][n].append(float(x) if np.ndim(x) == 0 else np.array(x))
            bar.set_postfix(loss=f"{float(loss):.4e}", refresh=False)
            bar.update(1)
            prev, state = state, new_state
            it += 1
            if callback is not None and callback(it - 1, to_physical(params, prev.u, tf), float(loss), aux):
                stop_reason = "callback"
            elif ftol is not None and _converged(history["loss"], ftol, patience):
                stop_reason = "converged"

    iterations = int(state.iteration)
    grad_norm = record["grad_norm"]
    final = to_physical(params, state.u, tf)
    history["final"] = {n: np.asarray(tf[n].inverse(state.u[n])) for n in tf}
    return FitResult(
        params=final,
        loss=float(loss),
        history=history,
        iterations=iterations,
        wall_time=time.perf_counter() - started,
        converged=stop_reason == "converged",
        stop_reason=stop_reason,
        state=state,
        aux=aux if has_aux else None,
        grad_norm=float(grad_norm),
        resume=resumed,
    )
