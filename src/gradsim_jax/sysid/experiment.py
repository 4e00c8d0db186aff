"""What a recording is: the `Experiment` (scene, camera, render settings, time grid, known inputs), the
motion and video it produces for a theta, and how its arrays enter compiled functions.

An `Experiment` is everything about a recording except the unknowns: the scene's structure and its known
parameters, the camera, colors, lights and render settings, the time grid (frames, substeps, frame_dt),
and known inputs. It is a frozen value holding no compiled function; change it with
`dataclasses.replace`. Compiled functions take its arrays as arguments (`compiled`), so that index
arrays and per-element values are data of the program, never constants folded into it, and are kept in
one process-wide cache keyed on its static structure, so that a second fit does not trace again.
"""

from __future__ import annotations

import collections
import copy
import functools
import dataclasses
from typing import Any, Callable, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import jit
from gradsim_jax.typing import FrozenMap
from gradsim_jax.physics import Params, SemiImplicitEuler, State, Topology, simulate
from gradsim_jax.physics.checks import validate_traced
from gradsim_jax.physics.components import COMPONENTS
from gradsim_jax.physics.rollout import leading_push, path_velocities
from gradsim_jax.render import Camera, Lights, RenderSettings, SmokeLook, composite, render
from gradsim_jax.render.coverage_models import coverage_model
from gradsim_jax.render.overlays import overlay_data, present_overlays, scene_looks
from gradsim_jax.render.mesh import trajectory_vertices
from gradsim_jax.render.blur import gaussian_blur
from gradsim_jax.render.shadows import shadow_coverage, shadowed_background
from gradsim_jax.sysid.quantities import (appearance_for, assemble, blur_for, camera_for, canonical_theta, check_masses,
                                          derived_values, shadow_for)

Array = Any


@dataclasses.dataclass(frozen=True, eq=False)
class Experiment:
    """A recording setup: scene, camera, time grid and known inputs; theta holds the physical quantities.

    topology, params, state0: the built scene (`Scene.build`); params/state0 give every value theta does not.
    faces: [F, 3] triangles rendered (usually topology.triangles). colors: FaceColors/VertexColors/None.
    theta: default values of the quantities (the truth for a synthetic demo, the initial guess otherwise);
      it always holds "push" ([n, 3] N, zeros for none).
    push_frames: number of leading frames during which theta["push"] acts.
    integrator: the time integrator of the rollout (static; `SemiImplicitEuler()`: the contact's damping and
      friction taken backward; `SemiImplicitEuler(implicit_contact=False)`: Warp's explicit contact).
    looks: {kind name: how the recording films that kind} for the kinds composited over the meshes
      (`render.overlays.OVERLAYS`; static, hashable), e.g. {"smoke": render.SmokeLook(...)}: the smoke as a slab in
      front of the meshes; a present kind without one gets its overlay's default look (the smoke's: the slab's
      corner at the origin).
    kind_options: {keyword: value}, the body kinds' own keywords of `physics.simulate` (static, hashable), e.g.
      {"smoke_substeps": 2}: the smoke's solver steps a frame; absent: simulate's default.
    pin_path: how the pinned particles move, all alike (a hand, a hook; static): (key times [K] s, offsets [K]
      of (x, y, z) m from where they start), linear between keys and at rest outside them; None: they stay.
    The old keywords `smoke_look=` (looks["smoke"]) and `smoke_substeps=` (kind_options["smoke_substeps"], a
    whole number >= 1) are still taken, and read back as the properties of those names.
    Derived on construction: free_particles ([n] bool, host), mass_ref (kg, the mean mass of the free
    particles: "mass" scales every mass by mass / mass_ref), area_ratio (tri_ka / tri_ke per triangle).
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
    integrator: Any = SemiImplicitEuler()
    looks: Mapping[str, Any] = FrozenMap()
    kind_options: Mapping[str, Any] = FrozenMap()
    pin_path: Optional[tuple] = None

    def __post_init__(self):
        derived = derived_values(self.topology, self.params, self.dtype)
        if not any(kind.moves(self.topology, self.params, self.state0) for kind in COMPONENTS):
            raise ValueError("the experiment has no free particle, rigid body, ODE body or smoke: nothing moves")
        object.__setattr__(self, "looks", FrozenMap(scene_looks(self.topology, self.looks)))
        object.__setattr__(self, "kind_options", FrozenMap(self.kind_options))
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        check_masses(self)

    @property
    def dtype(self):
        """The scene's float dtype (that of the initial particle positions)."""
        return jnp.result_type(self.state0.particles.x)

    @property
    def smoke_look(self) -> Optional[SmokeLook]:
        """The smoke's look, `looks["smoke"]` (None: the experiment films no smoke)."""
        return self.looks.get("smoke")

    @property
    def smoke_substeps(self) -> int:
        """The smoke's solver steps a frame, `kind_options["smoke_substeps"]` (1 when not given)."""
        return self.kind_options.get("smoke_substeps", 1)


