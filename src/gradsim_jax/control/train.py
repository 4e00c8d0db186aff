"""Training a policy by gradient descent through the rollout, and the random-policy baseline to compare with.

`train_policy` is `gradsim_jax.fit.fit` (one jitted Adam step per iteration, progress, checkpoints of the
policy parameters, the optimizer state and the key, bitwise resume) on the loss
`loss_of_trajectory(rollout_fn(policy_params))`. `random_policy_baseline` evaluates the same objective for
n policies drawn by `init_policy` (vmapped, one compiled program).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import numpy as np
import optax

from gradsim_jax.compilation import jit
from gradsim_jax.control.policies import PolicyParams, init_policy
from gradsim_jax.fit import FitResult, fit
from gradsim_jax.typing import Array, named_leaves


def train_policy(
    loss_of_trajectory: Callable[[Any], Array],
    policy_params0: PolicyParams,
    rollout_fn: Callable[..., Any],
    *,
    iterations: int,
    learning_rate: float = 1e-2,
    key: Optional[Array] = None,
    uses_key: bool = False,
    optimizer: Optional[optax.GradientTransformation] = None,
    clip_norm: Optional[float] = None,
    checkpoint_dir: Optional[str] = None,
    checkpoint_every: int = 25,
    resume: bool = False,
    resume_anyway: bool = False,
    metadata: Optional[dict] = None,
    progress: bool = True,
    callback=None,
) -> FitResult:
    """Minimize `loss_of_trajectory(rollout_fn(policy_params))` over every float field of the policy.

    Args:
        loss_of_trajectory: `loss_of_trajectory(trajectory) -> scalar`.
        policy_params0: the initial `PolicyParams`.
        rollout_fn: `rollout_fn(policy_params) -> trajectory` (e.g. a closure over `simulate_policy`), or
            `rollout_fn(policy_params, key)` with uses_key=True.
        iterations: the number of updates.
        learning_rate: Adam's step size, unless `optimizer`.
        key: a `jax.random` key, split into a fresh key per iteration when uses_key (random initial states or
            pushes); None: none.
        uses_key: whether rollout_fn takes a key.
        optimizer: an optax optimizer; None: Adam(learning_rate).
        clip_norm: clip the gradient's global norm to this; None: no clipping.
        checkpoint_dir: as `fit` (the policy, the optimizer state and the key are saved; a resumed run is
            bitwise the uninterrupted one); None: no checkpoints.
        checkpoint_every: as `fit`: iterations between checkpoints.
        resume: as `fit`: continue from the checkpoint in checkpoint_dir.
        resume_anyway: as `fit`: resume even from a checkpoint made for other inputs.
        metadata: as `fit`: the inputs a checkpoint records and a resume compares; None: none.
        progress: print the progress.
        callback: as `fit`: `callback(iteration, params, loss, aux)` after every iteration; None: none.

    Returns:
        `fit`'s `FitResult`: `.params` the trained `PolicyParams`, `.history["loss"]` the loss per iteration.
    """
    if uses_key:
        def loss_fn(p, k):
            return loss_of_trajectory(rollout_fn(p, k))
    else:
        def loss_fn(p):
            return loss_of_trajectory(rollout_fn(p))

    # Sorted: the order jit gives the optimizer's dict of fields, so a checkpoint matches the resumed fit.
    free = tuple(sorted(name for name, _ in named_leaves(policy_params0, "")))
    return fit(loss_fn, policy_params0, free=free, optimizer=optimizer, learning_rate=learning_rate, steps=iterations,
               clip_norm=clip_norm, checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
               resume=resume, resume_anyway=resume_anyway, key=key, uses_key=uses_key, metadata=metadata,
               progress=progress, callback=callback)


def random_policy_baseline(
    key: Array,
    n: int,
    objective: Callable[[PolicyParams], Array],
    *,
    inputs: int,
    outputs: int,
    scale: float = 0.1,
    hidden: Optional[int] = None,
    dtype=None,
    batch_size: Optional[int] = None,
) -> dict:
    """The objective (lower is better) of n random policies `init_policy(k_i, inputs, outputs, scale=...,
    hidden=...)`, k_i = split(key, n).

    Evaluated in one jitted program, `batch_size` policies at a time (None: all n at once, vmapped).

    Args:
        key: a `jax.random` key.
        n: the number of random policies (>= 1).
        objective: `objective(policy_params) -> scalar`, traceable.
        inputs: the policies' input size.
        outputs: the policies' output size.
        scale: `init_policy`'s scale: the typical pre-tanh output for features of order one.
        hidden: the hidden layer's size of a two-layer policy; None: one layer.
        dtype: the policies' float dtype; None: JAX's default float.
        batch_size: policies evaluated at a time; None: all n.

    Returns:
        {"mean", "best" (min), "std", "values" [n] np.ndarray}.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"random_policy_baseline needs n >= 1, got {n!r}")
    keys = jax.random.split(key, n)

    def one(k):
        return objective(init_policy(k, inputs, outputs, scale=scale, hidden=hidden, dtype=dtype))

    values = np.asarray(jit(lambda ks: jax.lax.map(one, ks, batch_size=batch_size or n))(keys))
    return {"mean": float(values.mean()), "best": float(values.min()), "std": float(values.std()),
            "values": values}
