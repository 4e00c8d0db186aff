"""The options of `fit` and `fit_batched`, grouped in four frozen records with defaults: `Optimization` (the
optimizer and what shapes its updates), `Stopping` (when the loop ends), `Checkpoints` (where it saves and
whether it resumes) and `LossCall` (how the loss function is called). `FIT_SHORTHANDS` and
`BATCHED_SHORTHANDS` map the flat keyword names the two functions also take (`fit(steps=50)`) to their record
and field (`fit(stopping=Stopping(steps=50))`). The checks of the values (ValueError before anything is
traced) are here too: `check_fit_options`, `check_steps`, `check_key`, `check_clip`, `check_bounds`."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax.numpy as jnp
import numpy as np
import optax


@dataclasses.dataclass(frozen=True)
class Optimization:
    """The optimizer and what shapes its updates.

    Attributes:
        optimizer: an optax optimizer; None: `optax.adam(learning_rate)`.
        learning_rate: used by the default optimizer only (in the unconstrained space of the free fields).
        schedule: `schedule(i)`, a factor of update i + 1 (the one from the parameters after i updates), e.g.
            `cosine_schedule(steps)`: evaluated on the host and passed to the compiled step as data, so fits that
            differ in their length, their bounds or their start compile one program (a schedule inside
            `optimizer`, such as `optax.cosine_decay_schedule`, is a constant of the program). For Adam,
            `optax.adam(lr)` with `schedule=s` makes the updates of `optax.adam(lambda i: lr * s(i))`. None: 1
            (`fit` only).
        clip_norm: when set, gradients are clipped to this global norm before the optimizer.
        clip: {field: c}: each named free field's gradient (w.r.t. its unconstrained value) is scaled down to
            norm c when it is longer, before the optimizer (and before `clip_norm`); the history records the
            norms before clipping. A checkpoint resumes only with the same `clip` (`fit` only).
        bounds: {field: (lo, hi)} in physical units (None: that side open): every update that would leave the
            interval stops at its edge (a projected step, in the transform's space); the optimizer's state is
            kept, so it leaves the edge once the gradient turns. For limits a transform cannot carry because
            they depend on the problem, e.g. the damping that the explicit step allows (`sysid`); the initial
            values must lie inside. A checkpoint resumes only with the same bounds (or with `resume_anyway`,
            under the new ones).
        backoff: how many times in all an update that reached a non-finite loss or gradient is redone at half
            its length (later updates keep the reduced length); 0 raises FitDiverged at the first one. The
            scale and the iterations travel in checkpoints, so a resumed fit goes on as the uninterrupted one
            (`fit` only; `fit_batched` freezes such a member instead).
    """

    optimizer: Optional[optax.GradientTransformation] = None
    learning_rate: float = 1e-2
    schedule: Optional[Callable[[int], float]] = None
    clip_norm: Optional[float] = None
    clip: Optional[dict] = None
    bounds: Optional[dict] = None
    backoff: int = 4

    def transformation(self) -> optax.GradientTransformation:
        """The optax optimizer these options make: `optimizer` (or Adam at `learning_rate`), after a clip to
        `clip_norm` when it is set.

        Returns:
            The optax GradientTransformation.
        """
        optimizer = self.optimizer if self.optimizer is not None else optax.adam(self.learning_rate)
        if self.clip_norm is not None:
            optimizer = optax.chain(optax.clip_by_global_norm(self.clip_norm), optimizer)
        return optimizer


@dataclasses.dataclass(frozen=True)
class Stopping:
    """When the loop ends.

    Attributes:
        steps: total number of iterations (on resume: including those already done).
        ftol: stop ("converged") when the loss changed by at most `ftol` relatively in each of the last
            `patience` iterations; None never stops early (`fit` only).
        patience: see `ftol`.
    """

    steps: int = 100
    ftol: Optional[float] = None
    patience: int = 5


@dataclasses.dataclass(frozen=True)
class Checkpoints:
    """Where `fit` (or `fit_batched`) saves its state and whether it resumes.

    Attributes:
        dir: directory for `checkpoint.npz`, written every `every` iterations and at the end; None writes
            nothing.
        every: iterations between checkpoints.
        resume: continue from the checkpoint in `dir` (it must exist: CheckpointError otherwise). The result is
            bitwise the one of an uninterrupted run on the same machine.
        resume_anyway: resume even from a checkpoint whose metadata differs.
        metadata: JSON-serializable description of what this fit is made for (content hashes of its data, its
            settings), stored in every checkpoint. On resume a checkpoint whose metadata differs is refused
            (CheckpointMismatch naming each difference) unless `resume_anyway`; one storing none (an older
            checkpoint) resumes with a warning. `FitResult.resume` records both.
    """

    dir: Optional[str] = None
    every: int = 100
    resume: bool = False
    resume_anyway: bool = False
    metadata: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class LossCall:
    """How the loss function is called, and what is checked in its compiled step.

    Attributes:
        uses_key: pass the per-iteration key to `loss_fn` (`loss_fn(params, key)`; `fit` module docstring).
        uses_iteration: pass the iteration, a traced int32 scalar (`loss_fn(params[, key], iteration)`).
        has_aux: `loss_fn` returns `(loss, aux)` (`fit` only).
        checks: `checks(params) -> jax.experimental.checkify.Error` of the traced parameters (e.g.
            `gradsim_jax.physics.validate_traced`), evaluated in every iteration's compiled step; a failed check
            stops the fit with TracedCheckError naming the field, the index and the value (`fit` only).
    """

    uses_key: bool = False
    uses_iteration: bool = False
    has_aux: bool = False
    checks: Optional[Callable[[Any], Any]] = None


#: `fit`'s flat keywords: {flat name: (record keyword, field)}.
FIT_SHORTHANDS = {
    "optimizer": ("optimization", "optimizer"),
    "learning_rate": ("optimization", "learning_rate"),
    "schedule": ("optimization", "schedule"),
    "clip_norm": ("optimization", "clip_norm"),
    "clip": ("optimization", "clip"),
    "bounds": ("optimization", "bounds"),
    "backoff": ("optimization", "backoff"),
    "steps": ("stopping", "steps"),
    "ftol": ("stopping", "ftol"),
    "patience": ("stopping", "patience"),
    "checkpoint_dir": ("checkpoints", "dir"),
    "checkpoint_every": ("checkpoints", "every"),
    "resume": ("checkpoints", "resume"),
    "resume_anyway": ("checkpoints", "resume_anyway"),
    "metadata": ("checkpoints", "metadata"),
    "uses_key": ("loss_call", "uses_key"),
    "uses_iteration": ("loss_call", "uses_iteration"),
    "has_aux": ("loss_call", "has_aux"),
    "checks": ("loss_call", "checks"),
}

#: `fit_batched`'s flat keywords (those it has always taken).
BATCHED_SHORTHANDS = {name: FIT_SHORTHANDS[name] for name in (
    "optimizer", "learning_rate", "clip_norm", "bounds", "steps", "uses_key", "uses_iteration", "checkpoint_dir",
    "checkpoint_every", "resume", "resume_anyway", "metadata")}


def check_steps(steps) -> None:
    """ValueError unless `steps` (`Stopping.steps`) is a non-negative int.

    Args:
      steps: the number of iterations asked for.
    """
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"steps must be a non-negative int; got {steps!r}")


def check_key(call: LossCall, key) -> None:
    """ValueError when the loss takes a key (`LossCall.uses_key`) and none is given.

    Args:
      call: how the loss is called.
      key: the PRNG key given, or None.
    """
    if call.uses_key and key is None:
        raise ValueError("uses_key=True needs an explicit key, e.g. key=jax.random.key(0)")


def check_checkpoints(ckpt: Checkpoints) -> None:
    """ValueError for a bad `Checkpoints` record (`fit`, `fit_batched`).

    Args:
        ckpt: the checkpoint options.
    """
    if not isinstance(ckpt.every, (int, np.integer)) or ckpt.every < 1:
        raise ValueError(f"checkpoint_every must be a positive int; got {ckpt.every!r}")
    if ckpt.resume and ckpt.dir is None:
        raise ValueError("resume=True needs checkpoint_dir")


def check_fit_options(opt: Optimization, stop: Stopping, ckpt: Checkpoints, call: LossCall, key) -> None:
    """`fit`'s ValueErrors for bad options, before anything is traced.

    Args:
        opt: the optimization options.
        stop: the stopping options.
        ckpt: the checkpoint options.
        call: how the loss is called.
        key: the PRNG key given, or None.
    """
    check_steps(stop.steps)
    check_checkpoints(ckpt)
    check_key(call, key)
    if stop.patience < 1:
        raise ValueError(f"patience must be >= 1; got {stop.patience}")
    if opt.schedule is not None and not callable(opt.schedule):
        raise ValueError(f"schedule must be a function of the iteration (e.g. cosine_schedule(steps)); got "
                         f"{opt.schedule!r}")
    if not isinstance(opt.backoff, (int, np.integer)) or opt.backoff < 0:
        raise ValueError(f"backoff must be a non-negative int; got {opt.backoff!r}")


def check_clip(clip, tf) -> Optional[dict]:
    """{field: float} of a valid `clip` (free fields, positive finite norms), or None; ValueError otherwise.

    Args:
        clip: {field: max gradient norm} (`Optimization.clip`), or None.
        tf: {free field: Transform}.

    Returns:
        {field: float} sorted by field, or None for no clipping.
    """
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
    values `starts` {field: array} inside), or None; ValueError otherwise.

    Args:
        bounds: {field: (lo, hi)} in physical units, None for an open side (`Optimization.bounds`), or None.
        tf: {free field: Transform}.
        starts: {field: array} the initial physical values (with a leading member axis for `fit_batched`).

    Returns:
        {field: (lo, hi)} of arrays in the unconstrained space (infinite for an open side), or None.
    """
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