def _taking_old_keywords(init):
    """The dataclass's __init__, also taking the old keywords smoke_look= and smoke_substeps= (class docstring)."""

    @functools.wraps(init)
    def __init__(self, *args, smoke_look=None, smoke_substeps=None, **kwargs):
        if smoke_look is not None:
            kwargs["looks"] = {**dict(kwargs.get("looks") or {}), "smoke": smoke_look}
        if smoke_substeps is not None:
            if not (isinstance(smoke_substeps, (int, np.integer)) and smoke_substeps >= 1):
                raise ValueError(f"Experiment.smoke_substeps must be a whole number >= 1, got {smoke_substeps!r}")
            kwargs["kind_options"] = {**dict(kwargs.get("kind_options") or {}), "smoke_substeps": smoke_substeps}
        init(self, *args, **kwargs)

    return __init__


Experiment.__init__ = _taking_old_keywords(Experiment.__init__)


#: The Experiment attributes that hold arrays. Compiled functions take them as arguments (`compiled`,
#: `_DATA`), so that index arrays and per-element values are data of the program, never constants captured
#: by a closure and folded into it (a 2000 x 2000 grid spent minutes and gigabytes in XLA's constant folding).
ARRAY_FIELDS = ("topology", "params", "state0", "area_ratio", "camera", "faces", "colors", "lights", "background",
                "theta")
#: The Experiment attributes a compiled function may read besides its arrays: hashable values, the key of
#: the compiled-function cache with the arrays' shapes (which `jax.jit` keys on itself).
STATIC_FIELDS = ("settings", "frames", "substeps", "frame_dt", "push_frames", "mass_ref", "integrator", "looks",
                 "kind_options", "pin_path")


def experiment_arrays(exp: Experiment) -> dict:
    """The experiment's arrays: a pytree {attribute: value}.

    Args:
        exp: the experiment whose `ARRAY_FIELDS` are read.

    Returns:
        dict {attribute name: value} of the `ARRAY_FIELDS` (trees of arrays, None where the experiment has none).
    """
    return {name: getattr(exp, name) for name in ARRAY_FIELDS}


def static_structure(exp: Experiment) -> tuple:
    """The experiment's static values ((name, value) for `STATIC_FIELDS`): hashable.

    Args:
        exp: the experiment whose `STATIC_FIELDS` are read.

    Returns:
        tuple of (attribute name, value) pairs, in the order of `STATIC_FIELDS`.
    """
    return tuple((name, getattr(exp, name)) for name in STATIC_FIELDS)


def with_arrays(exp: Experiment, arrays: dict) -> Experiment:
    """A shallow copy of `exp` holding `arrays` instead of its own (inside a compiled function: tracers).

    Args:
        exp: the experiment to copy (not changed).
        arrays: {attribute: value} for some or all of `ARRAY_FIELDS` (as `experiment_arrays` gives them).

    Returns:
        the copy, an Experiment (no `__post_init__` runs on it).
    """
    out = copy.copy(exp)
    out.__dict__.update(arrays)  # bypasses the frozen __setattr__; no __post_init__ on tracers
    return out


def _traced_experiment(static: tuple, arrays: dict) -> Experiment:
    """An Experiment holding only the static values and the (traced) arrays: anything else a compiled
    function might read (the name, the host-side masks) is missing, not a stale value of another one."""
    out = object.__new__(Experiment)
    out.__dict__.update(dict(static), **arrays)
    return out


#: Compiled functions by (key, static structure), most recently used last; `jax.jit` keeps one executable
#: per shape of the arguments inside each.
_COMPILED: collections.OrderedDict = collections.OrderedDict()
_COMPILED_MAX = 64


