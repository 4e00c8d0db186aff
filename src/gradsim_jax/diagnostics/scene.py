"""A scene file's fit problem as plain loss functions of a parameter dict, for the diagnostics.

The same path `gradsim-jax fit` takes (`scenefile.load_fit_job`): the experiment, the target frames, the
[fit] free quantities, loss kind and frame stride, and the [initial] guess. Without a target video (no
`--target`, no [target] video) the target is rendered from the scene's own [material] values, which are
then the truth. The parameters are the system-identification theta ({canonical quantity: value}) plus the
experiment's arrays and the target under `sysid._with_data`'s entry, so that casting the parameter tree to
float64 casts the whole scene and its target with it (`diagnostics.precision`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.sysid import (
    Experiment, _as_theta, _split_data, _with_data, frames_for, image_loss, make_loss, perturbed,
    simulate_video, vertices, with_camera_pose,
)
from gradsim_jax.sysid.quantities import focused

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
        return _with_data(self.theta, self.experiment, jnp.asarray(self.target))

    @property
    def loss_frames(self) -> np.ndarray:
        """The frames (indices of the video) the loss compares, in order."""
        return np.arange(1, self.experiment.frames + 1, self.frame_stride)

    def loss(self, params: dict) -> Array:
        """The fit's image loss (tiled renderer, as `gradsim-jax fit` minimizes it)."""
        theta, e, tgt = _split_data(self.experiment, params)
        return make_loss(e, tgt, self.kind, self.frame_stride)(theta)

    def frame_losses(self, params: dict, dense: bool = False) -> Array:
        """[K] image loss of each loss frame; `dense`: through the reference renderer (forward mode)."""
        theta, e, tgt = _split_data(self.experiment, params)
        idx = self.loss_frames
        pred = frames_for(e, vertices(e, theta)[idx], theta, dense=dense)
        return jax.vmap(lambda p, t: image_loss(self.kind, p[None], t[None]))(pred, tgt[idx])

    def loss_dense(self, params: dict) -> Array:
        """The fit's loss through the dense reference renderer (has forward-mode derivatives)."""
        return jnp.mean(self.frame_losses(params, dense=True))

    def horizon_losses(self, params: dict, dense: bool = False) -> Array:
        """[K] the fit's loss over the first k loss frames, k = 1..K (the mean of their frame losses)."""
        per_frame = self.frame_losses(params, dense)
        return jnp.cumsum(per_frame) / jnp.arange(1, per_frame.shape[0] + 1, dtype=per_frame.dtype)


def load_problem(scene, *, target=None, mask=None, key_color=None, perturb: Optional[float] = None,
                 seed: int = 0) -> SceneProblem:
    """The fit problem of the scene file `scene` (see the module docstring).

    perturb: when the target is rendered from [material] and [initial] leaves every free quantity at its
    true value (where the gradient vanishes), start from the truth moved by this relative amount (random
    signs, `seed`; velocity by this fraction of its mean speed); None keeps the truth.
    Raises SceneFileError / ValueError / FileNotFoundError as `gradsim-jax fit` does.
    """
    from gradsim_jax.scenefile import load_fit_job, load_scene

    spec = load_scene(scene)
    config = spec.fit_config
    notes = []
    if target is not None or spec.values["target"]["video"]:
        job = load_fit_job(scene, target=target, mask=mask, key_color=key_color, progress=False)
        exp, frames, initial, truth = job.experiment, job.frames, job.initial, None
        kind, stride = job.config.loss, job.config.frame_stride
        notes += list(job.notes)
    else:
        exp = spec.experiment(background_image=spec.background_image())
        _, frames = simulate_video(exp, {})
        truth = dict(with_camera_pose(exp, exp.theta)) if "camera_pose" in config.free else dict(exp.theta)
        initial = spec.initial_theta(exp)
        kind = "rgba" if config.loss in (None, "auto") else config.loss
        stride = config.frame_stride
        notes.append("no target video: target rendered from the scene's [material] values")
        same = all(np.array_equal(np.asarray(initial[n]), np.asarray(truth[n])) for n in config.free)
        if same and perturb:
            initial = perturbed(truth, config.free, seed=seed, low=perturb, high=perturb,
                                free_particles=exp.free_particles)
            notes.append(f"[initial] is the truth, where the gradient vanishes: evaluated at the truth moved by "
                         f"{perturb:g} (relative, seed {seed})")
        notes.append(f"loss: {kind}")
    exp, theta = focused(exp, _as_theta(exp, initial), config.free)
    return SceneProblem(experiment=exp, target=np.asarray(frames), free=tuple(config.free), theta=theta,
                        truth=truth, kind=kind, frame_stride=stride, notes=tuple(notes), path=str(spec.path))
