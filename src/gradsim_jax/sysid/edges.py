"""What a fit measures of the target's edges: the blur that makes the render's edges as soft as the target's
(`blur_start`, for `FitConfig.blur`) and where the loss left lies (`edge_residual`: on the outlines or
not, for the convergence advice and `FitConfig.edge_model`)."""

from __future__ import annotations

import warnings
from typing import Any, Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.image_losses import loss_kind
from gradsim_jax.render.blur import edge_channel, edge_mask, matching_blur
from gradsim_jax.sysid.config import BLUR_AUTO, BLUR_MODES, BLUR_START, FitConfig
from gradsim_jax.sysid.experiment import Experiment
from gradsim_jax.sysid.simulated import simulate_video
from gradsim_jax.sysid.losses import loss_frames


Array = Any

def blur_start(exp: Experiment, target: Array, theta0: dict, config: FitConfig) -> tuple[dict, Optional[dict]]:
    """(theta0, what was decided about the blur or None) for `FitConfig.blur`.

    Args:
        exp: the experiment.
        target: [frames + 1, H, W, 4], the target video.
        theta0: the start, by name.
        config: the fit's `FitConfig` (its `blur`, `loss`, `frame_stride`, `progress`).

    Returns:
        (theta0, with "blur" where one is applied or fitted; the record of what was decided: "mode", "free",
        and "value" for a fixed width or "measured" (and "channel", "start") for a measured one; None when
        no blur was asked for or theta0 has one).
    """
    mode = config.blur
    if "blur" in theta0 or mode == "off":
        return theta0, None
    if mode not in BLUR_MODES:
        return {**theta0, "blur": jnp.asarray(float(mode), exp.dtype)}, {"mode": "fixed", "value": float(mode),
                                                                          "free": False}
    from gradsim_jax.physics import SimulationDiverged

    alpha = loss_kind(config.loss).uses_alpha
    try:
        _, start = simulate_video(exp, theta0)
    except SimulationDiverged as e:
        warnings.warn(f"blur {mode}: the start does not simulate ({e}); no blur measured or fitted")
        return theta0, {"mode": mode, "measured": None, "free": False}
    frames = loss_frames(exp, config.frame_stride)
    measured = matching_blur(edge_channel(np.asarray(target)[frames], alpha), edge_channel(start[frames], alpha))
    free = mode == "fit" or measured > BLUR_AUTO
    info = {"mode": mode, "measured": measured, "channel": "alpha" if alpha else "luminance", "free": free}
    if config.progress:
        what = (f"fitting a Gaussian blur from {max(measured, BLUR_START):.2f} px" if free else "no blur")
        print(f"  edges: the target's measure {measured:.2f} px blurrier than the render's ({exp.settings.coverage} "
              f"coverage, {info['channel']}): {what}")
    if free:
        info["start"] = max(measured, BLUR_START)
        theta0 = {**theta0, "blur": jnp.asarray(info["start"], exp.dtype)}
    return theta0, info


def edge_residual(exp: Experiment, target: Array, theta: dict, config: FitConfig) -> dict:
    """Where the loss left at theta lies: {"residual_share": the fraction of the squared residual on the target's
    outlines (`render.blur.edge_mask`), "pixel_share": the fraction of the pixels they are, "coverage": the
    render's edge model, "blur": the blur applied (pixels) or None, "edge_model" and "blur_mode": the config's
    `edge_model` and `blur`, "inside_share" and "inside_pixel_share": the same inside the target's silhouette
    off its outlines (0 without an observed alpha), "appearance": whether theta fits one (an albedo)}; {} when the
    scene does not simulate at theta.

    Args:
        exp: the experiment.
        target: [frames + 1, H, W, 4], the target video.
        theta: the estimate, by name.
        config: the fit's `FitConfig` (its `loss`, `frame_stride`, `edge_model`, `blur`).

    Returns:
        the dict above.
    """
    from gradsim_jax.physics import SimulationDiverged

    frames = loss_frames(exp, config.frame_stride)
    tgt = np.asarray(target, np.float64)[frames]
    try:
        _, video_ = simulate_video(exp, theta)
    except SimulationDiverged:
        return {}
    pred = np.asarray(video_, np.float64)[frames]
    loss = loss_kind(config.loss)
    r2 = np.sum(np.square(pred[..., loss.channels] - tgt[..., loss.channels]), axis=-1)
    mask = edge_mask(edge_channel(tgt, loss.uses_alpha))
    inside = (tgt[..., 3] > 0.5) & ~mask if loss.uses_alpha else np.zeros_like(mask)
    total = float(r2.sum())
    blur = theta.get("blur")
    return {"residual_share": float(r2[mask].sum() / total) if total > 0 else 0.0,
            "pixel_share": float(mask.mean()), "coverage": exp.settings.coverage,
            "blur": None if blur is None else float(np.asarray(blur)), "edge_model": config.edge_model,
            "blur_mode": config.blur,
            # The object's inside (the target's silhouette, off its outlines): what its appearance explains.
            "inside_share": float(r2[inside].sum() / total) if total > 0 else 0.0,
            "inside_pixel_share": float(inside.mean()), "appearance": "albedo" in theta}
