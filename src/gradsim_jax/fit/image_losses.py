"""The image losses a fit compares a rendered video with its target by, registered by name.

Each loss says which channels of an RGBA video [..., 4] it compares (`channels`: its pixel residuals and
noise floor, and where its loss lies), whether it needs the target's alpha (`uses_alpha`: a target whose
alpha was not observed cannot be fitted with it) and its colours (`uses_color`), and how it reduces a
predicted and a target video to one number (`reduce`).

- "rgba": gradSim's loss, the mean squared error over all four channels (`losses.rgba_mse`).
- "rgb": colours only, for targets whose alpha is unknown or only approximate (e.g. from a key colour: the
  renderer's colours reach a little past its alpha).
- "silhouette": alpha only (`losses.silhouette_loss`).

A new loss is one `ImageLoss` entry in `_LOSSES`; `LOSSES` (the names, in order) and the CLI's `--loss`
choices follow from it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from gradsim_jax.fit.losses import rgba_mse, silhouette_loss

Array = Any


def rgb_mse(pred: Array, target: Array) -> Array:
    """Mean squared error over frames, pixels and the RGB channels only.

    Args:
        pred: [T, H, W, 4], the rendered RGBA video (any [..., >= 3] works).
        target: [T, H, W, 4], the target, the same shape.

    Returns:
        scalar.
    """
    return rgba_mse(pred[..., :3], target[..., :3])


@dataclasses.dataclass(frozen=True, eq=False)
class ImageLoss:
    """An image loss (see the module docstring).

    Attributes:
        name: the registered name (`FitConfig.loss`, `--loss`).
        channels: the slice of an RGBA video's last axis it compares.
        uses_alpha: whether it compares the target's alpha (which must then be observed).
        uses_color: whether it compares the target's colours.
        reduce: (pred [T, H, W, 4], target [T, H, W, 4]) -> the scalar loss.
    """

    name: str
    channels: slice
    uses_alpha: bool
    uses_color: bool
    reduce: Callable[[Array, Array], Array]


_LOSSES = (
    ImageLoss("rgba", slice(None), uses_alpha=True, uses_color=True, reduce=rgba_mse),
    ImageLoss("rgb", slice(0, 3), uses_alpha=False, uses_color=True, reduce=rgb_mse),
    ImageLoss("silhouette", slice(3, 4), uses_alpha=True, uses_color=False, reduce=silhouette_loss),
)

#: The registered image losses by name.
IMAGE_LOSSES = {loss.name: loss for loss in _LOSSES}
#: rgba: gradSim's loss; rgb: colours only (targets whose alpha is unknown or only approximate, e.g. from a
#: key color: the renderer's colours reach a little past its alpha); silhouette: alpha only.
LOSSES = tuple(IMAGE_LOSSES)


def loss_kind(name: str) -> ImageLoss:
    """The registered image loss `name`.

    Args:
        name: one of `LOSSES`.

    Returns:
        the loss; ValueError naming the registered ones for another name.
    """
    loss = IMAGE_LOSSES.get(name)
    if loss is None:
        raise ValueError(f"unknown loss {name!r}; choose from {LOSSES}")
    return loss


__all__ = ["IMAGE_LOSSES", "LOSSES", "ImageLoss", "loss_kind", "rgb_mse"]