def compiled(exp: Experiment, fn: Callable, key) -> Callable:
    """`jax.jit` of `fn(exp, *args)` that takes the experiment's arrays as arguments; call it with `*args`.

    One jitted function per (key, `static_structure(exp)`) is kept for the process, so that calling again,
    on this experiment or another of the same structure, does not trace again. `fn` must read the
    experiment only through its argument.

    Args:
        exp: the experiment whose arrays the returned function passes (and whose static structure keys the cache).
        fn: `fn(experiment, *args)`, the function to compile.
        key: hashable, naming `fn` and every value its closure holds (a loss kind, a frame stride, shapes).

    Returns:
        a function `(*args) -> fn(exp, *args)` that runs the compiled program.
    """
    static = static_structure(exp)
    cache_key = (key, static)
    jitted = _COMPILED.get(cache_key)
    if jitted is None:
        jitted = jit(lambda arrays, *args: fn(_traced_experiment(static, arrays), *args))
        _COMPILED[cache_key] = jitted
        while len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    else:
        _COMPILED.move_to_end(cache_key)
    return lambda *args: jitted(experiment_arrays(exp), *args)


#: theta entry that carries {"experiment": arrays, "target": video} into `fit`'s compiled step as a fixed
#: parameter (an argument, not a constant); `with_data` adds it, `split_data` takes it out again.
_DATA = "_data"


def with_data(theta: dict, exp: Experiment, target) -> dict:
    """theta with the data entry added: the experiment's arrays and the target, carried into `fit`'s compiled step as
    a fixed parameter (an argument, not a constant); `split_data` takes it out again.

    Args:
        theta: {quantity name: value}, the quantities.
        exp: the experiment whose arrays (`experiment_arrays`) are carried.
        target: the recorded data the loss compares with (a video [T, H, W, 4] for the video losses).

    Returns:
        a new dict: theta plus the data entry {"experiment": arrays, "target": target}.
    """
    return {**theta, _DATA: {"experiment": experiment_arrays(exp), "target": target}}


def split_data(exp: Experiment, theta: dict):
    """(theta without the data entry, the experiment holding its arrays, the target).

    Args:
        exp: the experiment the data's arrays belong to (its static values are kept).
        theta: a theta that `with_data` made (inside a compiled step: tracers).

    Returns:
        (theta without the data entry, `with_arrays(exp, arrays)`, the target).
    """
    theta = dict(theta)
    data = theta.pop(_DATA)
    return theta, with_arrays(exp, data["experiment"]), data["target"]


def as_theta(exp: Experiment, theta: dict) -> dict:
    """Fill missing entries from the experiment's defaults; arrays in the scene's dtype.

    Args:
        exp: the experiment whose `theta` gives the defaults and whose dtype the values take.
        theta: {quantity name or alias: value}; names are made canonical (`canonical_theta`).

    Returns:
        dict {canonical name: array in the scene's dtype}: the experiment's theta updated by `theta`.
    """
    dtype = exp.dtype
    out = dict(exp.theta)
    out.update(canonical_theta(theta))
    return {k: jnp.asarray(v, dtype) for k, v in out.items()}


def trajectory(exp: Experiment, theta: dict) -> State:
    """Simulated states (leaves [frames + 1, ...]) for theta (plain function; jit at the call site).

    Args:
        exp: the experiment (scene, time grid, known inputs).
        theta: {canonical quantity name: value}, the quantities (missing ones: the scene's own values).

    Returns:
        State whose leaves are stacked over the frames [frames + 1, ...], the initial state first.
    """
    return rollout(exp, theta)[1]


def vertices(exp: Experiment, theta: dict) -> Array:
    """Render vertices [frames + 1, V, 3] of the motion for theta: particles, then bodies' hull vertices
    placed by their poses (`render.mesh`); plain function.

    Args:
        exp: the experiment (scene, time grid, known inputs).
        theta: {canonical quantity name: value}, the quantities.

    Returns:
        [frames + 1, V, 3] m, the render vertices of every frame.
    """
    return motion(exp, theta)[0]


def motion(exp: Experiment, theta: dict) -> tuple[Array, Any]:
    """What the camera films of the motion for theta; plain function.

    Args:
        exp: the experiment (scene, time grid, known inputs).
        theta: {canonical quantity name: value}, the quantities.

    Returns:
        (render vertices [frames + 1, V, 3] m (`vertices`), what is composited over them: None for a scene without
        an overlay kind (`render.overlays`), that kind's filmed data for a scene with one (the smoke's density
        [frames + 1, ny, nx]), {kind name: data} for a scene with several).
    """
    x, overlays = filmed_motion(exp, theta)
    if not overlays:
        return x, None
    return x, next(iter(overlays.values())) if len(overlays) == 1 else overlays


