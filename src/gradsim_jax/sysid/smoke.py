"""2-D smoke from video (`physics.smoke`, rendered by `render.density`): system identification (the buoyancy,
inflow rate, dissipation or vorticity confinement of a plume) and control (the initial velocity field that
makes the smoke form a target picture), with the same image loss, optimizer and outputs as the other bodies.

A `SmokeExperiment` is the recording: the grid (`SmokeTopology`), the smoke's parameters and initial state,
the time grid (frames of frame_dt s, `substeps` solver steps each) and how the density becomes an image
(`render.density.density_image`: size, colour map, the density of opacity 1 - 1/e, background). Its
quantities (`SMOKE_QUANTITIES`) are what a fit may free:

| name              | what                                  | unit                     | fitted as  |
|-------------------|---------------------------------------|--------------------------|------------|
| smoke_buoyancy    | upward acceleration per unit density  | m/s^2 per unit density   | log        |
| inflow_rate       | smoke added per second in the inflow  | density / s              | log        |
| smoke_dissipation | exponential decay rate of the density | 1 / s                    | softplus   |
| smoke_vorticity   | vorticity confinement eps             | 1                        | softplus   |
| smoke_velocity    | the initial velocity field (u, v)     | m/s, [2, ny, nx] (faces) | identity   |

`fit_smoke` runs Adam (`fit.fit`) on the mean squared RGBA error of the compared frames (every
`frame_stride`-th, or the last alone: a target picture), then, when every free quantity is a scalar,
Levenberg-Marquardt steps with a forward-mode Jacobian (`fit.least_squares`): its result is a `SysIdResult`,
so `report.write_outputs` writes the videos and plots of every other demo.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.convergence import assess, noise_floor, relative_last_step
from gradsim_jax.fit.fit import cosine_schedule, fit
from gradsim_jax.fit.least_squares import forward_jacobian, levenberg_marquardt
from gradsim_jax.fit.losses import rgba_mse
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.physics.rollout import SimulationDiverged
from gradsim_jax.physics.smoke import SmokeParams, SmokeState, SmokeTopology, smoke_rollout
from gradsim_jax.render.camera import Camera
from gradsim_jax.render.density import colormap_colors, density_image, density_slab_image
from gradsim_jax.sysid.config import SysIdResult
from gradsim_jax.sysid import builtin  # noqa: F401  (registers the smoke quantities read below)
from gradsim_jax.sysid.registry import QUANTITIES

Array = Any

#: name: (the SmokeParams field, or "velocity" for the initial state's (u, v); fit transform; unit)
#: (the registry's smoke quantities, `sysid.builtin`: the same names in scene files and `Experiment` fits.)
SMOKE_QUANTITIES = {q.name: ("velocity" if q.name == "smoke_velocity" else q.field[len("smoke."):], q.transform, q.unit)
                    for q in QUANTITIES.values() if q.field.startswith("smoke.")}


@dataclasses.dataclass(frozen=True, eq=False)
class SmokeExperiment:
    """A recording of smoke: topology (the grid), params and state0 (SmokeParams, SmokeState: every value a
    theta does not give), frames of frame_dt s with `substeps` solver steps each, and the image: size (H, W)
    pixels (None: one per cell), colormap (`render.density.COLORMAPS` name or RGB rows), scale (the density
    of opacity 1 - 1/e), background RGB. camera: None (the grid fills the image, seen head-on), or a
    `render.camera.Camera` that films the grid as a thin slab of smoke in the world plane z = corner[2], its
    bottom-left corner at `corner` (m) and as wide and tall as the grid (`render.density.density_slab_image`;
    the image size is then the camera's)."""

    topology: SmokeTopology
    params: SmokeParams
    state0: SmokeState
    frames: int
    frame_dt: float = 1.0 / 30.0
    substeps: int = 1
    size: Optional[tuple] = None
    colormap: Any = "smoke"
    scale: float = 1.0
    background: tuple = (0.0, 0.0, 0.0)
    name: str = "smoke"
    camera: Any = None
    corner: tuple = (0.0, 0.0, 0.0)
    #: `report.write_outputs` reads it (a particle scene's free particles): a smoke has none.
    free_particles = None

    def __post_init__(self):
        if not isinstance(self.topology, SmokeTopology):
            raise TypeError(f"SmokeExperiment.topology must be a SmokeTopology, got {type(self.topology).__name__}")
        if not (isinstance(self.frames, (int, np.integer)) and self.frames >= 1):
            raise ValueError(f"SmokeExperiment.frames must be a whole number >= 1, got {self.frames!r}")
        if not (isinstance(self.substeps, (int, np.integer)) and self.substeps >= 1):
            raise ValueError(f"SmokeExperiment.substeps must be a whole number >= 1, got {self.substeps!r}")
        if not (np.isfinite(self.frame_dt) and self.frame_dt > 0):
            raise ValueError(f"SmokeExperiment.frame_dt must be a positive time in s, got {self.frame_dt!r}")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"SmokeExperiment.scale must be a positive density, got {self.scale!r}")
        if self.size is not None and (len(self.size) != 2 or min(int(v) for v in self.size) < 1):
            raise ValueError(f"SmokeExperiment.size must be (height, width) pixels, got {self.size!r}")
        colormap_colors(self.colormap)  # a ValueError naming it
        if self.camera is not None:
            if not isinstance(self.camera, Camera):
                raise TypeError(f"SmokeExperiment.camera must be a render.camera.Camera or None, got "
                                f"{type(self.camera).__name__}")
            if self.size is not None and tuple(int(v) for v in self.size) != (self.camera.height, self.camera.width):
                raise ValueError(f"SmokeExperiment.size {tuple(self.size)} differs from the camera's image "
                                 f"({self.camera.height}, {self.camera.width}): leave size out with a camera")
        if len(self.corner) != 3 or not np.all(np.isfinite(np.asarray(self.corner, np.float64))):
            raise ValueError(f"SmokeExperiment.corner must be a finite point (x, y, z) m, got {self.corner!r}")
        for name in ("u", "v", "density"):
            shape = np.shape(getattr(self.state0, name))
            if shape != self.topology.shape:
                raise ValueError(f"SmokeExperiment.state0.{name} has shape {shape}, the grid {self.topology.shape}")

    @property
    def dtype(self):
        return jnp.result_type(self.state0.density)

    @property
    def image_shape(self) -> tuple:
        """(H, W) of each frame."""
        if self.camera is not None:
            return (self.camera.height, self.camera.width)
        return tuple(int(v) for v in (self.size or self.topology.shape))

    @property
    def theta(self) -> dict:
        """Every quantity's value in the experiment (the truth of a synthetic recording)."""
        out = {name: getattr(self.params, field) for name, (field, _, _) in SMOKE_QUANTITIES.items()
               if field != "velocity"}
        out["smoke_velocity"] = jnp.stack([self.state0.u, self.state0.v])
        return out


