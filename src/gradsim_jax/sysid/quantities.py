"""The quantities a fit may estimate: a registry of named physical values and how each one sets the scene.

A `Quantity` says which `Params` leaf it sets (its dotted path "cloth.tri_ke", or the initial state's
velocity, or the camera), its unit, the transform it is fitted in ("log" for positive scalars), its
aliases (every quantity answers to its canonical name, e.g. "stiffness", to its Params path and to the
name builders and scene files give it, e.g. "tri_ke"), how its default is read from a built scene (`read`) and how
a value expands to per-element arrays (`expand`: a scalar broadcast to every triangle or edge, a mean mass
that scales every particle mass alike, ...). `register` adds one; a component (rigid bodies, FEM) registers
its own quantities beside its physics, and `canonical`, `default_theta` and `assemble` know them at once.

theta is a dict {canonical name: value}; besides the estimable quantities it may hold the known inputs
`KNOWN_INPUTS` ("push": [n, 3] N, a force applied during the first `push_frames` frames), never estimated.
`assemble(experiment, theta)` runs inside the traced loss, so the scene is rebuilt from theta on every
forward pass (DESIGN.md).

What a quantity that is not fitted may do (`settled_theta`, `default_theta`): it restates the scene (then
it is left out: the scene's own leaves stay exactly as built, per-element values and user-given masses
included) or says something the scene does not (a value the caller set). Several quantities set one Params
leaf (mass, particle_mass, density and density_field all set `particles.mass`); when one of them is free the
others are left out, and when theta and the scene's Params disagree about the masses, `MassWarning` says so.
"""

from __future__ import annotations

import dataclasses
import types
import warnings
from typing import Any

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics import Params, State, Topology, get_path, replace_paths
from gradsim_jax.render import Camera
from gradsim_jax.render.camera import pose_vector, with_pose_vector
from gradsim_jax.sysid import builtin  # noqa: F401  (registers the built-in components' quantities)
from gradsim_jax.sysid.builtin import (  # noqa: F401  (re-exported)
    density_field_coordinates, lumped_volumes, particle_volumes, shape_roughness,
)
from gradsim_jax.sysid.registry import (  # noqa: F401  (re-exported)
    KNOWN_INPUTS, QUANTITIES, Quantity, canonical, canonical_theta, register, transforms_for,
)

Array = Any


class MassWarning(UserWarning):
    """Two sources of the particles' masses disagree (theta's quantities and the scene's Params), or a
    quantity asked for cannot express the scene's masses; the message says which wins."""


#: A quantity restates a scene when its expansion of the scene's own value reproduces the leaves it sets to
#: this relative tolerance (float32 rounding of a recomputation, e.g. density x lumped volume).
RESTATE_RTOL = 1e-5


def derived_values(topology, params, dtype) -> dict:
    """What `expand` reads of an experiment besides its trees: mass_ref (kg, the mean mass of the free
    particles: "mass" scales every mass by mass / mass_ref), area_ratio (tri_ka / tri_ke per triangle) and
    free_particles ([n] bool, host).

    Args:
        topology: the scene's Topology (which particles are pinned).
        params: the scene's Params (particle masses, kg; triangle stiffnesses).
        dtype: the float dtype of area_ratio.

    Returns:
        dict {"free_particles": [n] bool numpy, "mass_ref": float kg (1.0 when no particle is free),
        "area_ratio": [t] array of dtype}.
    """
    mass = np.asarray(params.particles.mass)
    free = np.asarray(~np.asarray(topology.particles.pinned) & (mass > 0))
    ke, ka = np.asarray(params.cloth.tri_ke), np.asarray(params.cloth.tri_ka)
    return {"free_particles": free, "mass_ref": float(np.mean(mass[free])) if free.any() else 1.0,
            "area_ratio": jnp.asarray(np.where(ke > 0, ka / np.where(ke > 0, ke, 1.0), 1.0), dtype)}


