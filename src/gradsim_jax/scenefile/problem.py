"""A scene file's fit problem for the diagnostics (`load_problem` -> `diagnostics.problem.SceneProblem`).

The same path `gradsim-jax fit` takes (`scenefile.job.load_fit_job`): the experiment, the target frames, the
[fit] free quantities, loss kind and frame stride, and the [initial] guess. Without a target video (no
`--target`, no [target] video) the target is rendered from the scene's own [material] values, which are
then the truth.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from gradsim_jax.diagnostics.problem import SceneProblem
from gradsim_jax.sysid import as_theta, perturbed, simulate_video, with_camera_pose
from gradsim_jax.sysid.quantities import focused
from gradsim_jax.scenefile.job import load_fit_job
from gradsim_jax.scenefile.reader import load_scene
from gradsim_jax.scenefile.target import read_target


def load_problem(scene, *, target=None, mask=None, key_color=None, perturb: Optional[float] = None,
                 seed: int = 0) -> SceneProblem:
    """The fit problem of the scene file `scene` (see the module docstring).

    Args:
        scene: the scene file (TOML), a str or Path.
        target: the target video (as --target), or None for [target] video; with neither, the target is
            rendered from [material].
        mask: the alpha mask video or folder (as --mask), or None for [target] mask.
        key_color: [3] RGB in [0, 1] of the target's plain background (as --key-color), or None.
        perturb: when the target is rendered from [material] and [initial] leaves every free quantity at its
            true value (where the gradient vanishes), start from the truth moved by this relative amount
            (random signs, `seed`; velocity by this fraction of its mean speed); None keeps the truth.
        seed: random seed of the perturbation's signs.

    Returns:
        The `SceneProblem`, focused on the free quantities.

    Raises:
        SceneFileError / ValueError / FileNotFoundError: as `gradsim-jax fit` does.
    """
    spec = load_scene(scene)
    config = spec.fit_config
    notes = []
    if target is not None or read_target(spec).video:
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
    exp, theta = focused(exp, as_theta(exp, initial), config.free)
    return SceneProblem(experiment=exp, target=np.asarray(frames), free=tuple(config.free), theta=theta,
                        truth=truth, kind=kind, frame_stride=stride, notes=tuple(notes), path=str(spec.path))
