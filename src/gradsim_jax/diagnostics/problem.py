"""A fit problem as plain loss functions of a parameter dict, for the diagnostics (`SceneProblem`; a scene
file makes one with `scenefile.problem.load_problem`, the same path `gradsim-jax fit` takes).

The parameters are the system-identification theta ({canonical quantity: value}) plus the experiment's
arrays and the target under `sysid.with_data`'s entry, so that casting the parameter tree to float64 casts
the whole scene and its target with it (`diagnostics.precision`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.sysid import Experiment, split_data, with_data, frames_at, image_loss, make_loss
from gradsim_jax.sysid.smoke import pressure_solve_note

Array = Any


@dataclasses.dataclass(frozen=True)
class SceneProblem:
    """experiment; target [frames + 1, H, W, 4]; free (canonical names); theta (the point to examine, the
    experiment's dtype); truth (None unless the target was rendered from [material]); kind (image loss);
    frame_stride; notes (what was done, for the console and the JSON)."""

    experiment: Experiment
    target: np.ndarray
    free: tuple
    theta: dict
    truth: Optional[dict]
    kind: str
    frame_stride: int
    notes: tuple
    path: str

    @property
    def params(self) -> dict:
        """theta with the experiment's arrays and the target as data (fixed, cast along with theta)."""
        return with_data(self.theta, self.experiment, jnp.asarray(self.target))

    @property
    def loss_frames(self) -> np.ndarray:
        """The frames (indices of the video) the loss compares, in order."""
        return np.arange(1, self.experiment.frames + 1, self.frame_stride)

    def loss(self, params: dict) -> Array:
        """The fit's image loss (tiled renderer, as `gradsim-jax fit` minimizes it).

        Args:
            params: theta with the data entry (`SceneProblem.params`, possibly cast to another precision).

        Returns:
            scalar loss.
        """
        theta, e, tgt = split_data(self.experiment, params)
        return make_loss(e, tgt, self.kind, self.frame_stride)(theta)

    def frame_losses(self, params: dict, dense: bool = False) -> Array:
        """[K] image loss of each loss frame; `dense`: through the reference renderer (forward mode).

        Args:
            params: theta with the data entry (`SceneProblem.params`).
            dense: render with forward-mode derivatives (`render(autodiff=True)`).

        Returns:
            [K] the image loss of each of the K loss frames (`loss_frames`).
        """
        theta, e, tgt = split_data(self.experiment, params)
        idx = self.loss_frames
        pred = frames_at(e, theta, idx, dense)
        return jax.vmap(lambda p, t: image_loss(self.kind, p[None], t[None]))(pred, tgt[idx])

    def loss_dense(self, params: dict) -> Array:
        """The fit's loss through the renderer with forward-mode derivatives (`render(autodiff=True)`).

        Args:
            params: theta with the data entry (`SceneProblem.params`).

        Returns:
            scalar loss, the mean of the frame losses.
        """
        return jnp.mean(self.frame_losses(params, dense=True))

    def horizon_losses(self, params: dict, dense: bool = False) -> Array:
        """[K] the fit's loss over the first k loss frames, k = 1..K (the mean of their frame losses).

        Args:
            params: theta with the data entry (`SceneProblem.params`).
            dense: render with forward-mode derivatives (`render(autodiff=True)`).

        Returns:
            [K] the loss of each horizon.
        """
        per_frame = self.frame_losses(params, dense)
        return jnp.cumsum(per_frame) / jnp.arange(1, per_frame.shape[0] + 1, dtype=per_frame.dtype)


#: What a body kind says when a gradient check of a scene with it disagrees: `note(exp) -> str or None`, one per
#: kind that has something to say (the smoke: its pressure solve's tolerance, `sysid.smoke.pressure_solve_note`).
GRADCHECK_NOTES: list[Callable] = [pressure_solve_note]


def gradcheck_notes(exp: Experiment) -> list[str]:
    """The notes of `GRADCHECK_NOTES` that apply to the experiment, in registry order.

    Args:
        exp: the experiment whose gradient was checked.

    Returns:
        The notes (none: empty).
    """
    return [note for note in (fn(exp) for fn in GRADCHECK_NOTES) if note]