def _check_names(names) -> tuple:
    names = tuple(names)
    unknown = [n for n in names if n not in SMOKE_QUANTITIES]
    if unknown:
        raise ValueError(f"unknown smoke quantit{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}: "
                         f"choose from {', '.join(SMOKE_QUANTITIES)}")
    return names


def smoke_theta(exp: SmokeExperiment, theta: Optional[dict] = None) -> dict:
    """`exp.theta` with `theta`'s entries over it, each checked (a known name, the quantity's shape, finite,
    and >= 0 where the quantity is) and in the experiment's dtype; ValueError naming the quantity.

    Args:
        exp: the smoke experiment (its own values of every quantity).
        theta: {name of `SMOKE_QUANTITIES`: value in its unit} (tracers pass unchecked); None: none.

    Returns:
        dict {name: value} of every smoke quantity.
    """
    out = dict(exp.theta)
    for name, value in (theta or {}).items():
        _check_names([name])
        if isinstance(value, jax.core.Tracer):
            out[name] = value
            continue
        a = np.asarray(value, np.float64)
        if a.shape != np.shape(out[name]):
            raise ValueError(f"{name} must have shape {np.shape(out[name])}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} is not finite: {value!r}" if a.ndim == 0 else f"{name} has a non-finite value")
        if name != "smoke_velocity" and np.any(a < 0):
            raise ValueError(f"{name} must be >= 0, got {value!r}")
        out[name] = jnp.asarray(a, exp.dtype)
    return out


