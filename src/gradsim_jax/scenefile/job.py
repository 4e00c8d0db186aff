"""The job of `gradsim-jax fit`, assembled: the scene file read, the target video loaded (at the render size,
undistorted), the experiment built, the fit configuration with the command line's overrides, the
initial guess and the truth (`load_fit_job` -> `FitJob`)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from gradsim_jax.fit.image_losses import IMAGE_LOSSES, loss_kind
from gradsim_jax.sysid import Experiment, FitConfig, check_config
from gradsim_jax.sysid.windows.kinds import refusal
from gradsim_jax.scenefile.build import read_simulation
from gradsim_jax.scenefile.camera import calibration_file
from gradsim_jax.scenefile.fit import read_fit_settings
from gradsim_jax.scenefile.reader import SceneSpec, load_scene
from gradsim_jax.scenefile.render import appearance_theta, read_render
from gradsim_jax.scenefile.target import read_target
from gradsim_jax.scenefile.schema import SceneFileError


@dataclasses.dataclass(frozen=True)
class FitJob:
    """Everything `gradsim-jax fit` needs, built once from a scene file and the command line
    (`load_fit_job`): the experiment, the target frames, the fit configuration, the initial guess, the
    truth (None unless the target was rendered from [material]), what was done to the target (`notes`),
    warnings to show, and what the report records about the inputs (`extra`)."""

    spec: SceneSpec
    experiment: Experiment
    frames: np.ndarray
    config: FitConfig
    initial: dict
    truth: Optional[dict]
    notes: list
    warnings: list
    extra: dict


def load_target_video(spec: SceneSpec, *, target=None, mask=None, key_color=None, all_frames: bool = False):
    """The target video of `spec` (or `target`, `mask`, `key_color` given on the command line) at the render
    size, undistorted when [camera] has distortion: (TargetVideo, undistort function or None).

    Args:
        spec: the validated scene file (`SceneSpec`).
        target: the target video (--target: .mp4, .gif, image or folder of images), or None for [target] video.
        mask: the alpha mask video or folder (--mask), or None for [target] mask.
        key_color: [3] RGB in [0, 1] of the target's plain background (--key-color), or None for [target]
            key_color.
        all_frames: every frame of the video (a prediction), not only the [simulation] frames + 1 a fit uses.

    Returns:
        (`TargetVideo`, frames [T, H, W, 4] at the render size; the function undistorting one frame, or None).

    Raises:
        SceneFileError: when neither --target nor [target] video names a video.
    """
    from gradsim_jax.render.calibration import undistorter
    from gradsim_jax.render.video import load_target

    tv, ren = read_target(spec), read_render(spec)
    video = target or (str(tv.video_path) if tv.video_path else None)
    if video is None:
        raise SceneFileError(f"{spec.path}: no target video: pass --target or set [target] video")
    mask = mask or (str(tv.mask_path) if tv.mask_path else None)
    key = key_color if key_color is not None else tv.key_color
    cal = spec.calibration()
    undistort = undistorter(cal) if cal is not None else None
    frames = None if all_frames else read_simulation(spec).frames
    video_ = load_target(video, (ren.height, ren.width), background=key, mask=mask,
                         tolerance=tv.tolerance, undistort=undistort,
                         expected_frames=None if frames is None else frames + 1)
    return video_, undistort


def filmed_experiment(spec: SceneSpec, video, background, frames: int) -> Experiment:
    """The experiment of `spec` as the target video films it: `frames` simulated frames, the intrinsics of the
    video's own size, the background picture behind it.

    Args:
        spec: the validated scene file (`SceneSpec`).
        video: the loaded `TargetVideo` (its native size).
        background: [H, W, 3] the background picture at the render size (`SceneSpec.background_image`), or None.
        frames: frames simulated after the initial state.

    Returns:
        The `Experiment`.
    """
    return spec.experiment(frames=frames, native_size=video.native_size, background_image=background)


def start_theta(spec: SceneSpec, exp: Experiment, video) -> tuple[dict, dict]:
    """Where a fit of `spec` starts: the scene file's quantities with the appearance's nuisances read off the
    video's first frame ([render] appearance, shadows; `scenefile.render.appearance_theta`).

    Args:
        spec: the validated scene file (`SceneSpec`).
        exp: the built `Experiment`.
        video: the loaded `TargetVideo`.

    Returns:
        (the start {quantity: value}, the appearance's part of it, {} without one).
    """
    appearance = appearance_theta(spec, exp, video.frames[0])
    return {**spec.initial_theta(exp), **appearance}, appearance


def resolve_loss(requested, target) -> str:
    """The image loss: as asked, or rgba where the target's alpha was observed and rgb otherwise.

    Args:
        requested: the loss asked for (a name of `sysid.LOSSES`), or None / "auto" to choose.
        target: the loaded `TargetVideo` (its `alpha_observed`).

    Returns:
        The loss name.

    Raises:
        ValueError: for an rgba or silhouette loss on a target without observed alpha.
    """
    if requested in (None, "auto"):
        return "rgba" if target.alpha_observed else "rgb"
    if requested in IMAGE_LOSSES and loss_kind(requested).uses_alpha and not target.alpha_observed:
        raise ValueError(
            f"the {requested} loss compares alpha, but the target has none (an RGB video: no alpha channel). "
            "Supply it in one of three ways: --mask VIDEO (or [target] mask), a target with an alpha channel "
            "(RGBA PNGs), or --key-color R G B (or [target] key_color) for a plain background; or use "
            "--loss rgb")
    return requested


def background_warning(spec: SceneSpec, target, exp: Experiment) -> Optional[str]:
    """A warning when the target's border does not look like the background the render composites over.

    Args:
        spec: the validated scene file (`SceneSpec`).
        target: the loaded `TargetVideo`, frames [T, H, W, 4] RGB + alpha in [0, 1].
        exp: the built `Experiment` (its background: RGB [3] or [H, W, 3] in [0, 1]).

    Returns:
        The warning, or None when alpha was observed, [render] background_image is set, or the border's median
        colour is within 0.1 of the background's mean in every channel.
    """
    if target.alpha_observed or read_render(spec).background_image is not None:
        return None
    frames = target.frames[..., :3]
    border = np.concatenate([frames[:, 0], frames[:, -1], frames[:, :, 0], frames[:, :, -1]], axis=1)
    seen = np.median(border.reshape(-1, 3), axis=0)
    assumed = np.asarray(exp.background, np.float32).reshape(-1, 3).mean(axis=0)
    if np.max(np.abs(seen - assumed)) <= 0.1:
        return None
    return (f"the target's border is about RGB {np.round(seen, 2).tolist()} but the render's background is "
            f"{np.round(assumed, 2).tolist()}: set [render] background to the colour behind the scene, or "
            "background_image to a picture of it (or \"median\")")


def input_paths(spec: SceneSpec, *, target=None, mask=None) -> dict:
    """The files a fit of `spec` reads, by what the user calls them ({"--target" or "[target] video": path, ...};
    those not given are left out): the scene file, the target and its mask, the background image and the
    camera's calibration file.

    Args:
        spec: the validated scene file (`SceneSpec`).
        target: the target video given on the command line (--target), or None.
        mask: the alpha mask given on the command line (--mask), or None.

    Returns:
        {what the user calls the file: its path}.
    """
    tv = read_target(spec)
    found = {"the scene file": spec.path,
             "--target": target, "[target] video": None if target else tv.video_path,
             "--mask": mask, "[target] mask": None if mask else tv.mask_path,
             "[camera] calibration": calibration_file(spec)}
    image = read_render(spec).background_image
    if image and image != "median":
        found["[render] background_image"] = spec.resolve(image)
    return {k: v for k, v in found.items() if v}


def load_fit_job(scene, *, target=None, mask=None, key_color=None, true_values: bool = False, out_dir=None,
                 **overrides) -> FitJob:
    """Read the scene file, load and prepare the target video, build the experiment and the fit
    configuration ([fit] with the command line's `overrides`: iterations, learning_rate, polish, rounds,
    round_iterations, loss, frame_stride, horizon, window, shooting, checkpoint_dir, checkpoint_every, resume,
    resume_anyway, progress; None keeps the scene's) and the initial guess. `out_dir`: where the fit will write
    its outputs, refused when that would overwrite one of its inputs (`sysid.check_inputs_kept`). SceneFileError
    or ValueError on any problem, before anything compiles.

    Args:
        scene: the scene file (TOML), a str or Path.
        target: the target video (--target), or None for [target] video.
        mask: the alpha mask video or folder (--mask), or None for [target] mask.
        key_color: [3] RGB in [0, 1] of the target's plain background (--key-color), or None for [target]
            key_color.
        true_values: the target was rendered from [material] (--true): the truth is recorded, and blur and
            edge_model default to "off" and "fixed" instead of "auto".
        out_dir: the fit's output folder, or None to skip the check that it overwrites no input.
        **overrides: `FitConfig` fields from the command line (listed above); None keeps the scene's.

    Returns:
        The `FitJob`.
    """
    from gradsim_jax.sysid import check_inputs_kept, with_camera_pose

    spec = load_scene(scene)
    if out_dir is not None:
        check_inputs_kept(out_dir, input_paths(spec, target=target, mask=mask))
    video_, undistort = load_target_video(spec, target=target, mask=mask, key_color=key_color)
    background = spec.background_image(video_.frames, undistort)
    exp = filmed_experiment(spec, video_, background, video_.frames.shape[0] - 1)
    settings = read_fit_settings(spec)
    base = settings.config
    given = {k: v for k, v in overrides.items() if v is not None}
    loss = resolve_loss(given.pop("loss", None) or base.loss, video_)
    # A recorded video's edges are measured against the render's (blur, edge model); a target rendered from
    # [material] by this renderer (--true) has the render's own.
    edges = {"blur": "off" if true_values else "auto", "edge_model": "fixed" if true_values else "auto"}
    edges = {k: v for k, v in edges.items() if k not in settings.edges_given and k not in given}
    config = dataclasses.replace(base, loss=loss, scene_file_sha256=spec.content_sha256(), **edges, **given)
    check_config(config)  # combinations of settings (e.g. window with horizon), before anything compiles
    refused = refusal(exp) if config.window is not None else None  # a kind windows cannot take (the smoke)
    if refused is not None:
        raise SceneFileError(f"{spec.path}: windowed fits ([fit] window, --window) are not available for "
                             f"[{refused.kind}]: {refused.file_reason}")
    if config.window is not None and exp.pin_path is not None:
        raise SceneFileError(f"{spec.path}: windowed fits ([fit] window, --window) do not move pinned vertices along "
                             "[scene] pin_key_times yet: fit the whole recording")
    initial, appearance = start_theta(spec, exp, video_)
    if appearance:  # [render] appearance = "video": nuisances read off the first frame, fitted with the rest
        config = dataclasses.replace(config, free=tuple(config.free) + tuple(
            n for n in appearance if n not in config.free))
    notes = [f"alpha: {video_.alpha_source or 'not observed'}", f"loss: {loss}"]
    if appearance:
        notes.append("appearance: " + ", ".join(
            (["albedo read from the first frame, fitted with the lights"] if "albedo" in appearance else [])
            + (["the shadow on the ground fitted"] if "shadow" in appearance else [])))
    if undistort is not None:
        notes.append("frames undistorted with the [camera] distortion coefficients")
    if background is not None:
        notes.append(f"background image: {read_render(spec).background_image}")
    warning = background_warning(spec, video_, exp)
    extra = {"command": "fit", "scene": str(spec.path),
             "target": {"path": str(target or read_target(spec).video), "alpha": video_.alpha_source,
                        "native_size": list(video_.native_size), "undistorted": undistort is not None,
                        "background_image": read_render(spec).background_image}}
    return FitJob(spec=spec, experiment=exp, frames=np.asarray(video_.frames), config=config,
                  initial=initial,
                  truth=dict(with_camera_pose(exp, exp.theta)) if true_values else None, notes=notes,
                  warnings=[warning] if warning else [], extra=extra)
