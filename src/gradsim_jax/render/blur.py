"""A Gaussian point-spread function applied to rendered images: the blur of a lens, or of another renderer's
soft edges, as a differentiable nuisance of a fit (sysid quantity "blur"), and the edge sharpness a target
and a render are compared by to choose it (`edge_sharpness`, `matching_blur`).

Blur: each channel of an [..., H, W, C] image convolved with a normalized Gaussian of standard deviation
`sigma` pixels, separably (rows, then columns), over a static window of +-`BLUR_RADIUS` pixels (a sigma up
to `BLUR_RADIUS` / 3 is exact to 1e-2 of its tail); the image's border pixels are repeated beyond it, so a
uniform background stays what it is. sigma is traced (differentiable; 0 leaves the image unchanged,
with a finite derivative).

Edge sharpness of an image channel a (alpha, or the luminance when alpha is unknown): R = sum |grad a|^2 /
sum |grad a| over the pixels (forward differences). For one straight edge of contrast C blurred by a
Gaussian of width s, integral |a'| = C and integral a'^2 = C^2 / (2 sqrt(pi) s): R falls as 1 / s, whatever
the edge's length or position, so a target and a render of the same scene (even at a wrong guess of its
parameters: the same outlines, moved) compare by their R alone. `matching_blur` finds the sigma that gives
the render the target's R (bisection; 0 when the target is as sharp as the render or sharper).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

Array = Any

#: Half width of the blur's window in pixels (13 taps).
BLUR_RADIUS = 6
#: The largest blur `matching_blur` reports (pixels): beyond it the window truncates the Gaussian.
BLUR_MAX = BLUR_RADIUS / 3.0


def gaussian_weights(sigma, radius: int = BLUR_RADIUS, dtype=None):
    """Normalized weights [2 radius + 1] of a Gaussian of standard deviation `sigma` pixels (traceable; a
    sigma near 0 gives the unit impulse), in `dtype` (default: sigma's, at least float32).

    Args:
        sigma: pixels, the standard deviation (scalar, may be traced; floored at 1e-3).
        radius: pixels, the window's half width (static int).
        dtype: the weights' dtype (None: sigma's, at least float32).

    Returns:
        [2 radius + 1] weights summing to 1.
    """
    k = jnp.arange(-radius, radius + 1, dtype=dtype or jnp.result_type(sigma, jnp.float32))
    s = jnp.maximum(jnp.asarray(sigma, k.dtype), 1e-3)
    w = jnp.exp(-0.5 * jnp.square(k / s))
    return w / jnp.sum(w)


def gaussian_blur(image: Array, sigma, radius: int = BLUR_RADIUS) -> Array:
    """image [..., H, W, C] blurred by a Gaussian of `sigma` pixels (see the module docstring).

    Args:
        image: [..., H, W, C] the image.
        sigma: pixels, the Gaussian's standard deviation (scalar, may be traced).
        radius: pixels, the window's half width (static int).

    Returns:
        [..., H, W, C] the blurred image, in the image's dtype.
    """
    w = gaussian_weights(sigma, radius, image.dtype)
    nd = image.ndim
    for axis in (nd - 3, nd - 2):  # rows, then columns
        pad = [(0, 0)] * nd
        pad[axis] = (radius, radius)
        padded = jnp.pad(image, pad, mode="edge")
        n = image.shape[axis]
        image = sum(w[k] * jnp.take(padded, jnp.arange(k, k + n), axis=axis) for k in range(2 * radius + 1))
    return image


def edge_channel(frames, alpha: bool) -> np.ndarray:
    """[T, H, W] the channel edges are measured on: alpha, or the luminance of RGB (host).

    Args:
        frames: [T, H, W, C] frames (C = 4 when `alpha`, else at least 3).
        alpha: True to take channel 3 (alpha), False for the luminance 0.299 R + 0.587 G + 0.114 B.

    Returns:
        [T, H, W] float64 channel.
    """
    v = np.asarray(frames, np.float64)
    if alpha:
        return v[..., 3]
    return v[..., :3] @ np.array([0.299, 0.587, 0.114])


def edge_sharpness(channel) -> float:
    """R = sum |grad a|^2 / sum |grad a| of a channel [..., H, W] (forward differences; 0 when flat).

    Args:
        channel: [..., H, W] the channel a.

    Returns:
        float, R in channel units per pixel.
    """
    a = np.asarray(channel, np.float64)
    gx = np.diff(a, axis=-1)[..., :-1, :]
    gy = np.diff(a, axis=-2)[..., :, :-1]
    g = np.sqrt(gx * gx + gy * gy)
    total = g.sum()
    return float((g * g).sum() / total) if total > 0 else 0.0


def blur_host(channel, sigma: float) -> np.ndarray:
    """`gaussian_blur` of a channel [..., H, W] on the host (numpy).

    Args:
        channel: [..., H, W] the channel.
        sigma: pixels, the Gaussian's standard deviation (<= 0: the channel unchanged).

    Returns:
        [..., H, W] float64 blurred channel (computed in float32).
    """
    if sigma <= 0:
        return np.asarray(channel, np.float64)
    return np.asarray(gaussian_blur(jnp.asarray(np.asarray(channel, np.float32))[..., None], float(sigma))[..., 0],
                      np.float64)


def matching_blur(target_channel, rendered_channel, *, tol: float = 0.01) -> float:
    """The Gaussian blur (pixels, within `tol`) that gives `rendered_channel` [T, H, W] the edge sharpness of
    `target_channel` [T, H, W]: 0 when the target is at least as sharp, BLUR_MAX when it is blurrier than
    that blur makes the render.

    Args:
        target_channel: [T, H, W] the target's edge channel (`edge_channel`).
        rendered_channel: [T, H, W] the render's edge channel.
        tol: pixels, the bisection's tolerance on the blur.

    Returns:
        float, the blur sigma in pixels, in [0, BLUR_MAX].
    """
    goal = edge_sharpness(target_channel)
    if goal <= 0 or edge_sharpness(rendered_channel) <= goal:
        return 0.0
    lo, hi = 0.0, BLUR_MAX
    if edge_sharpness(blur_host(rendered_channel, hi)) > goal:
        return BLUR_MAX
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if edge_sharpness(blur_host(rendered_channel, mid)) > goal else (lo, mid)
    return 0.5 * (lo + hi)


def edge_mask(channel, fraction: float = 0.1) -> np.ndarray:
    """[..., H, W] bool: the pixels of a channel's outlines, where its gradient magnitude (central
    differences) exceeds `fraction` of its largest, widened by one pixel.

    Args:
        channel: [..., H, W] the channel.
        fraction: the share of the largest gradient magnitude a pixel's must exceed.

    Returns:
        [..., H, W] bool mask (all False for a flat channel).
    """
    a = np.asarray(channel, np.float64)
    gy, gx = np.gradient(a, axis=(-2, -1))
    g = np.hypot(gx, gy)
    top = g.max()
    if top <= 0:
        return np.zeros(a.shape, bool)
    m = g > fraction * top
    out = m.copy()
    out[..., 1:, :] |= m[..., :-1, :]
    out[..., :-1, :] |= m[..., 1:, :]
    out[..., :, 1:] |= m[..., :, :-1]
    out[..., :, :-1] |= m[..., :, 1:]
    return out