def assemble_smoke(exp: SmokeExperiment, theta: dict) -> tuple[SmokeParams, SmokeState]:
    """(SmokeParams, initial SmokeState) of the experiment with theta's quantities; traceable.

    Args:
        exp: the smoke experiment (every value theta does not give).
        theta: {name of `SMOKE_QUANTITIES`: value}; "smoke_velocity" [2, ny, nx] m/s sets the initial (u, v).

    Returns:
        (SmokeParams, SmokeState).
    """
    fields = {field: theta[name] for name, (field, _, _) in SMOKE_QUANTITIES.items()
              if name in theta and field != "velocity"}
    params = dataclasses.replace(exp.params, **fields)
    state = exp.state0
    if "smoke_velocity" in theta:
        velocity = theta["smoke_velocity"]
        state = dataclasses.replace(state, u=velocity[0], v=velocity[1])
    return params, state


def smoke_trajectory(exp: SmokeExperiment, theta: dict) -> SmokeState:
    """The smoke at every frame (leaves [frames + 1, ny, nx]) with theta's quantities; traceable.

    Args:
        exp: the smoke experiment.
        theta: {name of `SMOKE_QUANTITIES`: value}.

    Returns:
        SmokeState with leaves [frames + 1, ny, nx].
    """
    params, state = assemble_smoke(exp, theta)
    return smoke_rollout(exp.topology, params, state, frames=exp.frames, substeps=exp.substeps,
                         frame_dt=exp.frame_dt)


def render_density(exp: SmokeExperiment, density) -> Array:
    """RGBA frames [..., H, W, 4] of density [..., ny, nx] as the experiment's camera sees it.

    Args:
        exp: the smoke experiment (camera or image size, colour map, scale, background).
        density: [..., ny, nx], the smoke's density on the grid (the experiment's `scale` has opacity 1 - 1/e).

    Returns:
        [..., H, W, 4] RGBA frames.
    """
    if exp.camera is not None:
        ny, nx = exp.topology.shape
        extent = (nx * exp.topology.spacing, ny * exp.topology.spacing)
        return density_slab_image(exp.camera, density, corner=exp.corner, extent=extent, colormap=exp.colormap,
                                  scale=exp.scale, background=exp.background)
    return density_image(density, size=exp.image_shape, colormap=exp.colormap, scale=exp.scale,
                         background=exp.background)


def smoke_video(exp: SmokeExperiment, theta: dict) -> Array:
    """The rendered video [frames + 1, H, W, 4] with theta's quantities; traceable.

    Args:
        exp: the smoke experiment.
        theta: {name of `SMOKE_QUANTITIES`: value}.

    Returns:
        [frames + 1, H, W, 4] RGBA video.
    """
    return render_density(exp, smoke_trajectory(exp, theta).density)


_VIDEO = {}


def simulate_smoke_video(exp: SmokeExperiment, theta: Optional[dict] = None) -> tuple[np.ndarray, np.ndarray]:
    """Host-side (density [frames + 1, ny, nx], video [frames + 1, H, W, 4]); SimulationDiverged when the
    smoke is not finite (a velocity too fast for the step: the semi-Lagrangian step itself is stable, but an
    unconverged solve or a huge buoyancy is not).

    Args:
        exp: the smoke experiment.
        theta: {name of `SMOKE_QUANTITIES`: value}, checked by `smoke_theta`; None: the experiment's own values.

    Returns:
        (numpy density [frames + 1, ny, nx], numpy RGBA video [frames + 1, H, W, 4]).
    """
    theta = smoke_theta(exp, theta)
    # The camera is an argument of the program (its arrays are data), the rest of the experiment its structure.
    key = (exp.topology, exp.frames, exp.substeps, exp.frame_dt, exp.image_shape, str(exp.colormap), exp.scale,
           tuple(exp.background), exp.camera is None, tuple(exp.corner))
    fn = _VIDEO.get(key)
    if fn is None:
        def run(params, state0, th, camera):
            e = dataclasses.replace(exp, params=params, state0=state0, camera=camera)
            d = smoke_trajectory(e, th).density
            return d, render_density(e, d)
        fn = _VIDEO[key] = jax.jit(run)
    density, video = fn(exp.params, exp.state0, theta, exp.camera)
    density = np.asarray(density)
    if not np.all(np.isfinite(density)):
        frame = int(np.argmax(~np.isfinite(density).reshape(len(density), -1).all(1)))
        raise SimulationDiverged(f"the smoke's density is not finite from frame {frame} on")
    return density, np.asarray(video)


