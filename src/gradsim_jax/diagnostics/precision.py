"""Evaluating one loss in float32 and in float64: casting parameter trees and switching JAX's x64 mode.

A loss that should be checked in both precisions must compute in the dtype of its parameters: every array it
uses either travels in the parameter tree (the system-identification losses carry the scene and the target
video there, `sysid.with_data`) or is created from it. `at_precision(bits)` is the one place the x64 flag is
switched, as a context (`jax.enable_x64`), so nothing leaks into the caller's code. On a backend without native
float64 (a TPU) the float64 side runs on the host CPU (`compilation.on_host`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import on_host

Array = Any


@contextlib.contextmanager
def at_precision(bits: int) -> Iterator[Any]:
    """Context in which JAX's default float has `bits` (32 or 64) bits; yields that dtype.

    Args:
        bits: 32 or 64.

    Returns:
        a context manager yielding jnp.float32 or jnp.float64.
    """
    if bits not in (32, 64):
        raise ValueError(f"bits must be 32 or 64, got {bits!r}")
    if bits == 32:
        with jax.enable_x64(False):
            yield jnp.float32
        return
    with jax.enable_x64(True), on_host("the float64 side of a precision check"):
        yield jnp.float64


def cast_floats(tree: Any, dtype) -> Any:
    """`tree` with every floating-point leaf converted to `dtype` (integer and boolean leaves unchanged).

    Args:
        tree: a pytree (Python floats count as floating-point leaves).
        dtype: the float dtype.

    Returns:
        the tree with the same structure, its float leaves as jnp arrays of `dtype`.
    """

    def cast(leaf):
        if isinstance(leaf, (float, np.floating)) or (
                hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating)):
            return jnp.asarray(leaf, dtype)
        return leaf

    return jax.tree_util.tree_map(cast, tree)


def relative_difference(a, b, floor: float = 0.0) -> float:
    """|a - b| / max(|a|, |b|, floor) in float64 (L2 norms for arrays); 0 when both are 0.

    Args:
        a: a number or array.
        b: a number or array of a's shape.
        floor: the smallest scale divided by, in the unit of a and b.

    Returns:
        the relative difference, a float (inf when either is not finite).
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(float(np.linalg.norm(a)), float(np.linalg.norm(b)), floor)
    diff = float(np.linalg.norm(a - b))
    if not np.isfinite(diff) or not np.isfinite(scale):
        return float("inf")
    return 0.0 if diff == 0.0 else diff / max(scale, np.finfo(np.float64).tiny)


def json_ready(value):
    """`value` (nested dicts, lists, floats) with every non-finite float replaced by None (strict JSON).

    Args:
        value: nested dicts, lists, tuples (returned as lists) and numbers.

    Returns:
        the same structure with None for every non-finite float.
    """
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        return None
    return value
