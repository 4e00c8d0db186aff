"""How a system-identification fit is set up (`FitConfig`, checked by `check_config`), what it returns
(`SysIdResult`), and what a checkpoint records of its inputs (`fit_inputs`)."""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any, Callable, Optional

import numpy as np

from gradsim_jax.fit import content_sha256
from gradsim_jax.render.blur import BLUR_MAX
from gradsim_jax.sysid.experiment import Experiment
from gradsim_jax.sysid.losses import LOSSES
from gradsim_jax.sysid.quantities import canonical
from gradsim_jax.typing import grouped_options


Array = Any

#: Levenberg-Marquardt builds one Jacobian column per free scalar (forward mode): up to this many.
LM_MAX_SCALARS = 200


#: `gauss_newton_report` differentiates in forward mode up to 64 scalars and in reverse mode (one pass per
#: pixel residual: far too slow for a video) beyond, so the report is made for at most 64.
REPORT_MAX_SCALARS = 64


#: FitConfig.blur's modes besides a number of pixels.
BLUR_MODES = ("off", "auto", "fit")


#: "auto" fits a blur when the target's edges measure at least this much blurrier (pixels) than the render's
#: at the start. A target rendered by this scene's own renderer measures up to about 0.2 px at a start 50 %
#: off (its outlines moved and turned, not blurred); SoftRas's edges against "box" coverage 0.55 px.
BLUR_AUTO = 0.35


#: The least blur a free one starts from (pixels): log space needs a start above 0.
BLUR_START = 0.25


@dataclasses.dataclass(frozen=True)
class AdamOptions:
    """The Adam iterations of a fit (`FitConfig.adam`).

    Attributes:
        iterations: Adam iterations (cosine-decayed learning rate over them, so a resumed run must ask for the
            same number).
        learning_rate: Adam's learning rate, in the fitted (transformed) space of each quantity.
        clip: {quantity: c}: that quantity's gradient is scaled down to norm c when longer; None: none.
    """

    iterations: int = 100
    learning_rate: float = 0.05
    clip: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class ObjectiveOptions:
    """What the fit minimizes (`FitConfig.objective`).

    Attributes:
        loss: the video loss, one of `sysid.losses.LOSSES`.
        smoothness: weight of the Laplacian regularizer of "shape" (m^2); 0: none.
    """

    loss: str = "rgba"
    smoothness: float = 0.0


@dataclasses.dataclass(frozen=True)
class FrameOptions:
    """Which frames the fit sees, and how a long recording is cut (`FitConfig.frames`).

    Attributes:
        stride: every `stride`-th frame is fitted.
        horizon: frames fitted first, growing to all over the first half of the iterations; None: all.
        window: frames the Adam gradient of each frame's loss reaches back (truncated backpropagation);
            None: the full horizon.
        shooting: how `window` cuts the recording: "truncated" or "multiple".
    """

    stride: int = 1
    horizon: Optional[int] = None
    window: Optional[int] = None
    shooting: str = "truncated"


@dataclasses.dataclass(frozen=True)
class StageOptions:
    """The stages around the Adam iterations (`FitConfig.stages`).

    Attributes:
        polish: Levenberg-Marquardt steps after Adam.
        rounds: at most this many rounds of Adam then the polish.
        round_iterations: Adam iterations of each later round; None: half of `AdamOptions.iterations`.
        density_first: Adam iterations of the density-field stage before a per-particle mass fit; 0: none.
        density_learning_rate: that stage's learning rate.
    """

    polish: int = 10
    rounds: int = 1
    round_iterations: Optional[int] = None
    density_first: int = 0
    density_learning_rate: float = 0.1


@dataclasses.dataclass(frozen=True)
class EdgeOptions:
    """The rendered outlines' nuisances (`FitConfig.edges`).

    Attributes:
        blur: "off", "auto", "fit" (`BLUR_MODES`) or a fixed blur in pixels of the render.
        model: "fixed" (the experiment's coverage) or "auto" (try the other edge model when the loss left lies
            on the outlines).
    """

    blur: Any = "off"
    model: str = "fixed"


@dataclasses.dataclass(frozen=True)
class CheckpointOptions:
    """Checkpoints of the Adam iterations, and what they record (`FitConfig.checkpoints`).

    Attributes:
        dir: directory of the checkpoint; None: none.
        every: iterations between checkpoints.
        resume: continue from the checkpoint in `dir`.
        resume_anyway: resume from a checkpoint made for other inputs (see `fit_inputs`).
        scene_file_sha256: content hash of the scene file the experiment was built from; None: none.
    """

    dir: Optional[str] = None
    every: int = 25
    resume: bool = False
    resume_anyway: bool = False
    scene_file_sha256: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class OutputOptions:
    """What the fit shows and reports (`FitConfig.output`).

    Attributes:
        progress: a progress bar.
        report: the diagnostics of the end (the identifiability report, where the loss left lies).
        callback: `fit`'s callback; None: none.
    """

    progress: bool = True
    report: bool = True
    callback: Optional[Callable] = None