def scene_context(topology, params, state0):
    """An object with what `Quantity.expand` reads of an experiment (trees, dtype, `derived_values`), for a
    scene that has no Experiment yet.

    Args:
        topology: the built scene's Topology.
        params: the built scene's Params.
        state0: the built scene's initial State (its particle positions give the dtype).

    Returns:
        a SimpleNamespace with topology, params, state0, dtype and the `derived_values`.
    """
    dtype = jnp.result_type(state0.particles.x)
    return types.SimpleNamespace(topology=topology, params=params, state0=state0, dtype=dtype,
                                 **derived_values(topology, params, dtype))


def expansion_difference(ctx, name: str, value) -> tuple[float, str, int]:
    """(largest relative difference, its leaf's path, its flat index) between the leaves `expand(ctx, value)`
    of the quantity `name` sets and the scene's own (0.0, "", -1 when it reproduces them exactly or sets
    nothing); host-side.

    Args:
        ctx: an experiment, or `scene_context` of a scene: what `Quantity.expand` reads.
        name: the quantity's name or alias.
        value: the quantity's value, in its unit (`Quantity.unit`).

    Returns:
        (float relative difference, str leaf path, int flat index into that leaf).
    """
    q = QUANTITIES[canonical(name)]
    if q.expand is None or q.container == "camera":
        return 0.0, "", -1
    worst = (0.0, "", -1)
    for path, new in q.expand(ctx, jnp.asarray(value, ctx.dtype)).items():
        tree, leaf = (ctx.state0, path[len("state."):]) if path.startswith("state.") else (
            (ctx.state0, path) if q.container == "state" else (ctx.params, path))
        old = np.asarray(get_path(tree, leaf), np.float64).reshape(-1)
        new = np.broadcast_to(np.asarray(new, np.float64), np.shape(get_path(tree, leaf))).reshape(-1)
        if old.size == 0:
            continue
        rel = np.abs(new - old) / np.maximum(np.abs(old), 1e-30)
        k = int(np.argmax(rel))
        if rel[k] > worst[0]:
            worst = (float(rel[k]), path, k)
    return worst


def default_theta(topology: Topology, params: Params, state0: State, names=None) -> dict:
    """theta with the scene's own values of the quantities `names`, + push. Default: every quantity the scene
    can give (`Quantity.read`) that restates it, i.e. whose expansion reproduces the scene's leaves (within
    `RESTATE_RTOL`): a scene whose masses are not one density's times the lumped volumes gets no "density"
    (it would replace them), one with per-triangle stiffnesses no "stiffness". A named quantity that does not
    restate the scene is given all the same, with a `MassWarning` when it sets the masses.

    Args:
        topology: the built scene's Topology.
        params: the built scene's Params.
        state0: the built scene's initial State.
        names: quantity names or aliases to read; None: the default above.

    Returns:
        dict {canonical name: value in the scene's dtype}, plus "push": [n, 3] N zeros.
    """
    auto = names is None
    if auto:
        names = [n for n, q in QUANTITIES.items()
                 if q.auto and q.read is not None and (q.applies is None or q.applies(topology))]
    dtype = np.asarray(state0.particles.x).dtype
    names = [canonical(n) for n in names]
    ctx = scene_context(topology, params, state0)
    theta = {}
    for n in names:
        value = jnp.asarray(QUANTITIES[n].read(topology, params, state0), dtype)
        off, path, k = expansion_difference(ctx, n, value)
        if off > RESTATE_RTOL:
            if auto:
                continue
            if QUANTITIES[n].field == "particles.mass":
                warnings.warn(f"{n} = {_short(value)} {QUANTITIES[n].unit} cannot express the scene's masses (it would "
                              f"change {path}[{k}] by {off:.3g}, relatively): it replaces them wherever it is "
                              "applied", MassWarning, stacklevel=2)
        theta[n] = value
    theta["push"] = jnp.zeros_like(jnp.asarray(state0.particles.x))
    return theta


def _short(value) -> str:
    a = np.asarray(value)
    return f"{float(a):.6g}" if a.size == 1 else f"[{a.size} values]"


