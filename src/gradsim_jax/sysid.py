"""System identification from video: recover physical quantities of a cloth by gradient descent through
simulation and rendering (gradSim, Jatavallabhula et al., ICLR 2021, section 4).

An `Experiment` is everything about a recording except the unknowns: the scene's structure and its known
parameters, the camera, colors, lights and render settings, the time grid (frames, substeps, frame_dt),
and known inputs. The quantities a fit may estimate are a dict `theta` of named physical values
(`QUANTITIES`): "mass" (kg, mean mass of the free particles: every particle mass is scaled by the same
factor), "stiffness" (membrane k_mu = tri_ke; the area stiffness tri_ka keeps the scene's ratio to it),
"damping" (tri_kd), "bending" (bend_ke), "drag", "lift" (aerodynamics), "friction" (ground contact_mu),
"velocity" ([n, 3] m/s, initial velocity of every particle). One more entry is a known input, never
estimated: "push" ([n, 3] N, a force applied during the first `push_frames` frames).

`assemble(experiment, theta)` expands the scalars into the per-element `Params` arrays; it runs inside the
traced loss, so the scene is rebuilt from theta on every forward pass (DESIGN.md).

Identifiability: under gravity and internal forces alone every acceleration is (force / mass), and the
internal forces are linear in the stiffness and damping coefficients, so scaling mass, stiffness and
damping together leaves the motion unchanged; only ratios show. A known force that does not scale with
them breaks the symmetry: the push above (its acceleration is push / mass) or air drag with a known
coefficient. `gauss_newton_report` on the pixel residuals at the solution flags what is left unseparated.

The fit runs in two stages: Adam (through `gradsim_jax.fit.fit`, with checkpoints and resume) on the
image loss, then, for a few free scalars, Levenberg-Marquardt steps on the pixel residuals, whose
Jacobian comes from forward-mode differentiation through the dense reference renderer.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from gradsim_jax.fit import check_resume, checkpoint_path, content_sha256, gauss_newton_report, rgba_mse
from gradsim_jax.fit import fit as run_fit
from gradsim_jax.fit import silhouette_loss
from gradsim_jax.fit.convergence import assess, noise_floor, relative_last_step
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.physics import Control, Params, State, Topology, check_finite, simulate
from gradsim_jax.physics.checks import validate_traced
from gradsim_jax.render import Camera, Lights, RenderSettings, composite, render, render_dense
from gradsim_jax.render.camera import pose_vector, rotation_from_rvec, with_pose_vector

Array = Any


@dataclasses.dataclass(frozen=True)
class Quantity:
    """A named physical quantity a fit can estimate: Params field it sets, unit, transform, aliases."""

    name: str
    field: str
    unit: str
    transform: str
    aliases: tuple[str, ...]
    doc: str


#: Estimable quantities, by canonical name. Positive scalars are fitted in log space.
QUANTITIES: dict[str, Quantity] = {
    q.name: q
    for q in (
        Quantity("velocity", "v", "m/s", "identity", ("velocity", "vel"), "initial velocity of every particle [n, 3]"),
        Quantity("mass", "mass", "kg", "log", ("mass",), "mean mass of the free particles (all scaled alike)"),
        Quantity("stiffness", "tri_ke", "N/m", "log", ("stiffness", "tri_ke"),
                 "membrane stiffness k_mu (tri_ke); k_lambda (tri_ka) follows at the scene's ratio"),
        Quantity("damping", "tri_kd", "N s/m", "log", ("damping", "tri_kd"), "membrane damping k_damp (tri_kd)"),
        Quantity("bending", "bend_ke", "N m/rad", "log", ("bending", "edge_ke", "bend_ke"), "bending stiffness"),
        Quantity("drag", "tri_drag", "N s^2/m^4", "log", ("drag", "tri_drag"), "aerodynamic drag coefficient"),
        Quantity("lift", "tri_lift", "N s^2/m^4", "log", ("lift", "tri_lift"), "aerodynamic lift coefficient"),
        Quantity("friction", "contact_mu", "1", "log", ("friction", "contact_mu", "mu"),
                 "ground friction coefficient"),
        Quantity("camera_pose", "camera", "rad, m", "identity", ("camera_pose", "pose"),
                 "camera pose (rvec [3] rad, tvec [3] m; OpenCV world-to-camera) when only roughly known"),
    )
}
#: Known inputs that live in theta but are never estimated.
KNOWN_INPUTS = ("push",)


def canonical(name: str) -> str:
    """Canonical quantity name for `name` or one of its aliases; ValueError listing the choices."""
    key = name.strip().lower()
    for q in QUANTITIES.values():
        if key == q.name or key in q.aliases:
            return q.name
    choices = sorted({a for q in QUANTITIES.values() for a in q.aliases})
    raise ValueError(f"unknown quantity {name!r}; choose from {', '.join(choices)}")


def transforms_for(names) -> dict[str, str]:
    return {n: QUANTITIES[n].transform for n in names}


@dataclasses.dataclass(eq=False)
class Experiment:
    """A recording setup: scene, camera, time grid and known inputs; theta holds the physical quantities.

    topology, params, state0: the built scene (`Scene.build`); params/state0 give every value theta does not.
    faces: [F, 3] triangles rendered (usually topology.triangles). colors: FaceColors/VertexColors/None.
    theta: default values of the quantities (the truth for a synthetic demo, the initial guess otherwise);
      it always holds "push" ([n, 3] N, zeros for none).
    push_frames: number of leading frames during which theta["push"] acts.
    Compiled functions are cached on the instance (compare experiments by identity).
    """

    topology: Topology
    params: Params
    state0: State
    camera: Camera
    faces: Array
    colors: Any
    lights: Optional[Lights]
    background: Array
    settings: RenderSettings
    frames: int
    substeps: int
    frame_dt: float
    theta: dict
    push_frames: int = 0
    name: str = "experiment"

    def __post_init__(self):
        free = np.asarray(~np.asarray(self.topology.pinned) & (np.asarray(self.params.mass) > 0))
        if not free.any():
            raise ValueError("the experiment has no free particle: nothing moves")
        self.free_particles = free
        self.mass_ref = float(np.mean(np.asarray(self.params.mass)[free]))
        ke, ka = np.asarray(self.params.tri_ke), np.asarray(self.params.tri_ka)
        self.area_ratio = jnp.asarray(np.where(ke > 0, ka / np.where(ke > 0, ke, 1.0), 1.0), self.params.mass.dtype)
        self._cache: dict = {}

    def cached(self, key, build: Callable[[], Any]):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


#: The Experiment attributes that hold arrays. Compiled functions take them as arguments (`compiled`,
#: `_DATA`), so that index arrays and per-element values are data of the program, never constants captured
#: by a closure and folded into it (a 2000 x 2000 grid spent minutes and gigabytes in XLA's constant folding).
ARRAY_FIELDS = ("topology", "params", "state0", "area_ratio", "camera", "faces", "colors", "lights", "background")


def experiment_arrays(exp: Experiment) -> dict:
    """The experiment's arrays: a pytree {attribute: value}."""
    return {name: getattr(exp, name) for name in ARRAY_FIELDS}


