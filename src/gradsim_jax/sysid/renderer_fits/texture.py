"""A mesh's texture from pictures (gradSim's `softras_texture_optimization`): the renderer alone, no physics.

A `TextureExperiment` is a textured mesh seen from fixed cameras: the mesh (vertices, faces, per-vertex or
per-corner uv), the cameras of the fit and the cameras held out of it, the lights and the background. The
texture image is what `fit_texture` finds: Adam on the mean squared RGBA error of every fitted view, the
texels in a logit transform so that they stay in (0, 1). `psnr` scores a result on the pixels the mesh
covers (the background, identical in both images, would only inflate it).

The result is a `SysIdResult` (theta {"texture": [Ht, Wt, 3]}), so `report.write_outputs` writes the
videos (the views as frames), the loss curve and the report of every other demo.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.fit import cosine_schedule, fit
from gradsim_jax.fit.losses import rgba_mse
from gradsim_jax.fit.transforms import Bounded
from gradsim_jax.render.rasterize import RenderSettings, render
from gradsim_jax.render.shading import Lights, Texture
from gradsim_jax.sysid.config import SysIdResult

Array = Any

#: texels are kept inside (TEXEL_MARGIN, 1 - TEXEL_MARGIN) by the logit transform
TEXEL_MARGIN = 1e-4


@dataclasses.dataclass(frozen=True, eq=False)
class TextureExperiment:
    """vertices [N, 3], faces [F, 3], uv ([N, 2] per vertex or [F, 3, 2] per face corner), texture_shape
    (Ht, Wt), cameras (the fitted views: `render.camera.Camera`s of one image size), held_out (views kept
    out of the fit, for scoring), lights (`Lights` or None: unlit), background RGB, settings
    (`RenderSettings`), name; frame_dt: the seconds each view is shown in the output videos."""

    vertices: np.ndarray
    faces: np.ndarray
    uv: np.ndarray
    texture_shape: tuple
    cameras: tuple
    held_out: tuple = ()
    lights: Optional[Lights] = None
    background: tuple = (0.0, 0.0, 0.0)
    settings: RenderSettings = RenderSettings()
    name: str = "texture"
    frame_dt: float = 0.5
    free_particles: Any = None

    def __post_init__(self):
        v = np.asarray(self.vertices, np.float64)
        f = np.asarray(self.faces)
        uv = np.asarray(self.uv, np.float64)
        if v.ndim != 2 or v.shape[1] != 3 or not np.all(np.isfinite(v)):
            raise ValueError(f"TextureExperiment.vertices must be finite [N, 3], got shape {v.shape}")
        if f.ndim != 2 or f.shape[1] != 3 or f.min() < 0 or f.max() >= len(v):
            raise ValueError(f"TextureExperiment.faces must be [F, 3] indices below {len(v)}")
        if uv.shape not in ((len(v), 2), (len(f), 3, 2)) or not np.all(np.isfinite(uv)):
            raise ValueError(f"TextureExperiment.uv must be finite [{len(v)}, 2] or [{len(f)}, 3, 2], got {uv.shape}")
        shape = tuple(int(n) for n in self.texture_shape)
        if len(shape) != 2 or min(shape) < 2:
            raise ValueError(f"TextureExperiment.texture_shape must be (Ht, Wt) >= 2, got {self.texture_shape!r}")
        check_cameras(self.cameras, self.held_out, "TextureExperiment", "a texture")
        object.__setattr__(self, "texture_shape", shape)
        object.__setattr__(self, "cameras", tuple(self.cameras))
        object.__setattr__(self, "held_out", tuple(self.held_out))

    @property
    def size(self) -> tuple:
        return (self.cameras[0].height, self.cameras[0].width)


def check_cameras(cameras, held_out, owner: str, what: str) -> None:
    """A ValueError unless there is at least one fitted camera and every camera (fitted and held out) has the
    same image size (the views of a renderer-only experiment).

    Args:
        cameras: the fitted views (`render.camera.Camera`s).
        held_out: the views kept out of the fit.
        owner: the experiment class named in the error ("TextureExperiment").
        what: what the experiment finds, named in the error ("a texture").
    """
    if not cameras:
        raise ValueError(f"{owner}.cameras is empty: {what} needs at least one view")
    sizes = {(c.width, c.height) for c in tuple(cameras) + tuple(held_out)}
    if len(sizes) != 1:
        raise ValueError(f"every camera must have the same image size, got {sorted(sizes)}")


def stack_cameras(cameras):
    """One `Camera` whose leaves stack those of `cameras` (for `lax.map` over the views).

    Args:
        cameras: a sequence of V `Camera`s of one image size.

    Returns:
        a `Camera` whose leaves have a leading axis [V, ...].
    """
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *cameras)


def check_texture(exp: TextureExperiment, image, name: str = "texture") -> np.ndarray:
    """`image` as float [Ht, Wt, 3] in [0, 1], or a ValueError naming it.

    Args:
        exp: the texture experiment (its texture_shape (Ht, Wt) texels).
        image: [Ht, Wt, 3] RGB texels in [0, 1].
        name: what the image is called in the error.

    Returns:
        numpy float64 [Ht, Wt, 3].
    """
    a = np.asarray(image, np.float64)
    if a.shape != exp.texture_shape + (3,):
        raise ValueError(f"{name} must be an RGB image of {exp.texture_shape[0]} x {exp.texture_shape[1]} texels "
                         f"[Ht, Wt, 3], got shape {a.shape}")
    if not np.all(np.isfinite(a)) or a.min() < 0.0 or a.max() > 1.0:
        raise ValueError(f"{name} must hold finite values in [0, 1]")
    return a


def render_views(exp: TextureExperiment, image, cameras=None) -> Array:
    """RGBA views [V, H, W, 4] of the mesh with texture `image` [Ht, Wt, 3] from `cameras` (default: the
    fitted ones), one compiled render mapped over the stacked cameras; differentiable in the image.

    Args:
        exp: the texture experiment (mesh, uv, lights, background, render settings).
        image: [Ht, Wt, 3] RGB texels in [0, 1].
        cameras: the views (`Camera`s of one image size); None: the fitted ones, `exp.cameras`.

    Returns:
        [V, H, W, 4] RGBA views.
    """
    cameras = exp.cameras if cameras is None else tuple(cameras)
    image = jnp.asarray(image)
    dtype = image.dtype
    colors = Texture(image=image, uv=jnp.asarray(exp.uv, dtype))
    vertices = jnp.asarray(exp.vertices, dtype)
    faces = jnp.asarray(exp.faces, jnp.int32)
    background = jnp.asarray(exp.background, dtype)
    return jax.lax.map(lambda camera: render(camera, vertices, faces, colors, lights=exp.lights,
                                             background=background, settings=exp.settings), stack_cameras(cameras))


def check_views(exp: TextureExperiment, views, count: int, name: str = "the target views") -> np.ndarray:
    """`views` as float [count, H, W, 4], or a ValueError naming what is wrong.

    Args:
        exp: the texture experiment (its image size H x W pixels).
        views: [count, H, W, 4] finite RGBA images.
        count: the number of views expected.
        name: what the views are called in the error.

    Returns:
        numpy float32 [count, H, W, 4].
    """
    a = np.asarray(views, np.float32)
    h, w = exp.size
    if a.shape != (count, h, w, 4):
        raise ValueError(f"{name} must be {count} RGBA images of {h} x {w} pixels [{count}, {h}, {w}, 4], "
                         f"got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} hold values that are not finite")
    return a


def psnr(image, reference) -> float:
    """Peak signal-to-noise ratio (dB, peak 1) of the RGB of `image` against `reference` ([..., H, W, 4]) over
    the pixels the reference's mesh covers (alpha > 1/2).

    Args:
        image: [..., H, W, 4] RGBA, values relative to a peak of 1.
        reference: [..., H, W, 4] RGBA, same shape; its alpha picks the pixels.

    Returns:
        the PSNR in dB (inf when the images agree exactly on those pixels).
    """
    a = np.asarray(image, np.float64)
    b = np.asarray(reference, np.float64)
    covered = b[..., 3] > 0.5
    if not covered.any():
        raise ValueError("psnr: the reference covers no pixel")
    mse = float(np.mean((a[..., :3] - b[..., :3])[covered] ** 2))
    return float("inf") if mse == 0.0 else float(-10.0 * np.log10(mse))


def fit_texture(exp: TextureExperiment, target_views, initial=None, *, iterations: int = 200,
                learning_rate: float = 0.1, progress: bool = True) -> SysIdResult:
    """The texture [Ht, Wt, 3] that makes the fitted views look like `target_views` [V, H, W, 4]: Adam on the
    mean squared RGBA error of all views (the texels in logit space, learning rate cosine-decayed to a tenth).

    Args:
        exp: the texture experiment.
        target_views: [V, H, W, 4] RGBA images, one per fitted camera.
        initial: [Ht, Wt, 3] RGB texels in [0, 1] to start from; None: mid grey (0.5).
        iterations: Adam iterations (>= 0).
        learning_rate: the first step size, in the texels' logit space.
        progress: print the fit's progress.

    Returns:
        a `SysIdResult` with theta {"texture": [Ht, Wt, 3] numpy}.
    """
    target = jnp.asarray(check_views(exp, target_views, len(exp.cameras)))
    if iterations < 0:
        raise ValueError(f"iterations must be >= 0, got {iterations}")
    start = np.full(exp.texture_shape + (3,), 0.5) if initial is None else check_texture(exp, initial, "initial")
    start = np.clip(start, 2 * TEXEL_MARGIN, 1 - 2 * TEXEL_MARGIN)
    theta0 = {"texture": jnp.asarray(start, jnp.float32)}

    def loss_fn(theta):
        return rgba_mse(render_views(exp, theta["texture"]), target)

    started = time.perf_counter()
    result = fit(loss_fn, theta0, free=("texture",),
                 transforms={"texture": Bounded(TEXEL_MARGIN, 1.0 - TEXEL_MARGIN)}, learning_rate=learning_rate,
                 steps=iterations, schedule=cosine_schedule(iterations, 0.1) if iterations else None,
                 progress=progress)
    theta = {"texture": np.asarray(result.params["texture"])}
    losses = [float(v) for v in result.history["loss"]]
    history = {"iteration": list(range(len(losses))), "loss": losses, "params": {}, "stage": ["adam"] * len(losses)}
    return SysIdResult(theta=theta, history=history, report=None, wall_time=time.perf_counter() - started,
                       adam_iterations=iterations, lm_iterations=0, loss=float(jax.jit(loss_fn)(theta)))
