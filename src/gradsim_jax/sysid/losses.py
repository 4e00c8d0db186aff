"""The image losses a fit compares a rendered video with its target by (`image_loss`), the pixel residuals of
each, and the loss and residual functions of an experiment's theta (`make_loss`, `residual_with_target`), with
a growing horizon's frame weights."""

from __future__ import annotations

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.image_losses import LOSSES, loss_kind
from gradsim_jax.sysid.experiment import Experiment, as_theta, compiled, frames_at

Array = Any

# LOSSES: the names of the registered image losses (`gradsim_jax.fit.image_losses`), imported above and
# public here as before.


def image_loss(kind: str, pred: Array, target: Array) -> Array:
    """The image loss `kind` of a rendered video against its target (`fit.image_losses`).

    Args:
        kind: a registered loss name (`LOSSES`); ValueError naming them for another.
        pred: [T, H, W, 4], the rendered RGBA video.
        target: [T, H, W, 4], the target video.

    Returns:
        scalar.
    """
    return loss_kind(kind).reduce(pred, target)


def residual_channels(kind: str, video_: Array) -> Array:
    """The channels of a video that the loss `kind` compares.

    Args:
        kind: a registered loss name (`LOSSES`).
        video_: [..., 4], an RGBA video or frame.

    Returns:
        [..., C]: all four channels (rgba), RGB (rgb) or alpha (silhouette).
    """
    return video_[..., loss_kind(kind).channels]


def loss_frames(exp: Experiment, stride: int) -> np.ndarray:
    """The frames a loss compares: every `stride`-th from frame 1.

    Args:
        exp: the experiment (its `frames`).
        stride: the frame stride, >= 1.

    Returns:
        int [k] frame indices into a video of exp.frames + 1 frames.
    """
    # Frame 0 is the given initial state and carries no information: leave it out.
    return np.arange(1, exp.frames + 1, stride)


def make_loss(exp: Experiment, target: Array, kind: str = "rgba", frame_stride: int = 1,
              horizon: Optional[tuple[int, int]] = None):
    """Image loss of theta against the target video [frames + 1, H, W, 4]: `loss_fn(theta)`, or with
    `horizon = (start, ramp)` `loss_fn(theta, iteration)` weighting only the first
    start + (all - start) * iteration / ramp frames (a growing horizon, see `levenberg_marquardt`).

    Args:
        exp: the experiment that renders theta's video.
        target: [frames + 1, H, W, 4], the target video.
        kind: the image loss, a registered name (`LOSSES`).
        frame_stride: compare every `frame_stride`-th frame (`loss_frames`).
        horizon: None, or (start, ramp): the frames weighted start at `start` and grow to all over `ramp`
            iterations.

    Returns:
        `loss_fn(theta)` (or `loss_fn(theta, iteration)` with a horizon): the scalar loss.
    """
    target = jnp.asarray(target)
    idx = loss_frames(exp, frame_stride)
    tgt = target[idx]

    def frame_losses(theta):
        pred = frames_at(exp, theta, idx)
        return jax.vmap(lambda p, t: image_loss(kind, p[None], t[None]))(pred, tgt)

    if horizon is None:
        return lambda theta: jnp.mean(frame_losses(theta))
    start, ramp = horizon
    num = len(idx)

    def loss_fn(theta, iteration):
        h = start + (num - start) * jnp.minimum(iteration.astype(jnp.float32) / max(ramp, 1), 1.0)
        return jnp.mean(horizon_weights(num, h) * frame_losses(theta))

    return loss_fn


def residual_with_target(exp: Experiment, kind: str = "rgba", frame_stride: int = 1, dense: bool = True):
    """`residual(theta, target, weights=None)`: pixel residuals (pred - target) * sqrt(w_t / N), flattened,
    so that |r|^2 is the mean squared error (the rgba loss) with per-frame weights w (mean 1 for all ones).

    Args:
        exp: the experiment that renders theta's video.
        kind: the image loss, a registered name (`LOSSES`): the channels compared.
        frame_stride: compare every `frame_stride`-th frame (`loss_frames`).
        dense: render forward-mode differentiably (for Jacobians; `sysid.experiment.render_frames`).

    Returns:
        `residual(theta, target [frames + 1, H, W, 4], weights [k] or None)` -> the flat residuals.
    """
    idx = loss_frames(exp, frame_stride)

    def residual(theta, target, weights=None):
        tgt = residual_channels(kind, target[idx])
        pred = frames_at(exp, theta, idx, dense)
        r = (residual_channels(kind, pred) - tgt) / math.sqrt(tgt.size)
        if weights is not None:
            r = r * jnp.sqrt(weights)[:, None, None, None]
        return jnp.ravel(r)

    return residual


def horizon_weights(num: int, horizon) -> Array:
    """Frame weights [num]: 1 for the first `horizon` loss frames, 0 after, normalized to mean 1 over the
    frames used (so losses of different horizons are comparable).

    Args:
        num: the number of loss frames.
        horizon: how many loss frames count (a number, may be traced and fractional).

    Returns:
        [num] float32 weights.
    """
    w = (jnp.arange(num) < horizon).astype(jnp.float32)
    return w * (num / jnp.maximum(jnp.sum(w), 1.0))


def make_residual(exp: Experiment, target: Array, kind: str = "rgba", frame_stride: int = 1, dense: bool = True):
    """Pixel residuals of theta against a fixed target video (see `residual_with_target`).

    Args:
        exp: the experiment that renders theta's video.
        target: [frames + 1, H, W, 4], the target video.
        kind: the image loss, a registered name (`LOSSES`): the channels compared.
        frame_stride: compare every `frame_stride`-th frame (`loss_frames`).
        dense: render forward-mode differentiably (for Jacobians).

    Returns:
        `residual(theta)` -> the flat residuals.
    """
    target = jnp.asarray(target)
    residual = residual_with_target(exp, kind, frame_stride, dense)
    return lambda theta: residual(theta, target)


def loss_at(exp: Experiment, target: Array, theta: dict, config) -> float:
    """The fit's image loss over all its frames (`make_loss`) at theta (host float).

    Args:
        exp: the experiment that renders theta's video.
        target: [frames + 1, H, W, 4], the target video.
        theta: the quantities, by name.
        config: the fit's `FitConfig` (its `loss` and `frame_stride`).

    Returns:
        the loss, a float.
    """

    def loss(e, th, tgt):
        return make_loss(e, tgt, config.loss, config.frame_stride)(th)

    value = compiled(exp, loss, ("start_loss", config.loss, config.frame_stride))(as_theta(exp, theta), target)
    return float(value)