def with_arrays(exp: Experiment, arrays: dict) -> Experiment:
    """A shallow copy of `exp` holding `arrays` instead of its own (inside a compiled function: tracers)."""
    out = copy.copy(exp)
    out.__dict__.update(arrays)
    return out


def compiled(exp: Experiment, fn: Callable) -> Callable:
    """`jax.jit` of `fn(exp, *args)` that takes the experiment's arrays as arguments; call it with `*args`."""
    jitted = jax.jit(lambda arrays, *args: fn(with_arrays(exp, arrays), *args))
    return functools.partial(jitted, experiment_arrays(exp))


#: theta entry that carries {"experiment": arrays, "target": video} into `fit`'s compiled step as a fixed
#: parameter (an argument, not a constant); `_with_data` adds it, `_split_data` takes it out again.
_DATA = "_data"


def _with_data(theta: dict, exp: Experiment, target) -> dict:
    return {**theta, _DATA: {"experiment": experiment_arrays(exp), "target": target}}


def _split_data(exp: Experiment, theta: dict):
    """(theta without the data entry, the experiment holding its arrays, the target)."""
    theta = dict(theta)
    data = theta.pop(_DATA)
    return theta, with_arrays(exp, data["experiment"]), data["target"]


def default_theta(topology: Topology, params: Params, state0: State, names=None) -> dict:
    """theta with the scene's own values of the quantities `names` (default: those the scene has), + push."""
    first = lambda a, fallback=1.0: float(np.asarray(a).reshape(-1)[0]) if np.size(a) else fallback  # noqa: E731
    free = ~np.asarray(topology.pinned) & (np.asarray(params.mass) > 0)
    values = {
        "velocity": np.asarray(state0.v),
        "mass": float(np.mean(np.asarray(params.mass)[free])) if free.any() else 1.0,
        "stiffness": first(params.tri_ke), "damping": first(params.tri_kd), "bending": first(params.bend_ke),
        "drag": first(params.tri_drag), "lift": first(params.tri_lift),
        "friction": float(np.asarray(params.contact_mu)),
    }
    names = list(values) if names is None else names
    dtype = np.asarray(state0.x).dtype
    theta = {n: jnp.asarray(values[n], dtype) for n in names}
    theta["push"] = jnp.zeros_like(jnp.asarray(state0.x))
    return theta


def _traced_checks(exp: Experiment):
    """`checks` for `fit`: the scene assembled from a (data-carrying) theta, checked inside the compiled
    step, so that a value that turns bad while fitting (a NaN stiffness, a negative mass) stops the fit
    with its field and index."""

    def checks(theta):
        theta, e, _ = _split_data(exp, theta)
        params, state0 = assemble(e, theta)
        return validate_traced(e.topology, params, state0)

    return checks


def assemble(exp: Experiment, theta: dict) -> tuple[Params, State]:
    """Expand theta into (Params, State0): scalars broadcast to every triangle / edge; traceable."""
    p, s = exp.params, exp.state0
    dtype = p.mass.dtype
    upd = {}

    def scalar(name):
        return jnp.asarray(theta[name], dtype)

    if "mass" in theta:
        upd["mass"] = p.mass * (scalar("mass") / exp.mass_ref)
    if "stiffness" in theta:
        upd["tri_ke"] = jnp.broadcast_to(scalar("stiffness"), p.tri_ke.shape)
        upd["tri_ka"] = upd["tri_ke"] * exp.area_ratio
    for name, field in (("damping", "tri_kd"), ("bending", "bend_ke"), ("drag", "tri_drag"), ("lift", "tri_lift")):
        if name in theta:
            upd[field] = jnp.broadcast_to(scalar(name), getattr(p, field).shape)
    if "friction" in theta:
        upd["contact_mu"] = scalar("friction")
    params = dataclasses.replace(p, **upd)
    state = s if "velocity" not in theta else State(x=s.x, v=jnp.asarray(theta["velocity"], dtype))
    return params, state


