"""Image-space losses between a rendered video and a target video, and schedules used while fitting.

Videos are float arrays `[T, H, W, 4]` (RGBA in [0, 1], alpha last), as produced by the renderer.
All functions are pure and traceable: they are meant to be called inside the user's `loss_fn`, which the
fit loop jits. Frame subsets may be traced index arrays (e.g. drawn from the fit's PRNG key), so a random
subsample per iteration does not recompile.

How a loss receives the iteration (for `sigma_schedule` or any curriculum): pass `uses_iteration=True`
to `fit`, which then calls `loss_fn(params, iteration)` (or `loss_fn(params, key, iteration)` together
with `uses_key=True`), `iteration` being a traced int32 scalar.

`rgba_mse` is the loss of gradSim (Jatavallabhula et al., ICLR 2021): the mean squared error over all
pixels and all four channels. The soft IoU of `silhouette_loss` is the one of Soft Rasterizer
(Liu et al., ICCV 2019).
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

Array = Any


def rgba_mse(pred: Array, target: Array) -> Array:
    """Mean squared error over frames, pixels and RGBA channels (gradSim's video loss).

    Args:
        pred: [T, H, W, 4], the rendered video (any shape equal to the target's works).
        target: [T, H, W, 4], the target video.

    Returns:
        scalar.
    """
    return jnp.mean(jnp.square(pred - target))


def soft_iou(pred_alpha: Array, target_alpha: Array, eps: float = 1e-6) -> Array:
    """Soft intersection over union of alpha mattes, per frame.

    Args:
        pred_alpha: [T, H, W] in [0, 1], the rendered matte.
        target_alpha: [T, H, W] in [0, 1], the target's matte.
        eps: added to the intersection and the union (pixels), so that empty mattes give 1.

    Returns:
        [T]; 1 where both mattes are empty (nothing to disagree about).
    """
    inter = jnp.sum(pred_alpha * target_alpha, axis=(-2, -1))
    union = jnp.sum(pred_alpha + target_alpha - pred_alpha * target_alpha, axis=(-2, -1))
    return (inter + eps) / (union + eps)


def silhouette_loss(pred: Array, target: Array, iou_weight: float = 0.0) -> Array:
    """Loss on the alpha channel only: MSE, plus `iou_weight * (1 - soft IoU)` averaged over frames.

    Silhouettes ignore shading and texture, so they are the loss of choice when the target's colours cannot
    be matched (unknown lighting).

    Args:
        pred: [T, H, W, 4], the rendered RGBA video.
        target: [T, H, W, 4], the target RGBA video.
        iou_weight: weight of the soft-IoU term (static; 0 skips it).

    Returns:
        scalar.
    """
    a, b = pred[..., 3], target[..., 3]
    loss = jnp.mean(jnp.square(a - b))
    if iou_weight:
        loss = loss + iou_weight * jnp.mean(1.0 - soft_iou(a, b))
    return loss


def frame_subsample(video: Array, every: int, offset: int = 0) -> Array:
    """Every `every`-th frame starting at `offset`: [T, ...] -> [ceil((T - offset) / every), ...].

    `every` and `offset` are static ints (they fix the output shape).

    Args:
        video: [T, ...], a video.
        every: the stride, >= 1.
        offset: the first frame, >= 0.

    Returns:
        [ceil((T - offset) / every), ...].
    """
    if every < 1 or offset < 0:
        raise ValueError(f"frame_subsample needs every >= 1 and offset >= 0; got every={every}, offset={offset}")
    return video[offset::every]


def random_frames(key: Array, num_frames: int, count: int) -> Array:
    """`count` distinct frame indices drawn uniformly from range(num_frames), sorted: int32 [count].

    Use with the fit's `key` (`uses_key=True`) for a random frame subset per iteration.

    Args:
        key: a JAX PRNG key.
        num_frames: the number of frames to draw from.
        count: how many to draw (static), <= num_frames.

    Returns:
        int32 [count], sorted.
    """
    idx = jax.random.choice(key, num_frames, shape=(count,), replace=False)
    return jnp.sort(idx).astype(jnp.int32)


def masked_mse(
    pred: Array, target: Array, mask: Optional[Array] = None, frames: Optional[Array] = None
) -> Array:
    """Mean squared error over the pixels a mask selects, optionally on a subset of frames.

    Args:
        pred: [T, H, W, C], the rendered video.
        target: [T, H, W, C], the target video.
        mask: None (all pixels), [H, W] (same mask every frame) or [T, H, W]; bool or float weights >= 0.
        frames: None (all frames) or int [k] frame indices (may be traced).

    Returns:
        scalar: sum(mask * mean_c(pred - target)^2) / sum(mask); 0 when the mask selects nothing.
    """
    if frames is not None:
        pred, target = pred[frames], target[frames]
        if mask is not None and mask.ndim == 3:
            mask = mask[frames]
    err = jnp.mean(jnp.square(pred - target), axis=-1)  # [T, H, W]
    if mask is None:
        return jnp.mean(err)
    if mask.ndim not in (2, 3):
        raise ValueError(f"mask must be [H, W] or [T, H, W]; got shape {mask.shape}")
    w = jnp.broadcast_to(mask.astype(err.dtype), err.shape)
    total = jnp.sum(w)
    # Double-where: an empty mask gives 0 with a finite (zero) gradient instead of 0/0.
    empty = total <= 0
    return jnp.where(empty, 0.0, jnp.sum(w * err) / jnp.where(empty, 1.0, total))


def sigma_schedule(iteration: Array, steps: int, sigma_start: float, sigma_end: float) -> Array:
    """Coarse-to-fine blur width: geometric interpolation from `sigma_start` (iteration 0) to `sigma_end`.

    sigma(i) = sigma_start * (sigma_end / sigma_start) ** (i / (steps - 1)), clamped at both ends.
    A wide soft-rasterizer sigma early smooths the loss landscape; a narrow one at the end sharpens it.

    Args:
        iteration: int scalar, may be traced (the fit's `iteration` with `uses_iteration=True`).
        steps: total number of iterations of the fit.
        sigma_start: screen units^2, > 0, the width at iteration 0.
        sigma_end: screen units^2, > 0, the width at the last iteration.

    Returns:
        float32 scalar.
    """
    if sigma_start <= 0 or sigma_end <= 0:
        raise ValueError(f"sigma_schedule needs positive sigmas; got {sigma_start}, {sigma_end}")
    t = jnp.clip(jnp.asarray(iteration, jnp.float32) / max(steps - 1, 1), 0.0, 1.0)
    return jnp.float32(sigma_start) * jnp.float32(sigma_end / sigma_start) ** t