def compared_frames(exp: SmokeExperiment, compare: str = "all", frame_stride: int = 1) -> np.ndarray:
    """The frame indices a loss compares: every `frame_stride`-th after the first ("all", the last always in),
    or the last alone ("last": a target picture).

    Args:
        exp: the smoke experiment (its number of frames).
        compare: "all" or "last".
        frame_stride: the step between compared frames (a whole number >= 1), for "all".

    Returns:
        numpy int [k], the frame indices (0: the initial state, never compared).
    """
    if compare == "last":
        return np.array([exp.frames])
    if compare != "all":
        raise ValueError(f"compare must be 'all' or 'last', got {compare!r}")
    if not (isinstance(frame_stride, (int, np.integer)) and frame_stride >= 1):
        raise ValueError(f"frame_stride must be a whole number >= 1, got {frame_stride!r}")
    return np.unique(np.append(np.arange(frame_stride, exp.frames + 1, frame_stride), exp.frames))


def check_target(exp: SmokeExperiment, target, frames: np.ndarray) -> np.ndarray:
    """target as float [len(frames), H, W, 4] (a video [frames + 1, H, W, 4] is cut to `frames`; one picture
    [H, W, 4] stands for the last frame); ValueError naming what is wrong.

    Args:
        exp: the smoke experiment (its image size and number of frames).
        target: a video [frames + 1, H, W, 4], the compared frames [len(frames), H, W, 4], or one picture [H, W, 4].
        frames: [k] int, the compared frame indices (`compared_frames`).

    Returns:
        numpy float64 [len(frames), H, W, 4].
    """
    t = np.asarray(target, np.float64)
    h, w = exp.image_shape
    if t.ndim == 3:
        t = t[None]
        if len(frames) != 1:
            raise ValueError(f"one target picture {t.shape[1:]} fits compare='last' only; this fit compares "
                             f"{len(frames)} frames")
    elif t.ndim == 4 and t.shape[0] == exp.frames + 1:
        t = t[frames]
    elif t.ndim == 4 and t.shape[0] != len(frames):
        raise ValueError(f"the target video has {t.shape[0]} frames; the experiment renders {exp.frames + 1}")
    if t.ndim != 4 or t.shape[1:] != (h, w, 4):
        raise ValueError(f"the target must be RGBA frames of {h} x {w} pixels ([..., {h}, {w}, 4]), got shape "
                         f"{np.shape(target)}")
    if not np.all(np.isfinite(t)):
        raise ValueError("the target has non-finite pixels")
    return t


def smoke_loss(exp: SmokeExperiment, theta: dict, target: Array, frames: np.ndarray,
               smoothness: float = 0.0) -> Array:
    """Mean squared RGBA error of the compared frames (`compared_frames`), plus `smoothness` times the mean squared
    difference of neighbouring initial velocities (a free field's regularizer); traceable.

    Args:
        exp: the smoke experiment.
        theta: {name of `SMOKE_QUANTITIES`: value}.
        target: [len(frames), H, W, 4] RGBA target frames.
        frames: [k] int, the compared frame indices.
        smoothness: the regularizer's weight, per (m/s)^2 (0: none).

    Returns:
        scalar loss.
    """
    pred = smoke_video(exp, theta)[jnp.asarray(frames)]
    loss = rgba_mse(pred, target)
    if smoothness and "smoke_velocity" in theta:
        velocity = theta["smoke_velocity"]
        loss = loss + smoothness * (jnp.mean(jnp.square(jnp.diff(velocity, axis=-1)))
                                    + jnp.mean(jnp.square(jnp.diff(velocity, axis=-2))))
    return loss