def settled_theta(exp, theta: dict, free) -> dict:
    """The theta a fit of the quantities `free` applies (host-side, concrete values): the free quantities, the
    known inputs and private entries, and each other quantity only where it says something the scene does
    not (its value is not the scene's own `read`) and no free quantity sets its Params leaf. So a quantity
    that is not fitted never overwrites what the scene holds; one that a free quantity supersedes but whose
    value differs from the scene's is dropped with a `MassWarning` (masses) naming both.

    Args:
        exp: the experiment whose scene gives the own values.
        theta: {quantity name: value}, concrete.
        free: names (or aliases) of the quantities the fit estimates.

    Returns:
        a new dict, the entries of theta that are kept.
    """
    free = {canonical(n) for n in free}
    fields = {QUANTITIES[n].field for n in free}
    out = {}
    for name, value in theta.items():
        if name in KNOWN_INPUTS or name.startswith("_") or name in free:
            out[name] = value
            continue
        q = QUANTITIES[canonical(name)]
        if q.read is None or (q.applies is not None and not q.applies(exp.topology)):
            out[name] = value
            continue
        own = np.asarray(q.read(exp.topology, exp.params, exp.state0), np.asarray(value).dtype)
        if np.array_equal(np.asarray(value), np.broadcast_to(own, np.shape(value))):
            continue  # it restates the scene
        if q.field in fields:
            by = sorted(n for n in free if QUANTITIES[n].field == q.field)
            if q.field == "particles.mass":
                warnings.warn(f"{name} = {_short(value)} {q.unit} is not fitted and sets {q.field}, which the free "
                              f"{', '.join(by)} sets: it is left out", MassWarning, stacklevel=2)
            continue
        out[name] = value
    return out


def focused(exp, theta: dict, free):
    """(exp, theta) for a fit of `free`: the experiment's theta and `theta` both `settled_theta` (a quantity
    that is not fitted applies only what the scene does not already hold, and never what a free quantity
    sets).

    Args:
        exp: the experiment (not changed).
        theta: {quantity name: value}, concrete.
        free: names (or aliases) of the quantities the fit estimates.

    Returns:
        (a copy of exp with its theta settled, theta settled).
    """
    return dataclasses.replace(exp, theta=settled_theta(exp, exp.theta, free)), settled_theta(exp, theta, free)


def check_masses(exp) -> None:
    """`MassWarning` when a quantity of `exp.theta` that sets the particles' masses disagrees with the scene's
    Params (e.g. Params changed after theta was read from them): theta's value is what fits and videos use.

    Args:
        exp: the experiment whose theta and Params are compared.
    """
    for name, value in exp.theta.items():
        if name in KNOWN_INPUTS or name.startswith("_") or name not in QUANTITIES:
            continue
        q = QUANTITIES[name]
        if q.field != "particles.mass" or q.read is None or (q.applies is not None and not q.applies(exp.topology)):
            continue
        own = np.asarray(q.read(exp.topology, exp.params, exp.state0), np.asarray(value).dtype)
        off, path, k = expansion_difference(exp, name, value)
        if off > RESTATE_RTOL:
            warnings.warn(f"theta[{name!r}] = {_short(value)} {q.unit} and the scene's params.particles.mass disagree "
                          f"(the scene's own {name} is {_short(own)}; particle {k}'s mass would change by {off:.3g}, "
                          f"relatively): theta's {name} sets the masses wherever it is applied. To keep the scene's "
                          f"masses, leave {name} out of theta (or read it again: default_theta)", MassWarning,
                          stacklevel=3)


def assemble(exp, theta: dict) -> tuple[Params, State]:
    """Expand theta into (Params, State0) of the experiment `exp` (`Quantity.expand`: scalars broadcast to
    every triangle / edge); traceable.

    Args:
        exp: the experiment (or `scene_context`) whose Params and initial State are updated.
        theta: {quantity name or alias: value}, each in its quantity's unit; quantities it lacks keep the
            scene's leaves.

    Returns:
        (Params, initial State) with theta's values applied.
    """
    dtype = exp.dtype
    theta = canonical_theta(theta)
    updates: dict[str, dict] = {"params": {}, "state": {}}
    for name, q in QUANTITIES.items():
        if name in theta and q.expand is not None:
            for path, value in q.expand(exp, jnp.asarray(theta[name], dtype)).items():
                if path.startswith("state."):
                    updates["state"][path[len("state."):]] = value
                else:
                    updates[q.container][path] = value
    params = replace_paths(exp.params, updates["params"]) if updates["params"] else exp.params
    state = replace_paths(exp.state0, updates["state"]) if updates["state"] else exp.state0
    return params, state


