"""Control (gradSim's control_cloth): choose the initial velocity so that the cloth lands where an image
shows, with an image loss of long reach (`control_loss`)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import optax

from gradsim_jax.fit import cosine_schedule
from gradsim_jax.fit import fit as run_fit
from gradsim_jax.fit import rgba_mse
from gradsim_jax.sysid.experiment import Experiment, as_theta, split_data, with_data, render_frames, trajectory
from gradsim_jax.sysid.simulated import simulate_video
from gradsim_jax.sysid.config import FitConfig, fit_inputs

Array = Any


def silhouette_moments(video: Array) -> Array:
    """Per frame: alpha-weighted centroid (x, y in [0, 1]) and sqrt of the covered fraction: [T, 3].

    Args:
        video: [..., H, W, 4] RGBA frames (the alpha channel is read).

    Returns:
        [..., 3]: centroid x and y as fractions of the width and height, sqrt of the covered fraction.
    """
    alpha = video[..., 3]
    h, w = alpha.shape[-2], alpha.shape[-1]
    mass = jnp.sum(alpha, axis=(-2, -1))
    safe = jnp.maximum(mass, 1e-6)
    ys = (jnp.arange(h, dtype=alpha.dtype) + 0.5) / h
    xs = (jnp.arange(w, dtype=alpha.dtype) + 0.5) / w
    cx = jnp.sum(alpha * xs, axis=(-2, -1)) / safe
    cy = jnp.sum(alpha * ys[:, None], axis=(-2, -1)) / safe
    return jnp.stack([cx, cy, jnp.sqrt(mass / (h * w) + 1e-12)], axis=-1)


def control_loss(pred: Array, target: Array, levels: int = 5) -> Array:
    """Image loss with a long reach: RGBA MSE of 2^k x 2^k block averages (k < levels, where the size
    divides) plus the squared difference of the silhouettes' centroids and sizes, which still has a useful
    gradient when rendered and target shapes do not overlap at all.

    Args:
        pred: [T, H, W, 4] rendered RGBA frames.
        target: [T, H, W, 4] target RGBA frames.
        levels: the number of block sizes (1, 2, 4, ... pixels) compared.

    Returns:
        scalar loss.
    """
    loss = rgba_mse(pred, target)
    h, w = pred.shape[-3], pred.shape[-2]
    for k in range(1, levels):
        f = 2 ** k
        if h % f or w % f:
            break

        def pool(v, f=f):
            return v.reshape(*v.shape[:-3], h // f, f, w // f, f, v.shape[-1]).mean(axis=(-4, -2))

        loss = loss + rgba_mse(pool(pred), pool(target))
    return loss + jnp.mean(jnp.sum(jnp.square(silhouette_moments(pred) - silhouette_moments(target)), axis=-1))


def place_rigidly(x_rest: Array, translation: Array, yaw: Array) -> Array:
    """x_rest [n, 3] turned by `yaw` (rad) about the vertical (+y) axis through its centroid and moved by
    `translation` [3] m.

    Args:
        x_rest: [n, 3] m, the rest positions.
        translation: [3] m, the move.
        yaw: scalar rad, the turn about +y.

    Returns:
        [n, 3] m, the placed positions.
    """
    centre = jnp.mean(x_rest, axis=0)
    c, s = jnp.cos(yaw), jnp.sin(yaw)
    z, o = jnp.zeros_like(c), jnp.ones_like(c)
    rot = jnp.stack([jnp.stack([c, z, s]), jnp.stack([z, o, z]), jnp.stack([-s, z, c])])
    return (x_rest - centre) @ rot.T + centre + translation


def pose_from_image(exp: Experiment, x_rest, target_image, *, iterations: int = 150, learning_rate: float = 0.02,
                    progress: bool = False) -> dict:
    """Where `target_image` [H, W, 4] shows the body: the placement (a translation [3] m and a turn about the
    vertical, `place_rigidly`) of its rest shape `x_rest` [n, 3] (every particle of `exp`) whose render
    through `exp`'s camera matches the image (`control_loss`, which pulls from afar through the silhouette
    centroids; Adam from the rest placement, cosine-decayed `learning_rate` in m and rad per step). A target
    image that shows the body at rest somewhere, undeformed, is what this reads exactly; a deformed body
    gives the best rigid fit.

    Args:
        exp: the experiment whose camera and render settings film the body.
        x_rest: [n, 3] m, the rest shape (every particle of `exp`).
        target_image: [H, W, 4] RGBA image of the body.
        iterations: Adam iterations.
        learning_rate: the first step size, m and rad per step (cosine-decayed).
        progress: print the fit's progress.

    Returns:
        {"x": placed positions [n, 3] m, "com": their mean [3] m, "translation" [3] m, "yaw" rad, "loss": the
        image loss left, "initial_loss"} (numpy / floats).
    """
    x_rest = jnp.asarray(x_rest, exp.dtype)
    target = jnp.asarray(target_image, exp.dtype)[None]

    def loss_fn(p):
        p, e, (tgt, xr) = split_data(exp, p)
        return control_loss(render_frames(e, place_rigidly(xr, p["translation"], p["yaw"])[None]), tgt)

    params = with_data({"translation": jnp.zeros(3, exp.dtype), "yaw": jnp.zeros((), exp.dtype)}, exp,
                        (target, x_rest))
    result = run_fit(loss_fn, params, free=("translation", "yaw"), optimizer=optax.adam(learning_rate),
                     schedule=cosine_schedule(max(iterations, 1), alpha=0.02), steps=iterations, progress=progress)
    x = place_rigidly(x_rest, result.params["translation"], result.params["yaw"])
    return {"x": np.asarray(x), "com": np.asarray(jnp.mean(x, axis=0)),
            "translation": np.asarray(result.params["translation"]), "yaw": float(result.params["yaw"]),
            "loss": float(result.loss), "initial_loss": float(result.history["loss"][0]) if result.history["loss"]
            else float(result.loss)}


def fit_control(exp: Experiment, target_image: np.ndarray, v_guess, *, iterations: int = 60,
                learning_rate: float = 0.1, checkpoint_dir=None, checkpoint_every: int = 25, resume: bool = False,
                resume_anyway: bool = False, progress: bool = True):
    """Optimize one initial velocity [3] m/s shared by all particles so that the last rendered frames match
    `target_image`. The loss is `control_loss`.
    Checkpoints record the target, the scene, the guess and the settings (`resume_anyway` as in `fit`).

    Args:
        exp: the experiment (the cloth scene).
        target_image: [k, H, W, 4] for the last k frames, or [H, W, 4] for the last frame.
        v_guess: [3] m/s, the initial guess of the velocity.
        iterations: Adam iterations.
        learning_rate: the first step size (cosine-decayed), m/s per step.
        checkpoint_dir: the folder of the fit's checkpoint, or None for none.
        checkpoint_every: iterations between checkpoints.
        resume: continue from the checkpoint in `checkpoint_dir`.
        resume_anyway: resume even from a checkpoint made for other inputs (as in `fit`).
        progress: print the fit's progress.

    Returns:
        (velocity [3] m/s numpy, FitResult).
    """
    tgt = jnp.asarray(target_image, exp.dtype)
    if tgt.ndim == 3:
        tgt = tgt[None]
    base = as_theta(exp, {})

    def loss_fn(p):
        p, e, (target, theta) = split_data(exp, p)
        theta = dict(theta, velocity=jnp.broadcast_to(p["v"], theta["velocity"].shape))
        x = trajectory(e, theta).particles.x[-target.shape[0]:]
        return control_loss(render_frames(e, x), target)

    config = FitConfig(free=("velocity",), iterations=iterations, learning_rate=learning_rate, loss="control")
    inputs = fit_inputs(exp, tgt, {"velocity": jnp.asarray(v_guess, tgt.dtype)}, config)
    params = with_data({"v": jnp.asarray(v_guess, tgt.dtype)}, exp, (tgt, base))
    result = run_fit(loss_fn, params, free=("v",), optimizer=optax.adam(learning_rate),
                     schedule=cosine_schedule(max(iterations, 1), alpha=0.05), steps=iterations,
                     checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume,
                     progress=progress, metadata=inputs, resume_anyway=resume_anyway)
    return np.asarray(result.params["v"]), result


def final_position_error(exp: Experiment, v_est, v_true) -> dict:
    """Distances between the final positions reached with v_est and with v_true (uniform velocities [3]).

    Args:
        exp: the experiment.
        v_est: [3] m/s, the estimated initial velocity of every particle.
        v_true: [3] m/s, the true one.

    Returns:
        {"mean_particle_error_m", "max_particle_error_m", "center_error_m", "travel_m" (how far the true
        centre moved)}, floats in m.
    """
    shape = np.shape(exp.state0.particles.x)
    x_est, _ = simulate_video(exp, {"velocity": np.broadcast_to(v_est, shape)})
    x_true, _ = simulate_video(exp, {"velocity": np.broadcast_to(v_true, shape)})
    d = np.linalg.norm(x_est[-1] - x_true[-1], axis=-1)
    com = np.linalg.norm(x_est[-1].mean(0) - x_true[-1].mean(0))
    return {"mean_particle_error_m": float(d.mean()), "max_particle_error_m": float(d.max()),
            "center_error_m": float(com),
            "travel_m": float(np.linalg.norm(x_true[-1].mean(0) - x_true[0].mean(0)))}
