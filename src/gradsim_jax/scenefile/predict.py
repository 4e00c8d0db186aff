"""The job of `gradsim-jax predict`: the scene file and the fit's report.json read, the whole target video loaded
(not only the frames the fit used), the experiment built for every frame to predict, the fitted quantities and
the fit's initial guess (`load_prediction_job` -> `PredictionJob`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import numpy as np

from gradsim_jax.scenefile.job import filmed_experiment, load_target_video, start_theta
from gradsim_jax.scenefile.reader import SceneSpec, load_scene
from gradsim_jax.scenefile.schema import SceneFileError
from gradsim_jax.sysid import Experiment, canonical


@dataclasses.dataclass(frozen=True)
class PredictionJob:
    """Everything `gradsim-jax predict` needs (`load_prediction_job`).

    Attributes:
        spec: the scene file.
        experiment: the experiment built for every frame predicted (experiment.frames + 1 of them).
        target: [T', H, W, 4] RGBA in [0, 1], the whole target video at the render size.
        alpha_observed: whether the target's alpha carries information (a mask, an alpha channel, a key colour).
        theta: {quantity: value}, the scene file's quantities with the fitted ones from report.json.
        initial: {quantity: value}, the scene file's initial guess (the fit's start).
        fitted_frames: how many frames the fit used.
        fit_report: the fit's report.json as a dict.
        reference: [T'', V, 3] m, reference positions of the render vertices, or None.
    """

    spec: SceneSpec
    experiment: Experiment
    target: np.ndarray
    alpha_observed: bool
    theta: dict
    initial: dict
    fitted_frames: int
    fit_report: dict
    reference: Optional[np.ndarray]


def read_fit_report(fit_dir) -> dict:
    """The fit's report.json in `fit_dir` (a folder, or the report.json itself).

    Args:
        fit_dir: the fit's output folder (`gradsim-jax fit --out`), or its report.json.

    Returns:
        The report as a dict.

    Raises:
        ValueError: naming the file, when it is missing, unreadable or holds no fitted estimates.
    """
    path = Path(fit_dir)
    path = path / "report.json" if path.is_dir() else path
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: no report.json: pass --fit the folder a fit wrote (gradsim-jax fit --out)") \
            from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the fit's report: {e}") from None
    if not isinstance(report, dict) or not isinstance(report.get("estimated"), dict) or "frames" not in report:
        raise ValueError(f"{path}: not a fit's report (no \"estimated\" quantities or \"frames\")")
    return report


def fitted_theta(exp: Experiment, initial: dict, report: dict, path) -> dict:
    """The scene file's quantities with the report's fitted estimates put in, shapes checked.

    Args:
        exp: the experiment (the quantities' shapes).
        initial: {quantity: value}, the scene file's quantities.
        report: the fit's report (its "estimated" entry).
        path: the report's path, for messages.

    Returns:
        {quantity: value}.
    """
    theta = dict(initial)
    for name, value in report["estimated"].items():
        key = canonical(name)
        value = np.asarray(value, np.float32)
        if key in exp.theta and np.shape(exp.theta[key]) != value.shape:
            raise ValueError(f"{path}: the fitted {name} has shape {list(value.shape)} but this scene's has "
                             f"{list(np.shape(exp.theta[key]))}: predict with the scene file that was fitted")
        theta[key] = value
    return theta


def load_prediction_job(scene, fit_dir, *, target=None, mask=None, key_color=None, frames: Optional[int] = None,
                        reference=None) -> PredictionJob:
    """Read the scene file and the fit's report, load the whole target, build the experiment for every frame
    to predict. SceneFileError or ValueError on any problem, before anything compiles.

    Args:
        scene: the scene file (TOML) that was fitted.
        fit_dir: the fit's output folder (its report.json).
        target: the target video (--target), or None for [target] video.
        mask: the alpha mask video or folder (--mask), or None for [target] mask.
        key_color: [3] RGB in [0, 1] of the target's plain background, or None for [target] key_color.
        frames: frames to predict after the fitted ones, or None: to the end of the target.
        reference: a .npy file of reference positions [T, V, 3] m of the render vertices, or None.

    Returns:
        The `PredictionJob`.
    """
    spec = load_scene(scene)
    report = read_fit_report(fit_dir)
    fitted = int(report["frames"]) + 1
    video, undistort = load_target_video(spec, target=target, mask=mask, key_color=key_color, all_frames=True)
    count = video.frames.shape[0] if frames is None else fitted + int(frames)
    if frames is not None and frames < 1:
        raise ValueError(f"--frames {frames}: predict at least one frame after the {fitted} fitted")
    if count <= fitted:
        raise ValueError(f"the target has {video.frames.shape[0]} frames and the fit used {fitted}: no frame is "
                         "left to predict; pass --frames N to simulate N more (scored where the target has them)")
    exp = filmed_experiment(spec, video, spec.background_image(video.frames, undistort), count - 1)
    exp = dataclasses.replace(exp, frames=count - 1)  # past [simulation] frames, which bounded the fit
    coverage = (report.get("edges") or {}).get("coverage")
    if coverage and coverage != exp.settings.coverage:  # the fit's edge model chose the other coverage
        exp = dataclasses.replace(exp, settings=dataclasses.replace(exp.settings, coverage=coverage))
    initial, _ = start_theta(spec, exp, video)
    ref = None
    if reference is not None:
        try:
            ref = np.load(reference)
        except (OSError, ValueError) as e:
            raise ValueError(f"--reference {reference}: cannot read it as a .npy array: {e}") from None
    try:
        theta = fitted_theta(exp, initial, report, Path(fit_dir))
    except KeyError as e:
        raise SceneFileError(f"{spec.path}: the fit estimated {e}, which this scene file does not have") from None
    return PredictionJob(spec=spec, experiment=exp, target=np.asarray(video.frames),
                         alpha_observed=video.alpha_observed, theta=theta, initial=initial, fitted_frames=fitted,
                         fit_report=report, reference=ref)