def camera_for(exp, theta: dict) -> Camera:
    """The experiment's camera, with its pose from theta["camera_pose"] when theta has one; traceable.

    Args:
        exp: the experiment whose camera is used.
        theta: {canonical quantity name: value}; "camera_pose" is the pose vector (`render.camera.pose_vector`).

    Returns:
        the Camera.
    """
    if "camera_pose" not in theta:
        return exp.camera
    return with_pose_vector(exp.camera, theta["camera_pose"])


def blur_for(theta: dict):
    """The Gaussian blur (pixels) of theta["blur"], or None when theta has none; traceable.

    Args:
        theta: {canonical quantity name: value}.

    Returns:
        theta["blur"] (pixels) or None.
    """
    return theta.get("blur")


#: The appearance's quantities (`appearance_for`): a fit of [render] appearance = "video" frees them.
APPEARANCE_QUANTITIES = ("albedo", "ambient", "directional", "light_direction", "shadow", "shadow_blur")


def polished(free) -> tuple:
    """The free quantities the Levenberg-Marquardt polish and the identifiability report take: all but the
    appearance's (`APPEARANCE_QUANTITIES`: the per-face albedo, hundreds of values, and the lights), nuisances
    that Adam fits and they hold at its estimate (the polish's Jacobian costs a render of the video per column).

    Args:
        free: the fitted quantities' canonical names.

    Returns:
        The names, in their order.
    """
    return tuple(n for n in free if n not in APPEARANCE_QUANTITIES)


def appearance_for(exp, theta: dict):
    """The colours and lights to render with: theta's "albedo" (per-vertex) and light quantities where it has
    them, the experiment's own otherwise; traceable.

    Args:
        exp: the experiment (its colours and `Lights`).
        theta: {canonical quantity name: value}; "albedo" [F, 3], "ambient", "directional", "light_direction" [3].

    Returns:
        (colours record: `FaceColors` of theta's albedo or the experiment's, `Lights`).
    """
    from gradsim_jax.render import FaceColors, Lights

    colors = FaceColors(theta["albedo"]) if "albedo" in theta else exp.colors
    lights = exp.lights
    if any(n in theta for n in APPEARANCE_QUANTITIES[1:]):
        lights = Lights(ambient=theta.get("ambient", lights.ambient),
                        directional=theta.get("directional", lights.directional),
                        direction=theta.get("light_direction", lights.direction))
    return colors, lights


def shadow_for(exp, theta: dict):
    """The meshes' shadow on the ground of theta's "shadow" (strength) and "shadow_blur" (pixels), cast from
    its "light_direction" (else the experiment's light), or None when theta has no "shadow"; traceable.

    Args:
        exp: the experiment (its lights).
        theta: {canonical quantity name: value}.

    Returns:
        (strength, softness in pixels or None, direction towards the light [3]) or None.
    """
    if "shadow" not in theta:
        return None
    return theta["shadow"], theta.get("shadow_blur"), theta.get("light_direction", exp.lights.direction)


def with_camera_pose(exp, theta: dict) -> dict:
    """theta with "camera_pose" set to the experiment camera's own pose when it has none.

    Args:
        exp: the experiment whose camera gives the pose.
        theta: {canonical quantity name: value}.

    Returns:
        theta itself when it has "camera_pose", else a new dict with the pose vector in the scene's dtype.
    """
    if "camera_pose" in theta:
        return theta
    return dict(theta, camera_pose=jnp.asarray(pose_vector(exp.camera), exp.dtype))

