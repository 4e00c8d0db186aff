"""The image losses a fit compares a rendered video with its target by, and the pixel residuals of each."""

from __future__ import annotations

from typing import Any

from gradsim_jax.fit import rgba_mse, silhouette_loss

Array = Any

#: rgba: gradSim's loss; rgb: colours only (targets whose alpha is unknown or only approximate, e.g. from a
#: key color: the renderer's colours reach a little past its alpha); silhouette: alpha only.
LOSSES = ("rgba", "rgb", "silhouette")


def image_loss(kind: str, pred: Array, target: Array) -> Array:
    if kind == "rgba":
        return rgba_mse(pred, target)
    if kind == "rgb":
        return rgba_mse(pred[..., :3], target[..., :3])
    if kind == "silhouette":
        return silhouette_loss(pred, target)
    raise ValueError(f"unknown loss {kind!r}; choose from {LOSSES}")


def residual_channels(kind: str, video_: Array) -> Array:
    """The channels of a video [..., C] that the loss `kind` compares."""
    return {"rgba": video_, "rgb": video_[..., :3], "silhouette": video_[..., 3:]}[kind]
