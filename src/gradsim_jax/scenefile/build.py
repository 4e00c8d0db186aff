"""The builder of a parsed scene file: the section readers' pieces combined and built into device trees
(`Scene.build`: Topology, Params, State), the [material] quantities set, the checks of [fit] free
against the built scene, and the `Experiment` (time grid, camera, colours, render settings)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry.scene import combine, particles
from gradsim_jax.physics import ImplicitEuler, ImpulseContact, SemiImplicitEuler, get_path
from gradsim_jax.sysid import QUANTITIES, Experiment, default_theta
from gradsim_jax.scenefile.bodies import add_body_pushes, read_bodies, read_soft_bodies
from gradsim_jax.scenefile.cloth import read_cloth
from gradsim_jax.scenefile.colliders import read_colliders
from gradsim_jax.scenefile.extensions import body_branches
from gradsim_jax.scenefile.ode import read_ode_body
from gradsim_jax.scenefile.quantities import material_quantities
from gradsim_jax.scenefile.render import read_look, read_render
from gradsim_jax.scenefile.schema import RIGID_CONTACTS, SceneFileError
from gradsim_jax.scenefile.smoke import read_smoke
from gradsim_jax.scenefile.wind import add_wind
from gradsim_jax.scenefile.world import read_material, read_scene


@dataclasses.dataclass(frozen=True)
class SimulationOptions:
    """[simulation] read (checked by `finish`, against the target's frame count).

    Attributes:
        fps: frames per second of the video, 1/s.
        substeps: integration steps per frame.
        frames: frames to simulate after the initial state, or None for the target's count minus one.
        contact: "implicit" or "explicit" integration of the penalty contact's damping and friction, or "impulse"
            (Blender's collision response, `physics.ImpulseContact`).
        integrator: "semi_implicit" (`SemiImplicitEuler`) or "implicit" (`ImplicitEuler`, backward Euler).
        cg_iterations: conjugate-gradient iterations of each implicit step (at most, with a tolerance).
        cg_tolerance: the relative residual each implicit step's conjugate gradients stop at (0: none).
    """

    fps: float
    substeps: int
    frames: Optional[int]
    contact: str
    integrator: str = "semi_implicit"
    cg_iterations: int = 40
    cg_tolerance: float = 0.0


def read_simulation(spec) -> SimulationOptions:
    """[simulation] as `SimulationOptions` (the one reader of the section).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `SimulationOptions`.
    """
    sim = spec.sections.simulation
    return SimulationOptions(fps=sim.fps, substeps=sim.substeps, frames=sim.frames, contact=sim.contact,
                             integrator=sim.integrator, cg_iterations=sim.cg_iterations,
                             cg_tolerance=sim.cg_tolerance)


INTEGRATORS = ("semi_implicit", "implicit")


def integrator_of(spec, sim: SimulationOptions):
    """The `Integrator` [simulation] names, checked.

    Args:
        spec: the validated scene file (`SceneSpec`), for its path in messages.
        sim: its [simulation] (`read_simulation`).

    Returns:
        `SemiImplicitEuler` or `ImplicitEuler`, with the contact's integration as [simulation] contact says.

    Raises:
        SceneFileError: naming the key, for an unknown integrator or contact, or cg_iterations below 1.
    """
    if sim.contact not in ("implicit", "explicit", "impulse"):
        raise SceneFileError(f'{spec.path}: [simulation] contact must be "implicit", "explicit" or "impulse", got '
                             f'{sim.contact!r}')
    if sim.contact == "impulse" and sim.integrator != "implicit":
        raise SceneFileError(f'{spec.path}: [simulation] contact = "impulse" is the response of Blender\'s implicit '
                             'step: set integrator = "implicit"')
    if sim.integrator not in INTEGRATORS:
        raise SceneFileError(f"{spec.path}: [simulation] integrator must be one of {', '.join(INTEGRATORS)}, got "
                             f"{sim.integrator!r}")
    if sim.integrator == "semi_implicit":
        return SemiImplicitEuler(implicit_contact=sim.contact == "implicit")
    if sim.contact == "explicit":
        raise SceneFileError(f'{spec.path}: [simulation] integrator = "implicit" takes the contact implicitly; '
                             'remove contact = "explicit"')
    if sim.cg_iterations < 1:
        raise SceneFileError(f"{spec.path}: [simulation] cg_iterations must be at least 1, got {sim.cg_iterations}")
    if not 0.0 <= sim.cg_tolerance < 1.0:
        raise SceneFileError(f"{spec.path}: [simulation] cg_tolerance must be in [0, 1), got {sim.cg_tolerance}")
    contact = None
    if sim.contact == "impulse":
        contact = ImpulseContact(frame_time=1.0 / sim.fps, ground_size=read_scene(spec).ground.ground_size)
    return ImplicitEuler(iterations=sim.cg_iterations, tolerance=float(sim.cg_tolerance), contact=contact)


@dataclasses.dataclass(frozen=True)
class PushOptions:
    """[push] read (checked against the built scene by `build_experiment` and `finish`).

    Attributes:
        force: [3] known force on each pushed particle, N.
        particles: indices of the pushed particles (empty: no push).
        frames: number of leading frames the push lasts.
    """

    force: list
    particles: list
    frames: int


def read_push(spec) -> PushOptions:
    """[push] as `PushOptions` (the one reader of the section).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `PushOptions`.
    """
    push = spec.sections.push
    return PushOptions(force=push.force, particles=push.particles, frames=push.frames)


def build_experiment(spec, frames: Optional[int] = None, *, native_size=None, background_image=None) -> Experiment:
    """Build the Experiment; `frames` (from the target) is used unless [simulation] frames is set.

    Args:
        spec: the validated scene file (`SceneSpec`).
        frames: number of simulated frames after the initial state (the target's count minus one), or None
            when [simulation] frames must give it.
        native_size: (height, width) pixels of the target's frames (what the intrinsics refer to by default),
            or None.
        background_image: [H, W, 3] float RGB in [0, 1], picture behind the scene at the render size
            (`background_image()`), or None for [render] background.

    Returns:
        The `Experiment`: built Topology, Params and initial State, theta, time grid, camera and look.

    Raises:
        SceneFileError: naming the file and the key, for a scene that cannot be built.
    """
    path = spec.path
    options, mat = read_scene(spec), read_material(spec)
    layout, sc = options.cloth, options.ground
    bodies, soft_bodies = read_bodies(spec), read_soft_bodies(spec)
    cloth = layout.grid is not None or layout.mesh is not None
    if layout.grid is not None and layout.mesh is not None:
        raise SceneFileError(f"{path}: [scene] needs exactly one of 'grid' or 'mesh'")
    ode, smoke = read_ode_body(spec), read_smoke(spec)
    if not cloth and bodies is None and not soft_bodies and ode.piece is None and smoke is None and not spec.extras:
        raise SceneFileError(f"{path}: [scene] needs exactly one of 'grid' or 'mesh' (a cloth), or the file "
                             "[[body]] tables (rigid bodies), [[soft_body]] tables, a [pendulum], [[ball]] tables or "
                             "a [smoke] table")
    if sc.rigid_contact is not None and sc.rigid_contact not in RIGID_CONTACTS:
        raise SceneFileError(f"{path}: [scene] rigid_contact must be one of {', '.join(RIGID_CONTACTS)}, got "
                             f"{sc.rigid_contact!r}")
    ground = sc.ground if sc.ground is not None else bodies is not None
    if bodies is not None and sc.rigid_contact is not None and (sc.rigid_contact != "none") != ground:
        raise SceneFileError(
            f"{path}: [scene] rigid_contact = {sc.rigid_contact!r} contradicts ground = "
            f"{str(ground).lower()}{'' if sc.ground is not None else ' (the default with [[body]] tables)'}: "
            "one ground governs every component; set ground = true with \"penalty\" or \"impulse\", or "
            "ground = false with \"none\"")
    pieces = ([read_cloth(spec)] if cloth else []) + soft_bodies
    pieces += [bodies.scene] if bodies is not None else []
    colliders = read_colliders(spec)
    pieces += colliders.pieces
    pieces += [p for p in (ode.piece, smoke and smoke.piece) if p is not None]
    scene = combine(*pieces) if pieces else particles(np.zeros((0, 3)))  # none: registered kinds only
    # particles: the cloth's, then each soft body's; bodies; colliders; ODE body; smoke
    scene = add_body_pushes(spec, scene)
    n = scene.num_particles
    try:
        topology, params, state0 = scene.build(
            gravity=tuple(mat.gravity), ground=ground, ground_height=sc.ground_height,
            ground_normal=sc.ground_normal,
            particle_radius=sc.particle_radius, contact_smoothing=sc.contact_smoothing,
            contact_mu=mat.contact_mu, contact_ke=mat.contact_ke, contact_kd=mat.contact_kd,
            contact_kf=mat.contact_kf, aerodynamics=True if mat.aerodynamics else None,
            membrane=mat.membrane, bending=mat.bending,
            rigid_contact=sc.rigid_contact, body_contact=sc.body_contact,
            particle_body_contact=sc.particle_body_contact)
    except ValueError as e:
        raise SceneFileError(f"{path}: [material]/[scene]: {e}") from e
    topology, params, state0 = with_body_branches(spec, topology, params, state0)
    topology, params = add_wind(spec, topology, params)
    params, state0 = material_quantities(spec, topology, params, state0)
    theta = default_theta(topology, params, state0)
    check_free(spec, topology, params)
    push = read_push(spec)
    if push.particles:
        idx = np.asarray(push.particles, int)
        if idx.min() < 0 or idx.max() >= n:
            raise SceneFileError(f"{path}: [push] particles index out of range [0, {n})")
        force = np.zeros((n, 3), np.float32)
        force[idx] = push.force
        theta["push"] = jnp.asarray(force)
    return finish(spec, topology, params, state0, theta, frames, native_size, background_image,
                  bodies.colors if bodies is not None else (), colliders.colors, ode, smoke)


def with_body_branches(spec, topology, params, state0):
    """The built trees with the branches of the registered sections the file has (`scenefile.extensions`) in
    their `bodies` dicts (the trees as they are when it has none).

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology`.
        params: the built scene's `Params`.
        state0: the built scene's initial `State`.

    Returns:
        (topology, params, state0).
    """
    branches = body_branches(spec)
    if not branches:
        return topology, params, state0

    def added(tree, new: dict):
        return dataclasses.replace(tree, bodies={**(tree.bodies or {}), **new})

    return (added(topology, {k: b.topology for k, b in branches.items()}),
            added(params, {k: b.params for k, b in branches.items()}),
            added(state0, {k: b.state for k, b in branches.items()}))


def check_free(spec, topology, params) -> None:
    """[fit] free names quantities this scene has; a body quantity fitted as one value for every body
    needs the bodies to share it.

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology`.
        params: the built scene's `Params` (with the [material] quantities set).

    Raises:
        SceneFileError: for a free quantity the scene lacks, or a body quantity the bodies do not share.
    """
    for name in spec.fit_config.free:
        q = QUANTITIES[name]
        if q.applies is not None and not q.applies(topology):
            what = "no rigid body ([[body]])" if name.startswith(("body_", "restitution")) else f"no {name}"
            raise SceneFileError(f"{spec.path}: [fit] free: {name} does not apply to this scene ({what})")
        if name.startswith("body_") or name == "restitution":
            values = np.asarray(get_path(params, q.field))
            if values.size > 1 and not np.all(values == values[0]):
                raise SceneFileError(f"{spec.path}: [fit] free: {name} is fitted as one value for every body, "
                                     f"but the [[body]] tables give {values.tolist()}; make them equal")


def finish(spec, topology, params, state0, theta, frames, native_size, background_image, body_colors,
           collider_colors, ode, smoke) -> Experiment:
    """The Experiment of a built scene: time grid, camera, colours and render settings.

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology`.
        params: the built scene's `Params`.
        state0: the built scene's initial `State`.
        theta: {quantity name: value}, the experiment's default theta (with [push] force, [n, 3] N, if given).
        frames: simulated frames after the initial state from the target, or None; [simulation] frames wins.
        native_size: (height, width) pixels of the target's frames, or None (`read_camera`).
        background_image: [H, W, 3] float RGB in [0, 1] behind the scene, or None for [render] background.
        body_colors: one entry per [[body]]: [3] RGB in [0, 1], or None (`bodies.RigidBodies.colors`).
        collider_colors: one entry per [[collider]]: [3] RGB in [0, 1], or None (`colliders.Colliders.colors`).
        ode: the file's `ode.OdeBody`.
        smoke: the file's `smoke.SmokeParts`, or None.

    Returns:
        The `Experiment` (frame_dt = 1 / [simulation] fps s, substeps, camera, faces, colours, lights).

    Raises:
        SceneFileError: naming the file and the key, for a bad [simulation], [push] or [render] value.
    """
    path = spec.path
    push = read_push(spec)
    sim = read_simulation(spec)
    if sim.frames is not None:
        if sim.frames < 1:
            raise SceneFileError(f"{path}: [simulation] frames must be at least 1 (frames simulated after the "
                                 f"initial state), got {sim.frames}")
        frames = sim.frames
    elif frames is None:
        raise SceneFileError(f"{path}: [simulation] frames is needed (no target video to count them from)")
    elif frames < 1:
        raise SceneFileError(f"{path}: the target has {frames + 1} frame(s): a fit needs at least 2 (the initial "
                             "state and one simulated frame)")
    integrator = integrator_of(spec, sim)
    for key, value in (("fps", sim.fps), ("substeps", sim.substeps)):  # render size: in camera()
        if not value > 0:
            raise SceneFileError(f"{path}: [simulation] {key} must be positive, got {value}")
    fps, push_frames = sim.fps, push.frames
    if push_frames < 0:
        raise SceneFileError(f"{path}: [push] frames must be 0 or more (leading frames the push lasts), "
                             f"got {push_frames}")
    if push.particles and push_frames > frames:
        raise SceneFileError(
            f"{path}: [push] frames = {push_frames} ({push_frames / fps:.3g} s) is longer than the simulation: "
            f"{frames} frames ({frames / fps:.3g} s); give at most {frames} (the push then lasts throughout)")
    faces, colors, lights, settings = read_look(spec, topology, params, state0, body_colors, collider_colors, ode)
    camera = spec.camera(native_size)
    looks, kind_options = (smoke.looks, smoke.kind_options) if smoke is not None else ({}, {})
    return Experiment(topology=topology, params=params, state0=state0, camera=camera, faces=faces,
                      colors=colors, lights=lights,
                      background=jnp.asarray(read_render(spec).background if background_image is None
                                             else background_image,
                                             jnp.float32),
                      settings=settings, frames=int(frames),
                      substeps=sim.substeps, frame_dt=1.0 / sim.fps, theta=theta,
                      push_frames=push.frames if push.particles else 0, name=path.stem,
                      integrator=integrator,
                      looks=looks, kind_options=kind_options, pin_path=read_pin_path(spec, topology))


def read_pin_path(spec, topology) -> Optional[tuple]:
    """[scene] pin_key_times and pin_key_offsets as `Experiment.pin_path` ((times), ((x, y, z) per key)), checked;
    None when the pinned vertices stay.

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology` (whether it pins any particle).

    Returns:
        The hashable path, or None.

    Raises:
        SceneFileError: naming the key, for times that do not increase, offsets that are not 3 per key, or a
            path with nothing pinned.
    """
    layout, path = read_scene(spec).cloth, spec.path
    times, offsets = list(layout.pin_key_times), list(layout.pin_key_offsets)
    if not times and not offsets:
        return None
    if len(offsets) != 3 * len(times):
        raise SceneFileError(f"{path}: [scene] pin_key_offsets needs x, y, z per key time: {3 * len(times)} numbers "
                             f"for {len(times)} pin_key_times, got {len(offsets)}")
    if any(b <= a for a, b in zip(times, times[1:])) or not np.all(np.isfinite(times + offsets)):
        raise SceneFileError(f"{path}: [scene] pin_key_times must be finite and increasing, got {times}")
    if not np.asarray(topology.particles.pinned).any():
        raise SceneFileError(f"{path}: [scene] pin_key_times moves the pinned vertices, but none is pinned: give "
                             "pinned or fix")
    return tuple(float(t) for t in times), tuple(tuple(float(v) for v in offsets[3 * k:3 * k + 3])
                                                 for k in range(len(times)))