def filmed_motion(exp: Experiment, theta: dict) -> tuple[Array, dict]:
    """What the camera films of the motion for theta, every overlay kind's data by name; plain function.

    Args:
        exp: the experiment (scene, time grid, known inputs).
        theta: {canonical quantity name: value}, the quantities.

    Returns:
        (render vertices [frames + 1, V, 3] m (`vertices`), {kind name: its filmed data [frames + 1, ...]} of the
        overlay kinds the scene has (`render.overlays.Overlay.filmed`; empty: none)).
    """
    params, traj = rollout(exp, theta)
    overlays = {o.name: o.filmed(exp.topology, traj) for o in present_overlays(exp.topology)}
    return trajectory_vertices(exp.topology, params, traj), overlays


def rollout(exp: Experiment, theta: dict) -> tuple[Params, State]:
    """(Params for theta, simulated states [frames + 1, ...]); plain function.

    A theta without "push" keeps the scene's own known push (leaving it out does not switch it off).

    Args:
        exp: the experiment (scene, time grid, integrator, known inputs).
        theta: {canonical quantity name: value}, the quantities; "push" ([n, 3] N) acts during the first
            `exp.push_frames` frames.

    Returns:
        (Params assembled from theta, State with leaves [frames + 1, ...]).
    """
    params, state0 = assemble(exp, theta)
    # A theta without "push" keeps the scene's own known push (leaving it out must not switch it off).
    push = theta["push"] if "push" in theta else exp.theta.get("push")
    push = None if push is None else jnp.asarray(push, exp.dtype)

    return params, simulate(exp.topology, params, state0, frames=exp.frames, substeps=exp.substeps,
                            frame_dt=exp.frame_dt,
                            control=leading_push(push, exp.push_frames, None if exp.pin_path is None else path_velocities(
                                *exp.pin_path, exp.frames, exp.frame_dt, exp.topology.particles.pinned, exp.dtype)),
                            integrator=exp.integrator, **exp.kind_options)


def render_frames(exp: Experiment, x: Array, dense: bool = False, camera: Optional[Camera] = None,
                  blur=None, overlays=None, *, colors=None, lights=None, shadow=None) -> Array:
    """RGBA video [T, H, W, 4] of render vertices x [T, V, 3] (`vertices`), colours blended over the background by
    the coverage (the renderer's own with `coverage="box"`, else `composite`'s). A frame whose vertices are not all
    finite (a simulation that blew up) is NaN (the renderer's own rule), so a loss of it is NaN too.

    Args:
        exp: the experiment (faces, colours, lights, background, render settings, looks).
        x: [T, V, 3] m, render vertices of each frame.
        dense: forward-mode differentiable, for Jacobians (the same tiled renderer with its per-pixel kernel
            differentiated by JAX, `render(autodiff=True)`: the same image; its JVP is 3.6 times quicker than that
            of `render_dense`, the every-pixel-against-every-face reference that it used to call, on the pendulum
            demo).
        camera: the camera filming; None: the experiment's.
        blur: a Gaussian point spread of that many pixels over each frame (`render.blur`); None: none.
        overlays: what is composited in front of the meshes at those frames, as `motion` gives it: None, the data
            [T, ...] of the experiment's one overlay kind (the smoke's density [T, ny, nx]), or {kind name: data};
            each filmed as `exp.looks` says (`render.overlays.Overlay.over`); required exactly for the overlay kinds
            the experiment has.
        colors: the colours record to render with (`render.FaceColors`, `VertexColors`, ...); None: the
            experiment's.
        lights: the `render.Lights`; None: the experiment's.
        shadow: (strength in [0, 1], softness in pixels or None, direction towards the light [3]): the meshes'
            shadow on the ground plane (`render.shadows`), or None for none.

    Returns:
        [T, H, W, 4] RGBA video: colours (as the experiment's colours and background give them) and coverage.
    """
    renderer = functools.partial(render, autodiff=dense)
    camera = exp.camera if camera is None else camera
    colors = exp.colors if colors is None else colors
    lights = exp.lights if lights is None else lights
    kinds = present_overlays(exp.topology)
    overlays = overlay_data(kinds, overlays)
    faces = np.shape(exp.faces)[0]

    @jax.checkpoint
    def one(frame):
        vertices, data = frame
        background = exp.background
        if faces and shadow is not None:  # the mesh's shadow on the ground darkens the picture behind it
            strength, softness, towards = shadow
            world = exp.params.world
            cover = shadow_coverage(camera, vertices, exp.faces, towards, world.ground_normal, world.ground_height,
                                    exp.settings, softness, autodiff=dense)
            background = shadowed_background(background, cover, strength)
        if faces:
            image = renderer(camera, vertices, exp.faces, colors, lights=lights,
                             background=background, settings=exp.settings)
            if not coverage_model(exp.settings.coverage).blends_background:
                image = composite(image, background)  # edges as a camera sees them (see `composite`)
        else:  # nothing but overlays (smoke): the background, uncovered
            bg = jnp.broadcast_to(jnp.asarray(exp.background, x.dtype), (camera.height, camera.width, 3))
            image = jnp.concatenate([bg, jnp.zeros(bg.shape[:2] + (1,), bg.dtype)], axis=-1)
        for kind in kinds:
            image = kind.over(camera, exp.topology, data[kind.name], image, exp.looks[kind.name])
        return image if blur is None else gaussian_blur(image, blur)

    return jax.lax.map(one, (x, overlays))