#: `FitConfig`'s flat names: {flat name: (record, field)}; each is a keyword of the constructor and a read-only
#: attribute (`config.iterations` is `config.adam.iterations`).
FIT_SHORTHANDS = {
    "iterations": ("adam", "iterations"),
    "learning_rate": ("adam", "learning_rate"),
    "clip": ("adam", "clip"),
    "loss": ("objective", "loss"),
    "smoothness": ("objective", "smoothness"),
    "frame_stride": ("frames", "stride"),
    "horizon": ("frames", "horizon"),
    "window": ("frames", "window"),
    "shooting": ("frames", "shooting"),
    "polish": ("stages", "polish"),
    "rounds": ("stages", "rounds"),
    "round_iterations": ("stages", "round_iterations"),
    "density_first": ("stages", "density_first"),
    "density_learning_rate": ("stages", "density_learning_rate"),
    "blur": ("edges", "blur"),
    "edge_model": ("edges", "model"),
    "checkpoint_dir": ("checkpoints", "dir"),
    "checkpoint_every": ("checkpoints", "every"),
    "resume": ("checkpoints", "resume"),
    "resume_anyway": ("checkpoints", "resume_anyway"),
    "scene_file_sha256": ("checkpoints", "scene_file_sha256"),
    "progress": ("output", "progress"),
    "report": ("output", "report"),
    "callback": ("output", "callback"),
}


@dataclasses.dataclass(frozen=True, init=False)
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
    loss reaches back at most `window` frames (to the start of its window, `gradsim_jax.sysid.windows.windowed`), while
    the loss value stays the full recording's; the Levenberg-Marquardt polish then uses the same truncated
    Jacobian (`polish_truncated`). Choose it from `gradsim-jax horizon` (`window_length_for`); None: the full
    horizon. Not with `horizon` or `smoothness`.
    shooting: how `window` cuts the recording: "truncated" (above) or "multiple" (multiple shooting,
    `sysid.windows.windowed.fit_windowed`: each window from its own start state, read off the video and fitted with
    the quantities, joined by a tightening penalty; no polish after it).
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
    edges that no blur of exact coverage makes.

    The settings come in frozen records (`adam`, `objective`, `frames`, `stages`, `edges`, `checkpoints`,
    `output`), or by their flat names (`FIT_SHORTHANDS`): `FitConfig(free=("mass",), iterations=50)` is
    `FitConfig(free=("mass",), adam=AdamOptions(iterations=50))`. A flat name given with its record replaces
    that field of it, so `dataclasses.replace(config, iterations=10)` changes one setting. Every flat name is
    also a read-only attribute (`config.iterations`). A FitConfig is never changed after it is made.

    Args:
        free: the quantities to fit (`sysid.quantities`).
        adam: `AdamOptions` (None: its defaults).
        objective: `ObjectiveOptions` (None: its defaults).
        frames: `FrameOptions` (None: its defaults).
        stages: `StageOptions` (None: its defaults).
        edges: `EdgeOptions` (None: its defaults).
        checkpoints: `CheckpointOptions` (None: its defaults).
        output: `OutputOptions` (None: its defaults).
        **flat: the records' fields by flat name (`FIT_SHORTHANDS`); TypeError for another name."""

    free: tuple[str, ...]
    adam: AdamOptions
    objective: ObjectiveOptions
    frames: FrameOptions
    stages: StageOptions
    edges: EdgeOptions
    checkpoints: CheckpointOptions
    output: OutputOptions

    def __init__(self, free: tuple[str, ...], *, adam: Optional[AdamOptions] = None,
                 objective: Optional[ObjectiveOptions] = None, frames: Optional[FrameOptions] = None,
                 stages: Optional[StageOptions] = None, edges: Optional[EdgeOptions] = None,
                 checkpoints: Optional[CheckpointOptions] = None, output: Optional[OutputOptions] = None, **flat):
        records = grouped_options("FitConfig", {
            "adam": (AdamOptions(), adam), "objective": (ObjectiveOptions(), objective),
            "frames": (FrameOptions(), frames), "stages": (StageOptions(), stages), "edges": (EdgeOptions(), edges),
            "checkpoints": (CheckpointOptions(), checkpoints), "output": (OutputOptions(), output),
        }, flat, FIT_SHORTHANDS, override=True)
        object.__setattr__(self, "free", free)
        for name, record in records.items():
            object.__setattr__(self, name, record)


for _flat, (_record, _field) in FIT_SHORTHANDS.items():  # the flat names, read-only
    setattr(FitConfig, _flat, property(operator.attrgetter(f"{_record}.{_field}"),
                                       doc=f"`{_record}.{_field}` (read-only)."))


@dataclasses.dataclass(frozen=True)
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
    """ValueError naming the setting when a FitConfig cannot describe a fit (before anything compiles).

    Args:
        config: the fit's settings.
    """
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
    if config.shooting not in ("truncated", "multiple"):
        raise ValueError(f"shooting must be truncated or multiple, got {config.shooting!r}")
    if config.shooting == "multiple" and config.window is None:
        raise ValueError("shooting multiple needs a window (its length in frames)")
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
    that shape the Adam iterations.

    Args:
        exp: the experiment fitted.
        target: [frames + 1, H, W, 4] the target video as fitted (RGBA).
        initial: {quantity: value}, the initial guess (physical units).
        config: the fit's settings.

    Returns:
        {name: hash or setting}, JSON-serializable.
    """
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
        if config.shooting != "truncated":
            inputs["shooting"] = config.shooting
    if config.clip:
        inputs["clip"] = {canonical(k): float(v) for k, v in sorted(config.clip.items())}
    if config.density_first:
        inputs["density_first"] = [int(config.density_first), float(config.density_learning_rate)]
    return inputs