def fit_smoke(exp: SmokeExperiment, target, initial: dict, free, *, iterations: int = 40,
              learning_rate: float = 0.05, polish: int = 10, compare: str = "all", frame_stride: int = 1,
              smoothness: float = 0.0, progress: bool = True, callback=None) -> SysIdResult:
    """Fit the `free` quantities (`SMOKE_QUANTITIES`) of `exp` to `target` from `initial` (missing quantities:
    the experiment's): `iterations` Adam steps (`fit.fit`, the quantities in their transforms, learning rate
    cosine-decayed), then up to `polish` Levenberg-Marquardt steps on the compared frames' pixels when every
    free quantity is a scalar. `callback(iteration, theta, loss)` after each Adam step.

    Returns a `SysIdResult`: theta (every quantity, the free ones fitted), history ("iteration", "loss",
    "params": the scalar quantities per step, "stage": "adam" or "lm"), convergence (`fit.convergence.assess`
    against the compared frames' noise floor; a field's last steps are not tracked, so a fit of one is
    judged by its loss alone).

    Args:
        exp: the smoke experiment.
        target: a video [frames + 1, H, W, 4], the compared frames, or one picture [H, W, 4] (`check_target`).
        initial: {name: value}, the start.
        free: names of `SMOKE_QUANTITIES` to fit (at least one).
        iterations: Adam iterations.
        learning_rate: the first step size, in the quantities' transformed spaces (cosine-decayed to a tenth).
        polish: the most Levenberg-Marquardt steps (0: none).
        compare: "all" or "last" (`compared_frames`).
        frame_stride: the step between compared frames, for "all".
        smoothness: the weight of the initial velocity field's regularizer (`smoke_loss`).
        progress: print the fit's progress.
        callback: `callback(iteration, theta, loss)`, or None.

    Returns:
        the `SysIdResult` described above.
    """
    free = _check_names(free)
    if not free:
        raise ValueError("free names no quantity to fit")
    frames = compared_frames(exp, compare, frame_stride)
    tgt = jnp.asarray(check_target(exp, target, frames), exp.dtype)
    theta0 = smoke_theta(exp, initial)
    transforms = {n: SMOKE_QUANTITIES[n][1] for n in free}
    scalar = [n for n in free if np.ndim(theta0[n]) == 0]

    def loss_fn(theta):
        return smoke_loss(exp, theta, tgt, frames, smoothness)

    def on_step(it, theta, loss, *_):
        if callback is not None:
            callback(it, theta, loss)
        return None

    started = time.perf_counter()
    result = fit(loss_fn, theta0, free=free, transforms=transforms, learning_rate=learning_rate, steps=iterations,
                 schedule=cosine_schedule(iterations, 0.1) if iterations else None, progress=progress,
                 callback=on_step if callback is not None else None)
    theta = dict(result.params)
    history = {"iteration": list(range(len(result.history["loss"]))), "loss": [float(v) for v in result.history["loss"]],
               "params": {n: [float(v) for v in result.history["params"][n]] for n in scalar
                          if n in result.history.get("params", {})},
               "stage": ["adam"] * len(result.history["loss"])}
    lm_steps = 0
    if polish and len(scalar) == len(free):
        theta, records = _polish(exp, theta, free, tgt, frames, polish)
        for cost, values in records:
            history["iteration"].append(len(history["iteration"]))
            history["loss"].append(cost)
            history["stage"].append("lm")
            for n in scalar:
                history["params"].setdefault(n, []).append(values[n])
        lm_steps = len(records)
    loss = float(loss_fn(theta))
    # The verdict of every other fit: against the loss at the start, the target's noise floor and the last steps.
    convergence = assess(initial_loss=history["loss"][0] if history["loss"] else loss, final_loss=loss,
                         floor=noise_floor(np.asarray(tgt)), grad_norm=float(result.grad_norm),
                         last_step=relative_last_step(history["params"]) if history["params"] else float("inf"),
                         loss_kind="smoke")
    return SysIdResult(theta=theta, history=history, report=None, wall_time=time.perf_counter() - started,
                       adam_iterations=iterations, lm_iterations=lm_steps, loss=loss, convergence=convergence)