def frames_for(exp: Experiment, x: Array, theta: dict, dense: bool = False, overlays=None) -> Array:
    """`render_frames` of render vertices x [T, V, 3] (and the overlay kinds' data, e.g. the smoke's density
    [T, ny, nx], for a scene with them) with theta's camera pose and blur, when it has them.

    Args:
        exp: the experiment.
        x: [T, V, 3] m, render vertices of each frame.
        theta: {canonical quantity name: value}; its "camera_pose", "blur" (pixels) and appearance ("albedo",
            "ambient", "directional", "light_direction"), when present, are applied.
        dense: forward-mode differentiable rendering (see `render_frames`).
        overlays: what is composited over the meshes at those frames (`render_frames`): None for a scene without an
            overlay kind, else {kind name: data [T, ...]} (`filmed_motion`) or the one kind's data (`motion`).

    Returns:
        [T, H, W, 4] RGBA video.
    """
    colors, lights = appearance_for(exp, theta)
    return render_frames(exp, x, dense, camera_for(exp, theta), blur_for(theta), overlays, colors=colors,
                         lights=lights, shadow=shadow_for(exp, theta))


def frames_at(exp: Experiment, theta: dict, idx, dense: bool = False) -> Array:
    """The rendered frames idx [k] of theta's motion (meshes and overlays) [k, H, W, 4]; plain function.

    Args:
        exp: the experiment.
        theta: {canonical quantity name: value}, the quantities.
        idx: [k] int, the frame indices (0: the initial state).
        dense: forward-mode differentiable rendering (see `render_frames`).

    Returns:
        [k, H, W, 4] RGBA frames.
    """
    x, overlays = filmed_motion(exp, theta)
    return frames_for(exp, x[idx], theta, dense, {name: data[idx] for name, data in overlays.items()})


def video(exp: Experiment, theta: dict, dense: bool = False) -> Array:
    """Rendered video [frames + 1, H, W, 4] of the experiment with quantities theta.

    Args:
        exp: the experiment.
        theta: {canonical quantity name: value}, the quantities.
        dense: forward-mode differentiable rendering (see `render_frames`).

    Returns:
        [frames + 1, H, W, 4] RGBA video.
    """
    return positions_and_video(exp, theta, dense)[1]


def positions_and_video(exp: Experiment, theta: dict, dense: bool = False):
    """(render vertices [frames + 1, V, 3] m, RGBA video [frames + 1, H, W, 4]) of theta's motion; plain function.

    Args:
        exp: the experiment.
        theta: {canonical quantity name: value}, the quantities.
        dense: forward-mode differentiable rendering (see `render_frames`).

    Returns:
        (vertices, video).
    """
    x, overlays = filmed_motion(exp, theta)
    return x, frames_for(exp, x, theta, dense, overlays)


def traced_checks(exp: Experiment):
    """`checks` for `fit`: the scene assembled from a (data-carrying) theta, checked inside the compiled
    step, so that a value that turns bad while fitting (a NaN stiffness, a negative mass) stops the fit
    with its field and index.

    Args:
        exp: the experiment whose static values the checked scene keeps.

    Returns:
        `checks(theta)`, theta as `with_data` makes it, returning a `checkify.Error` (`validate_traced`).
    """

    def checks(theta):
        theta, e, _ = split_data(exp, theta)
        params, state0 = assemble(e, theta)
        return validate_traced(e.topology, params, state0)

    return checks