def trajectory(exp: Experiment, theta: dict) -> State:
    """Simulated states [frames + 1, n, 3] for theta (plain function; jit at the call site)."""
    params, state0 = assemble(exp, theta)
    # A theta without "push" keeps the scene's own known push (leaving it out must not switch it off).
    push = theta["push"] if "push" in theta else exp.theta.get("push")
    push = None if push is None else jnp.asarray(push, params.mass.dtype)

    def control(frame, state):
        if push is None or exp.push_frames == 0:
            return None
        return Control(force=jnp.where(frame < exp.push_frames, push, jnp.zeros_like(push)))

    return simulate(exp.topology, params, state0, frames=exp.frames, substeps=exp.substeps,
                    frame_dt=exp.frame_dt, control=control)


def camera_for(exp: Experiment, theta: dict) -> Camera:
    """The experiment's camera, with its pose from theta["camera_pose"] when theta has one; traceable."""
    if "camera_pose" not in theta:
        return exp.camera
    return with_pose_vector(exp.camera, theta["camera_pose"])


def with_camera_pose(exp: Experiment, theta: dict) -> dict:
    """theta with "camera_pose" set to the experiment camera's own pose when it has none."""
    if "camera_pose" in theta:
        return theta
    return dict(theta, camera_pose=jnp.asarray(pose_vector(exp.camera), exp.params.mass.dtype))


def render_frames(exp: Experiment, x: Array, dense: bool = False, camera: Optional[Camera] = None) -> Array:
    """RGBA video [T, H, W, 4] of particle positions x [T, n, 3], colours blended over the background by
    the coverage (the renderer's own with `coverage="box"`, else `composite`'s); `dense` uses the autodiff
    reference renderer (forward-mode differentiable, used for Jacobians); `camera` defaults to the
    experiment's."""
    renderer = render_dense if dense else render
    camera = exp.camera if camera is None else camera

    @jax.checkpoint
    def one(vertices):
        image = renderer(camera, vertices, exp.faces, exp.colors, lights=exp.lights,
                         background=exp.background, settings=exp.settings)
        if exp.settings.coverage == "box":
            return image
        return composite(image, exp.background)  # edges as a camera sees them (see `composite`)

    return jax.lax.map(one, x)


def video(exp: Experiment, theta: dict, dense: bool = False) -> Array:
    """Rendered video [frames + 1, H, W, 4] of the experiment with quantities theta."""
    return render_frames(exp, trajectory(exp, theta).x, dense, camera_for(exp, theta))


def simulate_video(exp: Experiment, theta: dict) -> tuple[np.ndarray, np.ndarray]:
    """Host-side: (positions [T, n, 3], video [T, H, W, 4]); raises SimulationDiverged if unstable."""
    fn = exp.cached("video", lambda: compiled(exp, lambda e, th: (trajectory(e, th).x, video(e, th))))
    x, frames = fn(_as_theta(exp, theta))
    traj = check_finite(State(x=x, v=x))
    return np.asarray(traj.x), np.asarray(frames)


def _as_theta(exp: Experiment, theta: dict) -> dict:
    """Fill missing entries from the experiment's defaults; arrays in the scene's dtype."""
    dtype = exp.params.mass.dtype
    out = dict(exp.theta)
    out.update(theta)
    return {k: jnp.asarray(v, dtype) for k, v in out.items()}


# --------------------------------------------------------------------------------------------------
# Loss and fit
# --------------------------------------------------------------------------------------------------

#: Levenberg-Marquardt builds one Jacobian column per free scalar (forward mode): up to this many.
LM_MAX_SCALARS = 200
#: `gauss_newton_report` differentiates in forward mode up to 64 scalars and in reverse mode (one pass per
#: pixel residual: far too slow for a video) beyond, so the report is made for at most 64.
REPORT_MAX_SCALARS = 64

#: rgba: gradSim's loss; rgb: colours only (targets whose alpha is unknown or only approximate, e.g. from a
#: key color: the renderer's colours reach a little past its alpha); silhouette: alpha only.
LOSSES = ("rgba", "rgb", "silhouette")


def image_loss(kind: str, pred: Array, target: Array) -> Array:
    if kind == "rgba":
        return rgba_mse(pred, target)
    if kind == "rgb":
        return rgba_mse(pred[..., :3], target[..., :3])
    if kind == "silhouette":
        return silhouette_loss(pred, target)
    raise ValueError(f"unknown loss {kind!r}; choose from {LOSSES}")


def _residual_channels(kind: str, video_: Array) -> Array:
    return {"rgba": video_, "rgb": video_[..., :3], "silhouette": video_[..., 3:]}[kind]


@dataclasses.dataclass
class FitConfig:
    """How to fit: which quantities, Adam iterations and learning rate (cosine-decayed over `iterations`, so
    a resumed run must ask for the same number), loss, frame stride, `horizon` (fit the first `horizon`
    frames first and grow to all over the first half of the iterations; None: all from the start; for
    dynamics, a start far off puts late frames out of phase), Levenberg-Marquardt polish steps,
    checkpointing, progress, and `fit`'s callback.

    resume_anyway: resume from a checkpoint made for other inputs (see `fit_inputs`).
    scene_file_sha256: content hash of the scene file the experiment was built from, recorded with the
    fit's inputs (None: no scene file)."""

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


@dataclasses.dataclass
class SysIdResult:
    """theta: fitted quantities; history: {"iteration", "loss", "params": {name: [...]}, "stage": [...]}
    (Adam iterations then LM steps); report: IdentifiabilityReport or None; wall_time (s); convergence:
    `gradsim_jax.fit.convergence.Convergence` (did the fit converge, and why not); inputs: `fit_inputs`;
    resume: `FitResult.resume` (None unless resumed from a checkpoint)."""

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