def _polish(exp, theta: dict, free: tuple, tgt, frames, steps: int):
    """Levenberg-Marquardt on the scalar quantities `free` (in their transforms): the residual is every
    compared pixel's RGBA error over sqrt(count), so its squared norm is `smoke_loss`."""
    tfs = {n: resolve_transform(SMOKE_QUANTITIES[n][1]) for n in free}
    count = float(np.prod(tgt.shape))

    def with_z(z):
        th = dict(theta)
        for k, n in enumerate(free):
            th[n] = tfs[n].inverse(z[k]).astype(exp.dtype)
        return th

    def residual(z):
        return ((smoke_video(exp, with_z(z))[jnp.asarray(frames)] - tgt) / np.sqrt(count)).ravel()

    linearize = jax.jit(lambda z: forward_jacobian(residual, z))
    z0 = np.array([float(tfs[n].forward(jnp.asarray(theta[n]))) for n in free], np.float64)
    records = []

    def on_step(k, cost):
        records.append(float(cost))

    def linearized(z):
        r, columns = linearize(jnp.asarray(z, exp.dtype))
        return np.asarray(r, np.float64), np.asarray(columns, np.float64).T

    z = levenberg_marquardt(None, linearized, z0, steps=steps, on_step=on_step).z
    out = with_z(jnp.asarray(z, exp.dtype))
    values = {n: float(out[n]) for n in free}
    return out, [(c, values) for c in records]


def smoke_report(exp: SmokeExperiment, free, truth: Optional[dict], initial: dict, result: SysIdResult) -> dict:
    """report.json's content: per free quantity the initial, estimated and (with a truth) true value and the
    relative error (a field: the relative L2 error), the fit's losses, iterations and time.

    Args:
        exp: the smoke experiment.
        free: names of the fitted quantities.
        truth: {name: value}, the true values, or None.
        initial: {name: value}, the start (missing ones: the experiment's).
        result: the fit's `SysIdResult`.

    Returns:
        the report dict (a field is summarized by its shape, mean, min, max and rms).
    """
    rows = {}
    for n in free:
        est = np.asarray(result.theta[n], np.float64)
        row = {"unit": SMOKE_QUANTITIES[n][2], "initial": _summary(initial.get(n, exp.theta[n])),
               "estimated": _summary(est)}
        if truth is not None and n in truth:
            true = np.asarray(truth[n], np.float64)
            row["true"] = _summary(true)
            norm = float(np.linalg.norm(true))
            row["relative_error"] = float(np.linalg.norm(est - true) / norm) if norm > 0 else float(np.linalg.norm(est))
        rows[n] = row
    return {"experiment": exp.name, "grid": list(exp.topology.shape), "frames": exp.frames,
            "frame_dt": exp.frame_dt, "substeps": exp.substeps, "quantities": rows,
            "iterations": {"adam": result.adam_iterations, "levenberg_marquardt": result.lm_iterations},
            "initial_loss": result.history["loss"][0] if result.history["loss"] else None,
            "final_loss": result.loss, "wall_time_s": result.wall_time,
            "convergence": None if result.convergence is None else result.convergence.as_dict()}


def _summary(a) -> Any:
    a = np.asarray(a, np.float64)
    if a.ndim == 0:
        return float(a)
    return {"shape": list(a.shape), "mean": float(a.mean()), "min": float(a.min()), "max": float(a.max()),
            "rms": float(np.sqrt(np.mean(a * a)))}


def pressure_solve_note(exp) -> Optional[str]:
    """Why finite differences may disagree with the gradient of a scene with smoke: its pressure solve (conjugate
    gradients) stops at a relative residual finite differences see (the gradient is the exact solve's).

    Args:
        exp: the `sysid.Experiment` whose gradient was checked.

    Returns:
        The note, or None (no smoke, or a solve tight enough).
    """
    smoke = exp.topology.smoke
    if smoke is None or smoke.solver != "cg" or not smoke.tolerance > 1e-9:
        return None
    return (f"note: the smoke's pressure solve stops at a relative residual of {smoke.tolerance:g}; finite "
            "differences see that truncation (the gradient is the exact solve's). Check with [smoke] tolerance = "
            "1e-10 (float64 reaches it)")
