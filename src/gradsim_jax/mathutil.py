"""Safe math: norms, normalization, division and acos whose gradients stay finite at 0.

Every function here uses the "double where" guard: the unsafe branch never sees an input at which its
derivative is infinite, so the gradient of the selected branch is finite even where the other branch
would be NaN. These are the only places in the package that divide by a norm.
"""

from __future__ import annotations

import jax.numpy as jnp


def safe_norm(v, axis: int = -1, keepdims: bool = False, eps: float = 0.0):
    """Euclidean norm with gradient 0 (instead of NaN) at v = 0.

    Args:
        v: [..., d] array of vectors (any unit; the norm has the same unit).
        axis: the axis summed over (the vectors' components).
        keepdims: keep `axis` as a dimension of size 1 in the result.
        eps: norms at or below `eps` (same unit as `v`) are returned as 0 with gradient 0.

    Returns:
        |v| along `axis`: `v`'s shape without `axis` (or with it of size 1 when `keepdims`).
    """
    sq = jnp.sum(v * v, axis=axis, keepdims=True)
    is_zero = sq <= eps * eps
    safe_sq = jnp.where(is_zero, jnp.ones_like(sq), sq)
    n = jnp.where(is_zero, jnp.zeros_like(sq), jnp.sqrt(safe_sq))
    return n if keepdims else jnp.squeeze(n, axis=axis)


def safe_normalize(v, axis: int = -1, eps: float = 1e-20):
    """v / |v|, and 0 where |v| <= eps; finite gradient everywhere.

    Args:
        v: [..., d] array of vectors (any unit).
        axis: the axis of the vectors' components.
        eps: vectors of norm at or below `eps` (same unit as `v`) become 0.

    Returns:
        Unit vectors (dimensionless) of `v`'s shape.
    """
    sq = jnp.sum(v * v, axis=axis, keepdims=True)
    small = sq <= eps * eps
    inv = jnp.where(small, jnp.zeros_like(sq), 1.0 / jnp.sqrt(jnp.where(small, jnp.ones_like(sq), sq)))
    return v * inv


def safe_div(a, b, eps: float = 1e-30):
    """a / b, and 0 where |b| <= eps; finite gradient everywhere.

    Args:
        a: numerator, an array broadcastable with `b`.
        b: denominator, an array broadcastable with `a`.
        eps: denominators with |b| at or below `eps` (same unit as `b`) give 0.

    Returns:
        a / b with the broadcast shape of `a` and `b`.
    """
    small = jnp.abs(b) <= eps
    return jnp.where(small, jnp.zeros_like(a * b), a / jnp.where(small, jnp.ones_like(b), b))


def safe_acos(c, margin: float = 1e-7):
    """acos clamped to [-1 + margin, 1 - margin] so that its derivative stays finite at +-1.

    Args:
        c: array of cosines (dimensionless).
        margin: how far inside [-1, 1] `c` is clamped.

    Returns:
        rad, the angles, of `c`'s shape.
    """
    return jnp.arccos(jnp.clip(c, -1.0 + margin, 1.0 - margin))


def key_segment(times, t):
    """Which segment of increasing key times holds t, and how far along it t is (held before the first key
    and after the last).

    Args:
        times: [K] increasing key times, K >= 2.
        t: a time in the unit of `times` (a scalar, may be traced).

    Returns:
        (i, s): the segment's first key (int, 0 .. K - 2) and the fraction (t - times[i]) / (times[i + 1] -
        times[i]) clipped to [0, 1].
    """
    i = jnp.clip(jnp.searchsorted(times, t, side="right") - 1, 0, times.shape[0] - 2)
    return i, jnp.clip(safe_div(t - times[i], times[i + 1] - times[i]), 0.0, 1.0)