def check_config(config: FitConfig) -> None:
    """ValueError naming the setting when a FitConfig cannot describe a fit (before anything compiles)."""
    for key, least in (("iterations", 0), ("polish", 0), ("frame_stride", 1), ("horizon", 1),
                       ("checkpoint_every", 1)):
        value = getattr(config, key)
        if value is not None and (not isinstance(value, (int, np.integer)) or value < least):
            raise ValueError(f"{key} must be an integer >= {least}, got {value!r}")
    if not (math.isfinite(config.learning_rate) and config.learning_rate > 0):
        raise ValueError(f"learning_rate must be a positive number, got {config.learning_rate}")
    if config.loss not in LOSSES:
        raise ValueError(f"unknown loss {config.loss!r}; choose from {LOSSES}")


def fit_inputs(exp: Experiment, target: Array, initial: dict, config: FitConfig) -> dict:
    """What a fit is made for, stored in its checkpoints so that a resumed run continues only the same fit:
    sha256 content hashes of the target video as fitted ("target": its float32 frames), of the experiment
    ("scene": every array and setting of the scene, camera, render and time grid), of the scene file when
    there is one ("scene_file"), of the initial guess of the free quantities ("initial"), and the settings
    that shape the Adam iterations."""
    free = tuple(canonical(n) for n in config.free)
    scene = (exp.topology, exp.params, exp.state0, exp.camera, exp.faces, exp.colors, exp.lights, exp.background,
             exp.settings, exp.frames, exp.substeps, exp.frame_dt, exp.push_frames, exp.theta["push"])
    inputs = {
        "target": content_sha256(np.asarray(target, np.float32)),
        "scene": content_sha256(scene),
        "initial": content_sha256({n: np.asarray(initial[n]) for n in free}),
    }
    if config.scene_file_sha256 is not None:
        inputs["scene_file"] = config.scene_file_sha256
    inputs.update(free=list(free), iterations=config.iterations, learning_rate=config.learning_rate,
                  loss=config.loss, frame_stride=config.frame_stride, horizon=config.horizon)
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
        x = trajectory(exp, theta).x[idx]
        pred = render_frames(exp, x, camera=camera_for(exp, theta))
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
        tgt = _residual_channels(kind, target[idx])
        x = trajectory(exp, theta).x[idx]
        pred = render_frames(exp, x, dense=dense, camera=camera_for(exp, theta))
        r = (_residual_channels(kind, pred) - tgt) / math.sqrt(tgt.size)
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
    "gn_step": the largest relative change of a quantity that one more Gauss-Newton step would make.
    """
    free = tuple(free)
    jac_fields = tuple(jac_fields) if jac_fields is not None else free
    if not set(free) <= set(jac_fields):
        raise ValueError(f"jac_fields {jac_fields} must include every free quantity {free}")
    tf = {n: resolve_transform(QUANTITIES[n].transform) for n in jac_fields}
    theta = _as_theta(exp, theta)
    shapes = {n: jnp.shape(theta[n]) for n in jac_fields}
    sizes = {n: int(np.prod(shapes[n])) for n in jac_fields}
    target = jnp.asarray(target, theta["push"].dtype)
    key = ("lm", kind, frame_stride, jac_fields)

    def build():
        def r_of_z(e, z, base, tgt, w):
            th, off = dict(base), 0
            for n in jac_fields:
                th[n] = tf[n].inverse(z[off:off + sizes[n]].reshape(shapes[n]))
                off += sizes[n]
            return residual_with_target(e, kind, frame_stride, dense=True)(th, tgt, w)

        def jac(e, z, base, tgt, w):
            r, lin = jax.linearize(lambda zz: r_of_z(e, zz, base, tgt, w), z)
            cols = jax.lax.map(lin, jnp.eye(z.size, dtype=z.dtype))
            return r, cols

        return compiled(exp, r_of_z), compiled(exp, jac)

    r_fn0, jac_fn0 = exp.cached(key, build)
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

        def linearized(zz):
            r, cols = jac_fn0(jnp.asarray(zz, z.dtype), theta, target, w)  # noqa: B023
            return np.asarray(r, np.float64), np.asarray(cols, np.float64).T[:, mask]

        r, J = linearized(zf)
        cost = float(r @ r)
        lam = 1e-3
        for _ in range(steps):
            g = J.T @ r
            H = J.T @ J
            diag = np.diag(H).copy()
            diag[diag <= 0] = 1e-12
            accepted = False
            for _ in range(10):
                dz = np.linalg.solve(H + lam * np.diag(diag), -g)
                trial = zf.copy()
                trial[mask] += dz
                r_new = np.asarray(r_fn0(jnp.asarray(trial, z.dtype), theta, target, w), np.float64)
                new_cost = float(r_new @ r_new)
                if np.isfinite(new_cost) and new_cost < cost:
                    accepted = True
                    break
                lam *= 4.0
            if not accepted:
                break
            improvement = (cost - new_cost) / max(cost, 1e-300)
            zf, lam = trial, max(lam / 4.0, 1e-9)
            r, J = linearized(zf)
            cost = float(r @ r)
            th = unpack(zf)
            records.append((cost, {n: np.asarray(th[n]) for n in free}))
            if progress:
                print(f"  LM step {len(records)} (first {horizon} frames): loss {cost:.4e}")
            if improvement < tol or np.max(np.abs(dz)) < 1e-7:
                break
    if info is not None:
        info["grad_norm"] = float(np.linalg.norm(2.0 * (J.T @ r)))
        # How far the (undamped) Gauss-Newton step would still move each quantity, relative to its
        # value: near 0 at a minimum, whatever size the last accepted step had.
        gn = np.linalg.lstsq(J, -r, rcond=None)[0]
        trial = zf.copy()
        trial[mask] += gn
        here, there = unpack(zf), unpack(trial)
        info["gn_step"] = max((float(np.linalg.norm(np.asarray(there[n], np.float64) - np.asarray(here[n], np.float64))
                                     / max(float(np.linalg.norm(np.asarray(here[n], np.float64))), 1e-300))
                               for n in free), default=0.0)
    return unpack(zf), records


def identify(exp: Experiment, target: Array, initial: dict, config: FitConfig) -> SysIdResult:
    """Fit the quantities `config.free` to the target video [frames + 1, H, W, 4], starting at `initial`."""
    started = time.perf_counter()
    free = tuple(canonical(n) for n in config.free)
    check_config(config)
    theta0 = _as_theta(exp, with_camera_pose(exp, initial) if "camera_pose" in free else initial)
    inputs = fit_inputs(exp, target, theta0, config)
    target = jnp.asarray(target, theta0["push"].dtype)
    tf = transforms_for(free)
    history = {"iteration": [], "loss": [], "params": {n: [] for n in free}, "stage": []}
    theta = theta0
    adam_iterations = 0
    grad_norm = float("nan")
    resumed = None
    if config.iterations > 0:
        ramp = None if config.horizon is None else (config.horizon, config.iterations // 2)

        def loss_fn(theta, *iteration):
            theta, e, tgt = _split_data(exp, theta)
            return make_loss(e, tgt, config.loss, config.frame_stride, ramp)(theta, *iteration)

        callback = None
        if config.callback is not None:
            def callback(it, params, loss, aux):
                return config.callback(it, _split_data(exp, params)[0], loss, aux)
        schedule = optax.cosine_decay_schedule(config.learning_rate, max(config.iterations, 1), alpha=0.02)
        result = run_fit(
            loss_fn, _with_data(theta0, exp, target), free=free, transforms=tf, optimizer=optax.adam(schedule),
            steps=config.iterations, checkpoint_dir=config.checkpoint_dir, checkpoint_every=config.checkpoint_every,
            resume=config.resume, progress=config.progress, callback=callback, uses_iteration=ramp is not None,
            metadata=inputs, resume_anyway=config.resume_anyway, checks=_traced_checks(exp),
        )
        resumed = result.resume
        theta = _split_data(exp, result.params)[0]
        adam_iterations = result.iterations
        grad_norm = result.grad_norm
        history["grad_norm"] = list(result.history.get("grad_norm", []))
        history["iteration"] = list(result.history["iteration"])
        history["loss"] = list(result.history["loss"])
        for n in free:
            history["params"][n] = list(result.history["params"][n])
        history["stage"] = ["adam"] * len(history["iteration"])
        # The state after the last update, as the next entry.
        history["iteration"].append(adam_iterations)
        history["loss"].append(result.loss)
        for n in free:
            history["params"][n].append(_record(theta[n]))
        history["stage"].append("adam")
    n_scalars = sum(int(np.size(theta[n])) for n in free)
    lm_steps = 0
    last_step = None
    if config.polish > 0 and n_scalars > LM_MAX_SCALARS and config.progress:
        print(f"  (no Levenberg-Marquardt polish: {n_scalars} free scalars > {LM_MAX_SCALARS})")
    if config.polish > 0 and n_scalars <= LM_MAX_SCALARS:
        info: dict = {}
        theta, records = levenberg_marquardt(exp, target, theta, free, steps=config.polish, kind=config.loss,
                                             frame_stride=config.frame_stride, progress=config.progress, info=info)
        grad_norm = info.get("grad_norm", grad_norm)
        last_step = info.get("gn_step")
        if config.iterations == 0 and not records:
            history["loss"].append(float(jnp.sum(jnp.square(make_residual(exp, target, config.loss,
                                                                          config.frame_stride)(theta)))))
        start = history["iteration"][-1] + 1 if history["iteration"] else 0
        for k, (cost, values) in enumerate(records):
            history["iteration"].append(start + k)
            history["loss"].append(cost)  # |r|^2 = the image loss (on the LM stage's horizon)
            for n in free:
                history["params"][n].append(_record(values[n]))
            history["stage"].append("lm")
        lm_steps = len(records)
    # |r|^2 of the last LM step (over all frames) is the image loss; else the fit's own final loss.
    final_loss = history["loss"][-1] if history["loss"] else float("nan")
    report = None
    if config.report and n_scalars <= REPORT_MAX_SCALARS:

        def residual(th):
            th, e, tgt = _split_data(exp, th)
            return make_residual(e, tgt, config.loss, config.frame_stride, dense=True)(th)

        report = gauss_newton_report(residual, _with_data(theta, exp, target), free=free, transforms=tf)
    if history["loss"]:
        initial_loss = history["loss"][0]
    else:
        initial_loss = final_loss
    channels = {"rgba": slice(None), "rgb": slice(0, 3), "silhouette": slice(3, 4)}[config.loss]
    convergence = assess(initial_loss=initial_loss, final_loss=final_loss,
                         floor=noise_floor(np.asarray(target)[_frames_of(exp, config.frame_stride)], channels),
                         grad_norm=grad_norm,
                         last_step=relative_last_step(history["params"]) if last_step is None else last_step,
                         loss_kind=config.loss)
    return SysIdResult(theta={k: np.asarray(v) for k, v in theta.items()}, history=history, report=report,
                       wall_time=time.perf_counter() - started, adam_iterations=adam_iterations,
                       lm_iterations=lm_steps, loss=final_loss, convergence=convergence, inputs=inputs,
                       resume=resumed)


def _record(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else (x.copy() if x.size <= 64 else float(np.mean(x)))


# --------------------------------------------------------------------------------------------------
# Errors and outputs
# --------------------------------------------------------------------------------------------------


def relative_error(name: str, estimate, truth, free_particles=None) -> float:
    """|est - true| / |true| for scalars; for "velocity" the mean over free particles of
    |v_est - v_true| / |v_true| (gradSim's Table 3 metric)."""
    est, tru = np.asarray(estimate, np.float64), np.asarray(truth, np.float64)
    if name == "camera_pose":  # |pose_est - pose_true| / |pose_true| over the six numbers; see pose_error
        return float(np.linalg.norm(est - tru) / max(np.linalg.norm(tru), 1e-300))
    if name == "velocity":
        sel = slice(None) if free_particles is None else np.asarray(free_particles)
        num = np.linalg.norm(est[sel] - tru[sel], axis=-1)
        den = np.maximum(np.linalg.norm(tru[sel], axis=-1), 1e-12)
        return float(np.mean(num / den))
    return float(abs(est - tru) / max(abs(tru), 1e-300))


def pose_error(estimate, truth) -> dict:
    """Angle (degrees) between two camera poses (rvec, tvec) and the distance (m) between their centres."""
    est, tru = np.asarray(estimate, np.float64), np.asarray(truth, np.float64)
    r_est = np.asarray(rotation_from_rvec(jnp.asarray(est[:3])), np.float64)
    r_tru = np.asarray(rotation_from_rvec(jnp.asarray(tru[:3])), np.float64)
    cos = np.clip((np.trace(r_est @ r_tru.T) - 1.0) / 2.0, -1.0, 1.0)
    centre = np.linalg.norm(r_est.T @ est[3:] - r_tru.T @ tru[3:])
    return {"rotation_deg": float(np.degrees(np.arccos(cos))), "centre_m": float(centre)}


def _summary(value):
    value = np.asarray(value)
    return float(value) if value.ndim == 0 else value.tolist()


def _versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("gradsim-jax", "jax", "jaxlib", "optax", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def build_report(exp: Experiment, free, truth: Optional[dict], initial: dict, result: SysIdResult,
                 extra: Optional[dict] = None) -> dict:
    """The report.json dictionary: values, relative errors, iterations, wall time, identifiability, versions."""
    free = tuple(canonical(n) for n in free)
    report = {
        "experiment": exp.name,
        "free": list(free),
        "frames": exp.frames, "substeps": exp.substeps, "frame_dt": exp.frame_dt,
        "image_size": [exp.camera.height, exp.camera.width],
        "estimated": {n: _summary(result.theta[n]) for n in free},
        "initial": {n: _summary(initial[n]) for n in free},
        "units": {n: QUANTITIES[n].unit for n in free},
        "iterations": {"adam": result.adam_iterations, "levenberg_marquardt": result.lm_iterations},
        "final_loss": result.loss,
        "wall_time_s": result.wall_time,
        "versions": _versions(),
    }
    if truth is not None:
        report["true"] = {n: _summary(truth[n]) for n in free}
        report["relative_error"] = {
            n: relative_error(n, result.theta[n], truth[n], exp.free_particles) for n in free
        }
        report["initial_relative_error"] = {
            n: relative_error(n, initial[n], truth[n], exp.free_particles) for n in free
        }
    conv = result.convergence
    report["convergence"] = conv.as_dict() if conv is not None else None
    if "camera_pose" in free and truth is not None:
        report["camera_pose_error"] = pose_error(result.theta["camera_pose"], truth["camera_pose"])
    rep = result.report
    if rep is not None:
        report["identifiability"] = {
            # Curvature at a point that is not the solution says nothing about the solution.
            "valid": bool(conv is None or conv.converged),
            "condition_number": rep.condition_number if np.isfinite(rep.condition_number) else None,
            "identifiable": rep.identifiable,
            "unidentifiable_combinations": list(rep.unidentifiable),
            "labels": list(rep.labels),
            "stderr_scaled": [float(s) if np.isfinite(s) else None for s in rep.stderr],
            "stderr_physical": [float(s) if np.isfinite(s) else None for s in rep.stderr_physical],
            "eigenvalues": [float(e) for e in rep.eigenvalues],
        }
    else:
        report["identifiability"] = None
    report["inputs"] = result.inputs
    report["resume"] = result.resume
    if extra:
        report.update(extra)
    return report


def write_outputs(out_dir, exp: Experiment, *, target: np.ndarray, initial_video: np.ndarray,
                  fitted_video: np.ndarray, report: dict, result: SysIdResult, truth: Optional[dict]) -> dict:
    """Write target.gif, initial.gif, fitted.gif, comparison.mp4, loss.png, params.png, report.json, each
    atomically (a temporary file in `out_dir`, then renamed over the old one)."""
    from gradsim_jax.render.video import write_comparison, write_gif

    out = ensure_writable_folder(out_dir)
    fps = min(50.0, 1.0 / exp.frame_dt)
    paths = {
        "target": write_gif(out / "target.gif", target, fps),
        "initial": write_gif(out / "initial.gif", initial_video, fps),
        "fitted": write_gif(out / "fitted.gif", fitted_video, fps),
        "comparison": write_comparison(out / "comparison.mp4", [target, initial_video, fitted_video],
                                       ["target", "initial", "fitted"], fps=fps),
    }
    paths["loss"] = plot_loss(out / "loss.png", result.history)
    paths["params"] = plot_params(out / "params.png", result.history, truth, exp.free_particles)
    paths["report"] = write_report(out / "report.json", report)
    return {k: str(v) for k, v in paths.items()}


def ensure_writable_folder(folder) -> Path:
    """Create `folder` if needed and write and delete a probe file in it, so that a fit learns it cannot
    save its results before it starts rather than after; ValueError naming the folder otherwise."""
    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValueError(f"cannot write in {folder}: {existing} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"cannot write in {folder}: {e.strerror or e}") from None
    return folder


def write_report(path, report: dict) -> Path:
    """Write `report` as JSON to `path` atomically; return the path."""
    from gradsim_jax.render.video import _atomic_file

    text = json.dumps(report, indent=2, default=_json_default)
    with _atomic_file(path) as temporary:
        Path(temporary).write_text(text)
    return Path(path)


def _save_figure(fig, path) -> Path:
    """fig.savefig to `path` atomically (PNG)."""
    from gradsim_jax.render.video import _atomic_file

    with _atomic_file(path) as temporary:
        fig.savefig(temporary, format="png")
    return Path(path)


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def plot_loss(path, history: dict) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    it, loss = np.asarray(history["iteration"]), np.asarray(history["loss"])
    stages = np.asarray(history.get("stage", ["adam"] * len(it)))
    for stage, style in (("adam", "-"), ("lm", "o-")):
        sel = stages == stage
        if sel.any():
            ax.semilogy(it[sel], np.maximum(loss[sel], 1e-30), style, label=stage.upper() if stage == "lm" else "Adam")
    ax.set_xlabel("iteration")
    ax.set_ylabel("image loss")
    if it.size:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no iterations", ha="center", va="center", transform=ax.transAxes)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return _save_figure(fig, path)


def plot_params(path, history: dict, truth: Optional[dict], free_particles=None) -> Path:
    """Each estimated quantity vs iteration, with the true value as a dashed line (velocity: its mean
    relative error instead)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = list(history["params"])
    fig = Figure(figsize=(5 * max(1, len(names)), 3.6), dpi=100)
    FigureCanvasAgg(fig)
    it = np.asarray(history["iteration"])
    for k, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), k + 1)
        values = history["params"][name]
        q = QUANTITIES.get(name)
        if not values:
            ax.text(0.5, 0.5, "no iterations", ha="center", va="center", transform=ax.transAxes)
            ax.set_ylabel(name)
        elif name == "velocity" and truth is not None and np.ndim(values[0]) > 0:
            errs = [relative_error(name, v, truth[name], free_particles) for v in values]
            ax.semilogy(it, errs)
            ax.set_ylabel("mean relative error of velocity")
        elif np.ndim(values[0]) == 0:
            ax.plot(it, values, label="estimate")
            if truth is not None and name in truth:
                ax.axhline(float(np.asarray(truth[name])), color="k", ls="--", label="true")
            ax.set_ylabel(f"{name} [{q.unit if q else ''}]")
            ax.legend()
        else:
            ax.plot(it, [float(np.mean(v)) for v in values])
            ax.set_ylabel(f"mean {name}")
        ax.set_xlabel("iteration")
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return _save_figure(fig, path)


def summary_lines(report: dict) -> list[str]:
    """Readable lines: each estimated quantity with truth and relative error, identifiability flags."""
    lines = []
    for n in report["free"]:
        est, ini = report["estimated"][n], report["initial"][n]
        if isinstance(est, list):
            line = f"  {n:<10} ({np.size(est)} values)"
        else:
            line = f"  {n:<10} estimated {est:.6g}  (initial {ini:.6g}"
            line += f", true {report['true'][n]:.6g})" if "true" in report else ")"
        if "relative_error" in report:
            line += f"  relative error {report['relative_error'][n]:.2e}"
        lines.append(line)
    conv = report.get("convergence")
    if conv:
        ratio = conv.get("floor_ratio")
        lines.append(f"  converged: {'yes' if conv['converged'] else 'NO'} (final loss {conv['final_loss']:.3g}, "
                     f"initial {conv['initial_loss']:.3g}, noise floor {conv['noise_floor']:.3g}"
                     + (f", {ratio:.3g} x floor" if ratio is not None else "") + ")")
    if "camera_pose_error" in report:
        err = report["camera_pose_error"]
        lines.append(f"  camera pose off by {err['rotation_deg']:.3g} deg and {err['centre_m'] * 100:.3g} cm")
    ident = report.get("identifiability")
    if ident and not ident.get("valid", True):
        lines.append("  identifiability: not assessed (the fit did not converge)")
    elif ident:
        cond = ident["condition_number"]
        lines.append(f"  identifiability: cond(J^T J) = {cond:.3g}" if cond else "  identifiability: J^T J singular")
        for combo in ident["unidentifiable_combinations"]:
            lines.append(f"    NOT separable by the video: {combo}")
    return lines


# --------------------------------------------------------------------------------------------------
# One complete run: fit, videos, report, files
# --------------------------------------------------------------------------------------------------


def perturbed(theta: dict, free, *, seed: int = 0, low: float = 0.3, high: float = 0.5,
              free_particles=None) -> dict:
    """An initial guess: each free scalar scaled by 1 +- U(low, high) (random sign, seeded); velocity gets
    per-particle noise of relative size U(low, high) times the mean speed, on free particles."""
    rng = np.random.default_rng(seed)
    out = dict(theta)
    for n in free:
        value = np.asarray(theta[n], np.float64)
        if n == "velocity":
            speed = float(np.mean(np.linalg.norm(value, axis=-1))) or 1.0
            noise = rng.normal(size=value.shape)
            noise *= rng.uniform(low, high) * speed / max(float(np.sqrt(np.mean(np.sum(noise ** 2, -1)))), 1e-12)
            if free_particles is not None:
                noise[~np.asarray(free_particles)] = 0.0
            new = value + noise
        else:
            sign = rng.choice([-1.0, 1.0])
            new = value * (1.0 + sign * rng.uniform(low, high))
        out[n] = jnp.asarray(new, jnp.asarray(theta[n]).dtype)
    return out


def run(exp: Experiment, target: np.ndarray, initial: dict, config: FitConfig, out_dir, *,
        truth: Optional[dict] = None, extra: Optional[dict] = None, echo: Callable[[str], None] = print) -> dict:
    """Fit, render initial and fitted videos, write every output file; returns the report dict
    (with "outputs": {kind: path}).

    Before anything compiles: ValueError when `out_dir` cannot be written or `config` is invalid,
    CheckpointError when resuming from a missing or unreadable checkpoint or (CheckpointMismatch) from
    one made for other inputs (`fit_inputs`) without `config.resume_anyway`."""
    free = tuple(canonical(n) for n in config.free)
    ensure_writable_folder(out_dir)
    check_config(config)
    initial = _as_theta(exp, with_camera_pose(exp, initial) if "camera_pose" in free else initial)
    if config.resume and config.iterations > 0 and config.checkpoint_dir is not None:
        check_resume(checkpoint_path(config.checkpoint_dir), fit_inputs(exp, target, initial, config),
                     config.resume_anyway)
    _, initial_video = simulate_video(exp, initial)
    result = identify(exp, target, initial, config)
    _, fitted_video = simulate_video(exp, result.theta)
    report = build_report(exp, free, truth, {n: np.asarray(initial[n]) for n in free}, result, extra)
    report["outputs"] = write_outputs(out_dir, exp, target=np.asarray(target), initial_video=initial_video,
                                      fitted_video=fitted_video, report=report, result=result, truth=truth)
    write_report(report["outputs"]["report"], report)
    echo(f"fit finished in {result.wall_time:.1f} s ({result.adam_iterations} Adam iterations, "
         f"{result.lm_iterations} Levenberg-Marquardt steps), final loss {result.loss:.3e}")
    for line in summary_lines(report):
        echo(line)
    conv = result.convergence
    if conv is not None and not conv.converged:
        echo("WARNING: the fit did not converge: " + "; ".join(conv.reasons) + ".")
        for tip in conv.advice:
            echo(f"  try: {tip}")
    names = ", ".join(Path(p).name for p in report["outputs"].values())
    echo(f"outputs written to {Path(out_dir).resolve()}: {names}")
    return report


# --------------------------------------------------------------------------------------------------
# Control (gradSim's control_cloth): choose the initial velocity so the cloth lands where an image shows
# --------------------------------------------------------------------------------------------------


def silhouette_moments(video: Array) -> Array:
    """Per frame: alpha-weighted centroid (x, y in [0, 1]) and sqrt of the covered fraction: [T, 3]."""
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
    gradient when rendered and target shapes do not overlap at all."""
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


def fit_control(exp: Experiment, target_image: np.ndarray, v_guess, *, iterations: int = 60,
                learning_rate: float = 0.1, checkpoint_dir=None, checkpoint_every: int = 25, resume: bool = False,
                resume_anyway: bool = False, progress: bool = True):
    """Optimize one initial velocity [3] m/s shared by all particles so that the last rendered frames match
    `target_image` ([k, H, W, 4] for the last k frames, or [H, W, 4]). The loss is `control_loss`.
    Checkpoints record the target, the scene, the guess and the settings (`resume_anyway` as in `fit`).
    Returns (velocity [3], FitResult)."""
    tgt = jnp.asarray(target_image, exp.params.mass.dtype)
    if tgt.ndim == 3:
        tgt = tgt[None]
    base = _as_theta(exp, {})

    def loss_fn(p):
        p, e, (target, theta) = _split_data(exp, p)
        theta = dict(theta, velocity=jnp.broadcast_to(p["v"], theta["velocity"].shape))
        x = trajectory(e, theta).x[-target.shape[0]:]
        return control_loss(render_frames(e, x), target)

    config = FitConfig(free=("velocity",), iterations=iterations, learning_rate=learning_rate, loss="control")
    inputs = fit_inputs(exp, tgt, {"velocity": jnp.asarray(v_guess, tgt.dtype)}, config)
    schedule = optax.cosine_decay_schedule(learning_rate, max(iterations, 1), alpha=0.05)
    params = _with_data({"v": jnp.asarray(v_guess, tgt.dtype)}, exp, (tgt, base))
    result = run_fit(loss_fn, params, free=("v",), optimizer=optax.adam(schedule), steps=iterations,
                     checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, resume=resume,
                     progress=progress, metadata=inputs, resume_anyway=resume_anyway)
    return np.asarray(result.params["v"]), result


def final_position_error(exp: Experiment, v_est, v_true) -> dict:
    """Distances between the final positions reached with v_est and with v_true (uniform velocities [3])."""
    shape = np.shape(exp.state0.x)
    x_est, _ = simulate_video(exp, {"velocity": np.broadcast_to(v_est, shape)})
    x_true, _ = simulate_video(exp, {"velocity": np.broadcast_to(v_true, shape)})
    d = np.linalg.norm(x_est[-1] - x_true[-1], axis=-1)
    com = np.linalg.norm(x_est[-1].mean(0) - x_true[-1].mean(0))
    return {"mean_particle_error_m": float(d.mean()), "max_particle_error_m": float(d.max()),
            "center_error_m": float(com),
            "travel_m": float(np.linalg.norm(x_true[-1].mean(0) - x_true[0].mean(0)))}
