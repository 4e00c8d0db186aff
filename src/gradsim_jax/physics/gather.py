"""Element <-> particle indexing for the force models: gather element corners, scatter-add their forces
(and `eager_if_concrete`, which keeps the elements' rest shapes out of XLA's constant folding).

Index arrays are checked to lie in [0, n) before any compilation (`validate_scene`), so both directions
promise in-bounds indices and skip negative-index wrapping: no clamping or bounds masks in the step, and
nothing for XLA to constant-fold when a topology's index arrays are compile-time constants (a scene closed
over by a jitted loss; wrapping 3 million bending indices took XLA seconds per step function).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gradsim_jax.typing import Array


def gather_corners(x: Array, elements: Array) -> Array:
    """x[elements]: [e, k, ...] from x [n, ...] and in-range indices elements [e, k]."""
    return jnp.asarray(x).at[elements].get(mode="promise_in_bounds", wrap_negative_indices=False)


def scatter_corners(f: Array, elements: Array, num_particles: int) -> Array:
    """Per-particle sum [n, 3] of per-corner forces f [e, k, 3] at in-range indices elements [e, k]."""
    f = jnp.asarray(f)
    return jnp.zeros((num_particles,) + f.shape[2:], f.dtype).at[elements.reshape(-1)].add(
        f.reshape((-1,) + f.shape[2:]), mode="promise_in_bounds", wrap_negative_indices=False)


def eager_if_concrete(fn, *args):
    """fn(*args), evaluated right away when no argument is traced (rest shapes of a scene closed over by a
    jitted function: staged into the program, XLA would constant-fold them at compile time)."""
    if any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(args)):
        return fn(*args)
    with jax.ensure_compile_time_eval():
        return fn(*args)
