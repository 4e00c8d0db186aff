"""Fitting quantities to a video: image losses and pixel residuals, then Adam (through
`gradsim_jax.fit.fit`, with checkpoints and resume) on the image loss and, for a few free scalars,
Levenberg-Marquardt steps on the pixel residuals (`gradsim_jax.fit.least_squares`), whose Jacobian comes
from forward-mode differentiation through the dense reference renderer (gradSim, Jatavallabhula et al.,
ICLR 2021, section 4).

Identifiability: under gravity and internal forces alone every acceleration is (force / mass), and the
internal forces are linear in the stiffness and damping coefficients, so scaling mass, stiffness and
damping together leaves the motion unchanged; only ratios show. A known force that does not scale with
them breaks the symmetry: a push (its acceleration is push / mass) or air drag with a known
coefficient. `gauss_newton_report` on the pixel residuals at the solution flags what is left unseparated.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradsim_jax.fit import content_sha256, cosine_schedule, gauss_newton_report
from gradsim_jax.fit.identifiability import scalar_labels, report_from_jacobian
from gradsim_jax.fit import fit as run_fit
from gradsim_jax.fit import least_squares
from gradsim_jax.fit.checkpoint import checkpoint_path
from gradsim_jax.fit.fit import HISTORY_FULL_SIZE
from gradsim_jax.fit.convergence import FLOOR_FACTOR, assess, edge_advice, noise_floor, relative_last_step
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.render.blur import BLUR_MAX, edge_channel, edge_mask, matching_blur
from gradsim_jax.sysid.bounds import stable_bounds
from gradsim_jax.sysid.experiment import (Experiment, _as_theta, _split_data, _with_data, compiled, frames_for,
                                          simulate_video, traced_checks, vertices)
from gradsim_jax.sysid.losses import LOSSES, image_loss, residual_channels
from gradsim_jax.sysid.quantities import (QUANTITIES, canonical, density_field_coordinates,
                                          focused, shape_roughness, transforms_for, with_camera_pose)
from gradsim_jax.typing import replace_paths

Array = Any

#: Levenberg-Marquardt builds one Jacobian column per free scalar (forward mode): up to this many.
LM_MAX_SCALARS = 200
#: `gauss_newton_report` differentiates in forward mode up to 64 scalars and in reverse mode (one pass per
#: pixel residual: far too slow for a video) beyond, so the report is made for at most 64.
REPORT_MAX_SCALARS = 64
#: Levenberg-Marquardt with at most this many Jacobian columns evaluates its trial steps with the Jacobian's
#: compiled function too (forward mode: about 1 + columns / 2 forward passes each) instead of compiling a
#: second, residual-only program of the whole rollout and render: at this size the compile costs more.
LM_TRIALS_BY_JACOBIAN = 8

@dataclasses.dataclass
class FitConfig:
    """How to fit: which quantities, Adam iterations and learning rate (cosine-decayed over `iterations`, so
    a resumed run must ask for the same number), loss, frame stride, `horizon` (fit the first `horizon`
    frames first and grow to all over the first half of the iterations; None: all from the start; for
    dynamics, a start far off puts late frames out of phase), Levenberg-Marquardt polish steps,
    checkpointing, progress, and `fit`'s callback; `report`: the diagnostics of the end (the identifiability
    report, and where the loss left lies for the convergence advice).

    smoothness: weight of the Laplacian regularizer of "shape" (`quantities.shape_roughness`, m^2) added to
    the Adam loss; 0: none. Only with "shape" free.
    window: truncated backpropagation through time for long recordings: the Adam gradient of each frame's
    loss reaches back at most `window` frames (to the start of its window, `gradsim_jax.sysid.windowed`), while
    the loss value stays the full recording's; the Levenberg-Marquardt polish then uses the same truncated
    Jacobian (`polish_truncated`). Choose it from `gradsim-jax horizon` (`window_length_for`); None: the full
    horizon. Not with `horizon` or `smoothness`.
    clip: {quantity: c}: that quantity's Adam gradient (in its fitted space) is scaled down to norm c when longer
    (`fit`'s per-field clipping); None: none.
    resume_anyway: resume from a checkpoint made for other inputs (see `fit_inputs`).
    scene_file_sha256: content hash of the scene file the experiment was built from, recorded with the
    fit's inputs (None: no scene file).
    rounds: at most this many rounds of Adam then the polish. A rendered target is fitted to its noise
    floor; when a round ends above `FLOOR_FACTOR` times the target's noise floor (a local minimum, or a
    stall), the next round starts from its estimate with `round_iterations` Adam iterations over all
    frames (a fresh cosine schedule; None: half of `iterations`) and polishes again. The rounds end at the
    floor, after a round that lowers the loss by less than 1 % (`ROUND_GAIN`), or after `rounds`; the
    round with the lowest loss gives the estimate (`history["rounds"]`, `history["best_round"]`). Against a
    real video, which a model never explains to its noise floor, they run until one gains under 1 % or
    all are spent. 1: one round (Adam, then the polish).
    density_first: with "particle_mass" free in a scene with soft bodies, first fit a density field to the
    soft-body particles' masses (mass = density x each particle's volume, the density log-linear across the
    bodies: the quantity "density_field", 4 numbers; the other free quantities with it) in this many Adam
    iterations at `density_learning_rate` (then the polish), starting from the initial masses' total over
    their lumped volume everywhere; the per-particle fit then starts from the masses of that field (the
    particles of no tet keep their initial masses). Without a growing horizon the estimate is the iterate of
    the lowest loss (the per-particle steps bounce near a minimum), and the field's masses when no iterate
    beats them (`history["density_first"]`: the field, its losses, "kept", "best_iteration"); the convergence
    is judged from the per-particle stage's first loss (the field's last). A resumed fit runs the field stage again (it is
    deterministic, and has no checkpoints). 0: none. Why: a body's masses follow from its density;
    single-view video at 64 px fixes the deviations of single particles only weakly (light particles, of one
    tet, hardly move apart from their neighbours), and a per-particle fit started far off ends in one of many
    local minima. Give the per-particle stage a small learning rate (0.01): Adam's first steps move every
    mass by about the learning rate.
    blur: the edge model's nuisance, a Gaussian point spread over the rendered frames (quantity "blur", pixels
    of the render; `render.blur`): "off" (none), a number (that blur, fixed), "fit" (free, from the blur that
    gives the render at the start the target's edge sharpness, `render.blur.matching_blur`, at least
    BLUR_START), or "auto" (that measurement; free from it when it exceeds BLUR_AUTO pixels, else none: a
    target whose edges are softer than the renderer's, another renderer's or a lens's, gets the blur that
    explains them; one as sharp keeps the fit as it was). A theta that holds "blur" already keeps it.
    edge_model: "fixed" (the experiment's `RenderSettings.coverage`) or "auto": when the fit ends above
    FLOOR_FACTOR x the noise floor with the loss left on the target's outlines (`fit.convergence.edge_advice`),
    the other edge model ("softras" for "box", and back) is tried at the estimate, and when it explains the
    video better the fit continues with it (`round_iterations` Adam iterations, then the polish; a free blur
    starts again from BLUR_START); the result's `experiment` then renders with it (`history["edge_model"]`).
    Another soft rasterizer's edges (PyTorch3D's) are SoftRas's, with faint seams along the faces' shared
    edges that no blur of exact coverage makes."""

    free: tuple[str, ...]
    iterations: int = 100
    learning_rate: float = 0.05
    loss: str = "rgba"
    frame_stride: int = 1
    horizon: Optional[int] = None
    polish: int = 10
    checkpoint_dir: Optional[str] = None
    checkpoint_every: int = 25
    resume: bool = False
    progress: bool = True
    report: bool = True
    callback: Optional[Callable] = None
    resume_anyway: bool = False
    scene_file_sha256: Optional[str] = None
    smoothness: float = 0.0
    clip: Optional[dict] = None
    window: Optional[int] = None
    rounds: int = 1
    round_iterations: Optional[int] = None
    density_first: int = 0
    density_learning_rate: float = 0.1
    blur: Any = "off"
    edge_model: str = "fixed"


@dataclasses.dataclass
class SysIdResult:
    """theta: fitted quantities; history: {"iteration", "loss", "params": {name: [...]}, "stage": [...]}
    (Adam iterations then LM steps); report: IdentifiabilityReport or None; wall_time (s); convergence:
    `gradsim_jax.fit.convergence.Convergence` (did the fit converge, and why not); inputs: `fit_inputs`;
    resume: `FitResult.resume` (None unless resumed from a checkpoint); experiment: the experiment the
    estimate belongs to (the one fitted, with the edge model `FitConfig.edge_model` chose)."""

    theta: dict
    history: dict
    report: Any
    wall_time: float
    adam_iterations: int
    lm_iterations: int
    loss: float
    convergence: Any = None
    inputs: Optional[dict] = None
    resume: Optional[dict] = None
    experiment: Any = None


def check_config(config: FitConfig) -> None:
    """ValueError naming the setting when a FitConfig cannot describe a fit (before anything compiles)."""
    for key, least in (("iterations", 0), ("polish", 0), ("frame_stride", 1), ("horizon", 1),
                       ("checkpoint_every", 1), ("window", 1), ("rounds", 1),
                       ("round_iterations", 1), ("density_first", 0)):
        value = getattr(config, key)
        if value is not None and (not isinstance(value, (int, np.integer)) or value < least):
            raise ValueError(f"{key} must be an integer >= {least}, got {value!r}")
    for key in ("learning_rate", "density_learning_rate"):
        value = getattr(config, key)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{key} must be a positive number, got {value}")
    if config.density_first and "particle_mass" not in (canonical(n) for n in config.free):
        raise ValueError("density_first fits a density before the per-particle masses: particle_mass must be free")
    if config.density_first and {"density", "density_field"} & {canonical(n) for n in config.free}:
        raise ValueError("density_first: density (or density_field) and particle_mass both set the particles' "
                         "masses; free one")
    if config.loss not in LOSSES:
        raise ValueError(f"unknown loss {config.loss!r}; choose from {LOSSES}")
    if config.edge_model not in ("fixed", "auto"):
        raise ValueError(f'edge_model must be "fixed" or "auto", got {config.edge_model!r}')
    if not (config.blur in BLUR_MODES or (isinstance(config.blur, (int, float)) and not isinstance(config.blur, bool)
                                         and 0.0 <= config.blur <= BLUR_MAX)):
        raise ValueError(f"blur must be one of {', '.join(BLUR_MODES)} or a number of pixels in [0, {BLUR_MAX:g}], got "
                         f"{config.blur!r}")
    if not (math.isfinite(config.smoothness) and config.smoothness >= 0):
        raise ValueError(f"smoothness must be a finite number >= 0, got {config.smoothness}")
    if config.smoothness > 0 and "shape" not in (canonical(n) for n in config.free):
        raise ValueError("smoothness regularizes the quantity shape, which is not free")
    if config.window is not None and config.horizon is not None:
        raise ValueError("window (truncated backpropagation) and horizon (a growing horizon) are two answers to "
                         "a long recording: choose one")
    if config.window is not None and config.smoothness:
        raise ValueError("window does not combine with smoothness (the shape regularizer)")
    for name, c in (config.clip or {}).items():
        if canonical(name) not in (canonical(n) for n in config.free):
            raise ValueError(f"clip names {name}, which is not a free quantity")
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 0):
            raise ValueError(f"clip of {name} must be a positive number, got {c!r}")


def fit_inputs(exp: Experiment, target: Array, initial: dict, config: FitConfig) -> dict:
    """What a fit is made for, stored in its checkpoints so that a resumed run continues only the same fit:
    sha256 content hashes of the target video as fitted ("target": its float32 frames), of the experiment
    ("scene": every array and setting of the scene, camera, render and time grid), of the scene file when
    there is one ("scene_file"), of the initial guess of the free quantities ("initial"), and the settings
    that shape the Adam iterations."""
    free = tuple(canonical(n) for n in config.free)
    scene = (exp.topology, exp.params, exp.state0, exp.camera, exp.faces, exp.colors, exp.lights, exp.background,
             exp.settings, exp.frames, exp.substeps, exp.frame_dt, exp.push_frames, exp.theta["push"], exp.integrator)
    inputs = {
        "target": content_sha256(np.asarray(target, np.float32)),
        "scene": content_sha256(scene),
        "initial": content_sha256({n: np.asarray(initial[n]) for n in free}),
    }
    if config.scene_file_sha256 is not None:
        inputs["scene_file"] = config.scene_file_sha256
    inputs.update(free=list(free), iterations=config.iterations, learning_rate=config.learning_rate,
                  loss=config.loss, frame_stride=config.frame_stride, horizon=config.horizon)
    if config.smoothness:
        inputs["smoothness"] = config.smoothness
    if config.window is not None:
        inputs["window"] = int(config.window)
    if config.clip:
        inputs["clip"] = {canonical(k): float(v) for k, v in sorted(config.clip.items())}
    if config.density_first:
        inputs["density_first"] = [int(config.density_first), float(config.density_learning_rate)]
    return inputs


def _frames_of(exp: Experiment, stride: int) -> np.ndarray:
    # Frame 0 is the given initial state and carries no information: leave it out.
    return np.arange(1, exp.frames + 1, stride)


def make_loss(exp: Experiment, target: Array, kind: str = "rgba", frame_stride: int = 1,
              horizon: Optional[tuple[int, int]] = None):
    """Image loss of theta against the target video [frames + 1, H, W, 4]: `loss_fn(theta)`, or with
    `horizon = (start, ramp)` `loss_fn(theta, iteration)` weighting only the first
    start + (all - start) * iteration / ramp frames (a growing horizon, see `levenberg_marquardt`)."""
    target = jnp.asarray(target)
    idx = _frames_of(exp, frame_stride)
    tgt = target[idx]

    def frame_losses(theta):
        x = vertices(exp, theta)[idx]
        pred = frames_for(exp, x, theta)
        return jax.vmap(lambda p, t: image_loss(kind, p[None], t[None]))(pred, tgt)

    if horizon is None:
        return lambda theta: jnp.mean(frame_losses(theta))
    start, ramp = horizon
    num = len(idx)

    def loss_fn(theta, iteration):
        h = start + (num - start) * jnp.minimum(iteration.astype(jnp.float32) / max(ramp, 1), 1.0)
        return jnp.mean(horizon_weights(num, h) * frame_losses(theta))

    return loss_fn


def residual_with_target(exp: Experiment, kind: str = "rgba", frame_stride: int = 1, dense: bool = True):
    """`residual(theta, target, weights=None)`: pixel residuals (pred - target) * sqrt(w_t / N), flattened,
    so that |r|^2 is the mean squared error (the rgba loss) with per-frame weights w (mean 1 for all ones)."""
    idx = _frames_of(exp, frame_stride)

    def residual(theta, target, weights=None):
        tgt = residual_channels(kind, target[idx])
        x = vertices(exp, theta)[idx]
        pred = frames_for(exp, x, theta, dense=dense)
        r = (residual_channels(kind, pred) - tgt) / math.sqrt(tgt.size)
        if weights is not None:
            r = r * jnp.sqrt(weights)[:, None, None, None]
        return jnp.ravel(r)

    return residual


def horizon_weights(num: int, horizon) -> Array:
    """Frame weights [num]: 1 for the first `horizon` loss frames, 0 after, normalized to mean 1 over the
    frames used (so losses of different horizons are comparable)."""
    w = (jnp.arange(num) < horizon).astype(jnp.float32)
    return w * (num / jnp.maximum(jnp.sum(w), 1.0))


def make_residual(exp: Experiment, target: Array, kind: str = "rgba", frame_stride: int = 1, dense: bool = True):
    """Pixel residuals of theta against a fixed target video (see `residual_with_target`)."""
    target = jnp.asarray(target)
    residual = residual_with_target(exp, kind, frame_stride, dense)
    return lambda theta: residual(theta, target)


def levenberg_marquardt(exp: Experiment, target: Array, theta: dict, free, *, steps: int = 10,
                        kind: str = "rgba", frame_stride: int = 1, jac_fields=None, progress: bool = False,
                        tol: float = 1e-6, horizons=None, info: Optional[dict] = None):
    """Levenberg-Marquardt on the pixel residuals over the free quantities (log space for positive ones).

    The Jacobian comes from forward-mode differentiation through the dense renderer, one column per free
    scalar, so this is for a few scalars (a handful of quantities, or a small cloth's velocities).
    `jac_fields` (a superset of `free`) lets different free sets share one compiled Jacobian.
    `horizons`: growing numbers of leading frames to fit in turn (each stage up to `steps` steps; the
    last is always the whole video): a start far off in a ratio such as stiffness / mass puts the
    oscillations out of phase late in the video, but the first frames still point the right way.
    Returns (theta, [(loss on the stage's horizon, {name: value}) after each accepted step]); `info`, when
    given, receives "grad_norm": |grad of the loss| in the transformed space at the returned theta, and
    "gn_step": the largest relative change of a quantity that one more Gauss-Newton step would make, and
    "jacobian" [residuals, free scalars], "residual", "labels", "values" and "dxdz" (the transforms' slopes)
    at the returned theta, over the whole video: what `report_from_jacobian` needs.
    """
    free = tuple(canonical(n) for n in free)
    jac_fields = tuple(canonical(n) for n in jac_fields) if jac_fields is not None else free
    if not set(free) <= set(jac_fields):
        raise ValueError(f"jac_fields {jac_fields} must include every free quantity {free}")
    tf = {n: resolve_transform(QUANTITIES[n].transform) for n in jac_fields}
    theta = _as_theta(exp, theta)
    shapes = {n: jnp.shape(theta[n]) for n in jac_fields}
    sizes = {n: int(np.prod(shapes[n])) for n in jac_fields}
    target = jnp.asarray(target, theta["push"].dtype)
    # Everything the closures below hold: the compiled pair is shared by every call with these.
    key = ("lm", kind, frame_stride, jac_fields, tuple(shapes.items()),
           tuple(QUANTITIES[n].transform for n in jac_fields))

    def r_of_z(e, z, base, tgt, w):
        th, off = dict(base), 0
        for n in jac_fields:
            th[n] = tf[n].inverse(z[off:off + sizes[n]].reshape(shapes[n]))
            off += sizes[n]
        return residual_with_target(e, kind, frame_stride, dense=True)(th, tgt, w)

    def jac(e, z, base, tgt, w):
        return least_squares.forward_jacobian(lambda zz: r_of_z(e, zz, base, tgt, w), z)

    r_fn0, jac_fn0 = compiled(exp, r_of_z, key + ("residual",)), compiled(exp, jac, key + ("jacobian",))
    num = len(_frames_of(exp, frame_stride))
    z = jnp.concatenate([jnp.ravel(tf[n].forward(theta[n])) for n in jac_fields])
    mask = np.concatenate([np.full(sizes[n], n in free) for n in jac_fields])

    def unpack(zz):
        th, off = dict(theta), 0
        for n in jac_fields:
            if n in free:  # the others keep their exact values (no log/exp round trip)
                th[n] = tf[n].inverse(jnp.asarray(zz[off:off + sizes[n]], z.dtype).reshape(shapes[n]))
            off += sizes[n]
        return th

    zf = np.asarray(z, np.float64)
    records = []
    stages = sorted({min(int(h), num) for h in (horizons or ())} | {num})
    for horizon in stages:
        w = horizon_weights(num, horizon)
        done = len(records)

        def residual(zz):
            return r_fn0(jnp.asarray(zz, z.dtype), theta, target, w)  # noqa: B023

        def linearize(zz):
            r, cols = jac_fn0(jnp.asarray(zz, z.dtype), theta, target, w)  # noqa: B023
            return r, np.asarray(cols).T

        def on_step(k, cost):
            if progress:
                print(f"  LM step {done + k} (first {horizon} frames): loss {cost:.4e}")  # noqa: B023

        solution = least_squares.levenberg_marquardt(
            residual if z.size > LM_TRIALS_BY_JACOBIAN else None, linearize, zf, mask=mask, steps=steps, tol=tol,
            on_step=on_step)
        zf = solution.z
        for cost, zk in solution.steps:
            th = unpack(zk)
            records.append((cost, {n: np.asarray(th[n]) for n in free}))
    if info is not None:
        info["grad_norm"] = solution.grad_norm
        info["jacobian"], info["residual"] = solution.jacobian, solution.residual
        info["labels"] = tuple(lab for n in jac_fields if n in free
                               for lab in scalar_labels(n, shapes[n], tf[n].label))
        z_free = jnp.asarray(zf[mask], z.dtype)
        values, slopes, off = [], [], 0
        for n in (n for n in jac_fields if n in free):
            zn = z_free[off:off + sizes[n]]
            off += sizes[n]
            values.append(np.ravel(np.asarray(tf[n].inverse(zn), np.float64)))
            slopes.append(np.ravel(np.asarray(jax.jvp(tf[n].inverse, (zn,), (jnp.ones_like(zn),))[1], np.float64)))
        info["values"], info["dxdz"] = np.concatenate(values), np.concatenate(slopes)
        # How far the (undamped) Gauss-Newton step would still move each quantity, relative to its
        # value: near 0 at a minimum, whatever size the last accepted step had.
        trial = zf.copy()
        trial[mask] += solution.gauss_newton_step
        here, there = unpack(zf), unpack(trial)
        info["gn_step"] = max((float(np.linalg.norm(np.asarray(there[n], np.float64) - np.asarray(here[n], np.float64))
                                     / max(float(np.linalg.norm(np.asarray(here[n], np.float64))), 1e-300))
                               for n in free), default=0.0)
    return unpack(zf), records


def fit_loss(exp: Experiment, config: FitConfig, ramp=None) -> Callable:
    """The Adam stage's loss `loss_fn(theta, *iteration)` of a theta that carries the experiment's arrays and
    the target (`_with_data`): the image loss (`make_loss`, with the horizon `ramp`) plus the shape
    smoothness term when `config.smoothness`."""

    if config.window is not None:
        from gradsim_jax.sysid.windowed import windowed_loss

        windows = truncation_windows(exp, config)

        def windowed(theta, *iteration):
            theta, e, tgt = _split_data(exp, theta)
            return windowed_loss(e, tgt, windows, shooting="truncated", kind=config.loss)(theta)

        return windowed

    def loss_fn(theta, *iteration):
        theta, e, tgt = _split_data(exp, theta)
        loss = make_loss(e, tgt, config.loss, config.frame_stride, ramp)(theta, *iteration)
        if config.smoothness:
            loss = loss + config.smoothness * shape_roughness(theta["shape"], e.topology.rigid.faces)
        return loss

    return loss_fn


def truncation_windows(exp: Experiment, config: FitConfig):
    """The `Windows` of `config.window` (truncated backpropagation: no overlap; a window longer than the
    recording is the whole recording)."""
    from gradsim_jax.sysid.windowed import Windows

    return Windows(exp.frames, min(int(config.window), exp.frames), 0, config.frame_stride)


#: A later round (`FitConfig.rounds`) must lower the loss below this fraction of the best so far, or the
#: rounds end.
ROUND_GAIN = 0.99


def identify(exp: Experiment, target: Array, initial: dict, config: FitConfig) -> SysIdResult:
    """Fit the quantities `config.free` to the target video [frames + 1, H, W, 4], starting at `initial`:
    Adam, then the Levenberg-Marquardt polish, in up to `config.rounds` rounds (see `FitConfig`)."""
    started = time.perf_counter()
    check_config(config)
    exp, full, theta0, config, blur = prepare(exp, target, initial, config)
    free = tuple(config.free)
    inputs = fit_inputs(exp, target, theta0, config)
    density = None
    if config.density_first:
        theta0, density = _density_first(exp, target, theta0, config, free)
    target = jnp.asarray(target, theta0["push"].dtype)
    channels = {"rgba": slice(None), "rgb": slice(0, 3), "silhouette": slice(3, 4)}[config.loss]
    floor = noise_floor(np.asarray(target)[_frames_of(exp, config.frame_stride)], channels)
    history = {"iteration": [], "loss": [], "params": {n: [] for n in free}, "stage": []}
    iterations = config.round_iterations or max(config.iterations // 2, 1)
    done = [_fit_round(exp, target, theta0, config, free, history, iterations=config.iterations,
                       horizon=config.horizon, checkpoint_dir=config.checkpoint_dir, metadata=inputs,
                       resume=config.resume)]
    best = done[0]
    while len(done) < config.rounds and np.isfinite(best["loss"]) and best["loss"] > FLOOR_FACTOR * floor:
        if config.progress:
            print(f"  round {len(done) + 1}: the loss {best['loss']:.3g} is {best['loss'] / max(floor, 1e-300):.3g} x "
                  f"the noise floor: {iterations} more Adam iterations over all frames, then the polish")
        checkpoints = (None if config.checkpoint_dir is None
                       else str(Path(config.checkpoint_dir) / f"round{len(done) + 1}"))
        done.append(_fit_round(exp, target, best["theta"], config, free, history, iterations=iterations,
                               horizon=None, checkpoint_dir=checkpoints,
                               metadata={**fit_inputs(exp, target, best["theta"], config), "round": len(done) + 1,
                                         "iterations": iterations, "horizon": None},
                               resume=config.resume and checkpoints is not None
                               and Path(checkpoint_path(checkpoints)).exists()))
        gained = done[-1]["loss"] < ROUND_GAIN * best["loss"]
        if done[-1]["loss"] < best["loss"]:
            best = done[-1]
        if not gained:
            break
    theta, info, final_loss = best["theta"], best["info"], best["loss"]
    history["rounds"] = len(done)
    history["best_round"] = 1 + next(k for k, r in enumerate(done) if r is best)
    if density is not None:
        # The per-particle steps bounce near the minimum (the loss is not continuous in the masses at the
        # default depth blend): the lowest-loss iterate is the estimate. Every entry of the history is a loss
        # over all frames when no horizon grows, and holds the whole values of quantities up to 64 elements.
        losses = np.asarray(history["loss"], np.float64)
        whole = all(np.size(theta[n]) <= HISTORY_FULL_SIZE for n in free)
        if config.horizon is None and whole and losses.size and np.nanmin(losses) < final_loss:
            k = int(np.nanargmin(losses))
            theta = {**theta, **{n: jnp.asarray(history["params"][n][k], exp.dtype) for n in free}}
            final_loss, info = float(losses[k]), {}
            density["best_iteration"] = int(history["iteration"][k])
        # When they end no lower than the density field left the loss, the field's masses (and the quantities
        # fitted with it) are the estimate.
        density["kept"] = bool(np.isfinite(density["loss"]) and not final_loss < density["loss"])
        if density["kept"]:
            if config.progress:
                print(f"  the per-particle fit ended at loss {final_loss:.3e}, no lower than the density field's "
                      f"{density['loss']:.3e}: the field's masses are the estimate")
            theta = {**theta, **{n: theta0[n] for n in free}}
            final_loss, info = density["loss"], {}  # the polish's Jacobian was made elsewhere
        history["density_first"] = density
    start_loss, start_theta = done[0]["start_loss"], done[0]["start"]
    if start_loss is None:  # the first entry is not a loss over all frames at the start: evaluate it
        start_loss = _loss_at(exp, target, start_theta, config)
    history["start_loss"] = start_loss
    if blur is not None:
        history["blur"] = blur
    if math.isfinite(start_loss) and not final_loss <= start_loss:
        # A fit never returns an estimate that explains the video worse than where it started.
        if config.progress:
            print(f"  the fit ended at loss {final_loss:.4e}, above its start's {start_loss:.4e}: the start is the "
                  "estimate")
        theta = {**theta, **{n: start_theta[n] for n in free}}
        final_loss, info = start_loss, {}
        history["kept_start"] = True
    n_scalars = sum(int(np.size(theta[n])) for n in free)
    report = None
    if config.report and n_scalars <= REPORT_MAX_SCALARS and "jacobian" in info:
        # The polish's last Jacobian is the report's (same residuals, all frames, same coordinates).
        report = report_from_jacobian(info["jacobian"], info["residual"], info["labels"], info["values"],
                                      info["dxdz"])
    elif config.report and n_scalars <= REPORT_MAX_SCALARS:

        def residual(th):
            th, e, tgt = _split_data(exp, th)
            return make_residual(e, tgt, config.loss, config.frame_stride, dense=True)(th)

        report = gauss_newton_report(residual, _with_data(theta, exp, target), free=free,
                                     transforms=transforms_for(free))
    # With density_first: the per-particle stage's start, so that a stage that explains little more of the
    # video than the field did is not called converged by the loss ratio (the field stage's start is far off).
    initial_loss = history["loss"][0] if history["loss"] else final_loss
    edges = None
    if (config.report or config.edge_model == "auto") and np.isfinite(final_loss) and final_loss > FLOOR_FACTOR * floor:
        edges = _edge_residual(exp, target, theta, config)
        history["edges"] = edges
        if config.edge_model == "auto" and edge_advice(edges):
            other = _other_edge_model(exp, target, theta, config, free, final_loss, iterations)
            history["edge_model"] = other["record"]
            if other["result"] is not None:
                sub = other["result"]
                sub.history["edge_model"] = other["record"]
                if blur is not None:
                    sub.history["blur"] = blur
                sub.history["first_fit"] = {"loss": history["loss"], "iteration": history["iteration"],
                                            "params": history["params"]}
                return dataclasses.replace(
                    sub, wall_time=time.perf_counter() - started, inputs=inputs, resume=done[0]["resumed"],
                    adam_iterations=sub.adam_iterations + sum(r["adam_iterations"] for r in done),
                    lm_iterations=sub.lm_iterations + sum(r["lm_steps"] for r in done))
    convergence = assess(initial_loss=initial_loss, final_loss=final_loss, floor=floor,
                         grad_norm=best["grad_norm"], last_step=best["last_step"], loss_kind=config.loss, edges=edges)
    # The quantities left out as restating the scene come back with their values; those a free one superseded
    # do not (their values would contradict the fit).
    superseded = {QUANTITIES[n].field for n in free}
    theta = {**{k: v for k, v in full.items() if k in QUANTITIES and QUANTITIES[k].field not in superseded}, **theta}
    return SysIdResult(theta={k: np.asarray(v) for k, v in theta.items()}, history=history, report=report,
                       wall_time=time.perf_counter() - started,
                       adam_iterations=sum(r["adam_iterations"] for r in done),
                       lm_iterations=sum(r["lm_steps"] for r in done), loss=final_loss, convergence=convergence,
                       inputs=inputs, resume=done[0]["resumed"], experiment=exp)


#: FitConfig.blur's modes besides a number of pixels.
BLUR_MODES = ("off", "auto", "fit")
#: "auto" fits a blur when the target's edges measure at least this much blurrier (pixels) than the render's
#: at the start. A target rendered by this scene's own renderer measures up to about 0.2 px at a start 50 %
#: off (its outlines moved and turned, not blurred); SoftRas's edges against "box" coverage 0.55 px.
BLUR_AUTO = 0.35
#: The least blur a free one starts from (pixels): log space needs a start above 0.
BLUR_START = 0.25


def prepare(exp: Experiment, target: Array, initial: dict, config: FitConfig):
    """(exp, full, theta0, config, blur) as `identify` fits them: `full` the initial theta with the experiment's
    defaults, exp and theta0 `focused` on the free quantities, the blur decided (`FitConfig.blur`: measured,
    and added to the free quantities when fitted; blur: what was decided, or None), the free names canonical."""
    free = tuple(canonical(n) for n in config.free)
    full = _as_theta(exp, with_camera_pose(exp, initial) if "camera_pose" in free else initial)
    exp, theta0 = focused(exp, full, free)
    theta0, blur = _blur_start(exp, target, theta0, config)
    if blur is not None and blur["free"] and "blur" not in free:
        free = free + ("blur",)
    return exp, full, theta0, dataclasses.replace(config, free=free), blur


def _blur_start(exp: Experiment, target: Array, theta0: dict, config: FitConfig) -> tuple[dict, Optional[dict]]:
    """(theta0, what was decided about the blur or None) for `FitConfig.blur`."""
    mode = config.blur
    if "blur" in theta0 or mode == "off":
        return theta0, None
    if mode not in BLUR_MODES:
        return {**theta0, "blur": jnp.asarray(float(mode), exp.dtype)}, {"mode": "fixed", "value": float(mode),
                                                                          "free": False}
    from gradsim_jax.physics import SimulationDiverged

    alpha = config.loss in ("rgba", "silhouette")
    try:
        _, start = simulate_video(exp, theta0)
    except SimulationDiverged as e:
        warnings.warn(f"blur {mode}: the start does not simulate ({e}); no blur measured or fitted")
        return theta0, {"mode": mode, "measured": None, "free": False}
    frames = _frames_of(exp, config.frame_stride)
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


def _other_edge_model(exp: Experiment, target: Array, theta: dict, config: FitConfig, free, loss: float,
                      iterations: int) -> dict:
    """`FitConfig.edge_model` "auto": {"record": what was tried and measured, "result": the fit continued with the
    other edge model when that explains the video better than `loss`, else None}."""
    other = "softras" if exp.settings.coverage == "box" else "box"
    switched = dataclasses.replace(exp, settings=dataclasses.replace(exp.settings, coverage=other))
    start = dict(theta)
    if "blur" in free:
        start["blur"] = jnp.asarray(BLUR_START, exp.dtype)
    at_estimate = _loss_at(switched, target, start, config)
    record = {"from": exp.settings.coverage, "to": other, "loss": float(loss), "loss_at_estimate": at_estimate,
              "switched": False}
    if config.progress:
        print(f"  edges: the loss left lies on the outlines; at the estimate {other} coverage gives {at_estimate:.3e} "
              f"against {exp.settings.coverage}'s {loss:.3e}")
    if not at_estimate < loss:
        return {"record": record, "result": None}
    if config.progress:
        print(f"  edges: continuing with [render] coverage = \"{other}\"")
    sub_config = dataclasses.replace(config, edge_model="fixed", blur="off", iterations=iterations, horizon=None,
                                     density_first=0, checkpoint_dir=None, resume=False, callback=None)
    sub = identify(switched, target, start, sub_config)
    record["final_loss"] = float(sub.loss)
    if not sub.loss < loss:
        return {"record": record, "result": None}
    record["switched"] = True
    return {"record": record, "result": sub}


def _edge_residual(exp: Experiment, target: Array, theta: dict, config: FitConfig) -> dict:
    """Where the loss left at theta lies: {"residual_share": the fraction of the squared residual on the target's
    outlines (`render.blur.edge_mask`), "pixel_share": the fraction of the pixels they are, "coverage": the
    render's edge model, "blur": the blur applied (pixels) or None}."""
    from gradsim_jax.physics import SimulationDiverged

    frames = _frames_of(exp, config.frame_stride)
    tgt = np.asarray(target, np.float64)[frames]
    try:
        _, video_ = simulate_video(exp, theta)
    except SimulationDiverged:
        return {}
    pred = np.asarray(video_, np.float64)[frames]
    channels = {"rgba": slice(None), "rgb": slice(0, 3), "silhouette": slice(3, 4)}[config.loss]
    r2 = np.sum(np.square(pred[..., channels] - tgt[..., channels]), axis=-1)
    mask = edge_mask(edge_channel(tgt, config.loss in ("rgba", "silhouette")))
    total = float(r2.sum())
    blur = theta.get("blur")
    return {"residual_share": float(r2[mask].sum() / total) if total > 0 else 0.0,
            "pixel_share": float(mask.mean()), "coverage": exp.settings.coverage,
            "blur": None if blur is None else float(np.asarray(blur))}


def _loss_at(exp: Experiment, target: Array, theta: dict, config: FitConfig) -> float:
    """The fit's image loss over all its frames (`make_loss`) at theta (host float)."""

    def loss(e, th, tgt):
        return make_loss(e, tgt, config.loss, config.frame_stride)(th)

    value = compiled(exp, loss, ("start_loss", config.loss, config.frame_stride))(_as_theta(exp, theta), target)
    return float(value)


def _density_first(exp: Experiment, target: Array, theta0: dict, config: FitConfig, free) -> tuple[dict, dict]:
    """The first stage of `FitConfig.density_first`: (theta0 with "particle_mass" the masses of the fitted
    density field and the other free quantities as fitted with it, {"density": kg/m^3 at the bodies'
    centroid, "field": the fitted "density_field", "range": [least, largest] density of a particle, "loss":
    the stage's final image loss, "initial_loss": its first, "losses": all of its losses, "start": the density it
    started from})."""
    volume, coordinates = (np.asarray(a, np.float64) for a in density_field_coordinates(exp.topology, exp.params))
    masses = np.asarray(theta0["particle_mass"], np.float64)
    soft = volume > 0
    if not soft.any():
        raise ValueError("density_first needs a soft body (tets): this scene has none")
    start = float(masses[soft].sum() / volume[soft].sum())
    # The stage's scene: the particles of no tet keep the initial masses (not the scene's own), and nothing
    # of the scene's own per-particle masses is left to fill in a quantity the stage does not set.
    params = replace_paths(exp.params, {"particles.mass": jnp.asarray(masses, exp.dtype)})
    stage_exp = dataclasses.replace(exp, params=params,
                                    theta={k: v for k, v in exp.theta.items() if k != "particle_mass"})
    stage_free = tuple("density_field" if n == "particle_mass" else n for n in free)
    stage_theta = {k: v for k, v in theta0.items() if k != "particle_mass"}
    stage_theta["density_field"] = jnp.asarray([math.log(start), 0.0, 0.0, 0.0], exp.dtype)
    stage = dataclasses.replace(config, free=stage_free, iterations=config.density_first,
                                learning_rate=config.density_learning_rate, density_first=0, rounds=1,
                                checkpoint_dir=None, resume=False, callback=None, report=False, clip=None)
    if config.progress:
        print(f"  density first: a density field for the soft bodies ({config.density_first} Adam iterations "
              f"from {start:.4g} kg/m^3 everywhere)")
    result = identify(stage_exp, target, stage_theta, stage)
    field = np.asarray(result.theta["density_field"], np.float64)
    rho = np.exp(field[0] + coordinates @ field[1:])
    theta = dict(theta0)
    for n in stage_free:
        if n != "density_field":
            theta[n] = jnp.asarray(result.theta[n], exp.dtype)
    theta["particle_mass"] = jnp.asarray(np.where(soft, rho * volume, masses), exp.dtype)
    least, largest = float(rho[soft].min()), float(rho[soft].max())
    if config.progress:
        print(f"  density first: {math.exp(field[0]):.6g} kg/m^3 at the centroid ({least:.4g} to {largest:.4g}; "
              f"loss {result.loss:.3e}); now every particle's mass")
    initial_loss = float(result.history["loss"][0]) if result.history["loss"] else float(result.loss)
    return theta, {"density": math.exp(field[0]), "field": field.tolist(), "range": [least, largest],
                   "loss": float(result.loss), "initial_loss": initial_loss, "start": start,
                   "losses": [float(v) for v in result.history["loss"]]}


def _fit_round(exp: Experiment, target: Array, theta: dict, config: FitConfig, free, history: dict, *,
               iterations: int, horizon, checkpoint_dir, metadata: dict, resume: bool) -> dict:
    """One round of `identify` from `theta`: `iterations` Adam iterations (growing `horizon`), then the
    polish; appends to `history` and returns theta, loss (the image loss at the end of the round), info (the
    polish's), grad_norm, last_step, adam_iterations, lm_steps and resumed."""
    tf = transforms_for(free)
    round_start = len(history["loss"])
    adam_iterations, grad_norm, resumed = 0, float("nan"), None
    next_iteration = history["iteration"][-1] + 1 if history["iteration"] else 0
    if iterations > 0:
        ramp = None if horizon is None else (horizon, iterations // 2)

        loss_fn = fit_loss(exp, config, ramp)
        callback = None
        if config.callback is not None:
            def callback(it, params, loss, aux):
                return config.callback(next_iteration + it, _split_data(exp, params)[0], loss, aux)
        theta, bounds = stable_bounds(exp, theta, free)
        start_theta = theta
        result = run_fit(
            loss_fn, _with_data(theta, exp, target), free=free, transforms=tf,
            optimizer=optax.adam(config.learning_rate), schedule=cosine_schedule(max(iterations, 1), alpha=0.02),
            steps=iterations, checkpoint_dir=checkpoint_dir, checkpoint_every=config.checkpoint_every,
            resume=resume, progress=config.progress, callback=callback, uses_iteration=ramp is not None,
            metadata=metadata,
            resume_anyway=config.resume_anyway, checks=traced_checks(exp),
            clip={canonical(k): v for k, v in config.clip.items()} if config.clip else None, bounds=bounds,
        )
        resumed = result.resume
        theta = _split_data(exp, result.params)[0]
        adam_iterations = result.iterations
        grad_norm = result.grad_norm
        history.setdefault("grad_norm", []).extend(result.history.get("grad_norm", []))
        norms = history.setdefault("grad_norms", {})
        for n, v in result.history.get("grad_norms", {}).items():
            norms.setdefault(n, []).extend(v)
        history.setdefault("backoffs", []).extend(next_iteration + int(b) for b in result.history.get("backoffs", []))
        history["iteration"].extend(next_iteration + i for i in result.history["iteration"])
        history["loss"].extend(result.history["loss"])
        for n in free:
            history["params"][n].extend(result.history["params"][n])
        history["stage"].extend(["adam"] * len(result.history["iteration"]))
        # The state after the last update, as the next entry.
        history["iteration"].append(next_iteration + adam_iterations)
        history["loss"].append(result.loss)
        for n in free:
            history["params"][n].append(_record(theta[n]))
        history["stage"].append("adam")
    else:
        start_theta = theta
    # The loss at the round's start over all frames: the first Adam entry, when it is one.
    whole = iterations > 0 and horizon is None and len(history["loss"]) > round_start
    start_loss = float(history["loss"][round_start]) if whole else None
    n_scalars = sum(int(np.size(theta[n])) for n in free)
    lm_steps = 0
    info: dict = {}
    last_step = None
    if config.polish > 0 and n_scalars > LM_MAX_SCALARS and config.progress:
        print(f"  (no Levenberg-Marquardt polish: {n_scalars} free scalars > {LM_MAX_SCALARS})")
    scalars_only = all(np.size(theta[n]) == 1 for n in free)
    if config.polish > 0 and config.window is not None and not scalars_only and config.progress:
        print("  (no Levenberg-Marquardt polish: a windowed fit polishes scalar quantities only)")
    records = None
    if config.polish > 0 and config.window is not None and scalars_only and n_scalars <= LM_MAX_SCALARS:
        from gradsim_jax.sysid.windowed import polish_truncated

        theta, records = polish_truncated(exp, target, theta, free, truncation_windows(exp, config),
                                          steps=config.polish, kind=config.loss, progress=config.progress)
        theta = {k: jnp.asarray(v) for k, v in theta.items()}
    elif config.polish > 0 and n_scalars <= LM_MAX_SCALARS:
        theta, records = levenberg_marquardt(exp, target, theta, free, steps=config.polish, kind=config.loss,
                                             frame_stride=config.frame_stride, progress=config.progress, info=info)
        grad_norm = info.get("grad_norm", grad_norm)
        last_step = info.get("gn_step")
        if iterations == 0 and not records:
            history["loss"].append(float(np.sum(np.square(info["residual"]))))  # no step taken: at the start
    if records is not None:
        start = history["iteration"][-1] + 1 if history["iteration"] else 0
        for k, (cost, values) in enumerate(records):
            history["iteration"].append(start + k)
            history["loss"].append(cost)  # |r|^2 = the image loss (on the LM stage's horizon)
            for n in free:
                history["params"][n].append(_record(values[n]))
            history["stage"].append("lm")
        lm_steps = len(records)
    # |r|^2 of the last LM step (over all frames) is the image loss; else the fit's own final loss.
    loss = history["loss"][-1] if len(history["loss"]) > round_start else float("nan")
    if last_step is None:
        last_step = relative_last_step({n: v[round_start:] for n, v in history["params"].items()})
    return {"theta": theta, "loss": loss, "info": info, "grad_norm": grad_norm, "last_step": last_step,
            "adam_iterations": adam_iterations, "lm_steps": lm_steps, "resumed": resumed, "start": start_theta,
            "start_loss": start_loss}


def _record(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else (x.copy() if x.size <= 64 else float(np.mean(x)))

