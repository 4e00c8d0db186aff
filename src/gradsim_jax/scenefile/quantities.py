"""[material] and [initial] values of the registry's quantities: checked (finite, positive in log space,
inside a bounded range), shaped for the scene (`scene_value`), set in the built scene (`material_quantities`)
and made the fit's start (`initial_theta`)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.transforms import Bounded
from gradsim_jax.physics import replace_paths
from gradsim_jax.sysid import QUANTITIES, Experiment, canonical, with_camera_pose
from gradsim_jax.scenefile.schema import MATERIAL_QUANTITIES, SceneFileError
from gradsim_jax.scenefile.world import read_material


def check_quantity_value(where: str, key: str, value) -> np.ndarray:
    """float64 array of a [material] or [initial] value of a quantity, checked: finite, positive for those fitted
    in log space, strictly inside a bounded one's range (SceneFileError naming `where` and the key).

    Args:
        where: the start of the message, e.g. "scene.toml: [initial]".
        key: the quantity's key as written in the file (a name or alias of the registry).
        value: the value as read: a number or a list of numbers, in the quantity's unit.

    Returns:
        The value as a float64 array of its own shape.
    """
    q = QUANTITIES[canonical(key)]
    a = np.asarray(value, np.float64)
    if q.transform == "log" and not np.all(np.isfinite(a) & (a > 0)):
        raise SceneFileError(f"{where} {key} must be positive and finite ({q.doc}, {q.unit}; fitted in log space), "
                             f"got {value}")
    if not np.all(np.isfinite(a)):
        raise SceneFileError(f"{where} {key} must be finite, got {value}")
    if isinstance(q.transform, Bounded) and not np.all((q.transform.lo < a) & (a < q.transform.hi)):
        raise SceneFileError(f"{where} {key} must be strictly between {q.transform.lo:g} and {q.transform.hi:g} "
                             f"({q.doc}; fitted through a logistic map), got {value}")
    return a


def read_initial(spec) -> dict:
    """[initial] read (the one reader of the section): the keys it sets.

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        {key as written (a quantity's name or alias): value (a number or a list of numbers)} for each key
        given, in the schema's order.
    """
    values = dataclasses.asdict(spec.sections.initial)
    return {key: value for key, value in values.items() if value is not None}


def check_initial(spec) -> None:
    """[initial] values, and [material] values of registered quantities, must be finite, positive for the
    quantities fitted in log space, and inside a bounded quantity's range.

    Args:
        spec: the scene file (`SceneSpec`) whose values to check.

    Raises:
        SceneFileError: naming the file, the section and the key of the first bad value.
    """
    for section, values in (("initial", read_initial(spec)),
                            ("material", read_material(spec).quantities)):
        for key, value in values.items():
            if value is not None:
                check_quantity_value(f"{spec.path}: [{section}]", key, value)


def initial_theta(spec, exp: Experiment) -> dict:
    """The experiment's theta with [initial] values for the free quantities.

    Args:
        spec: the validated scene file (`SceneSpec`).
        exp: the `Experiment` built from it.

    Returns:
        {quantity name: value}: `exp.theta` with each [initial] value in theta's shape and `exp.dtype` (and the
        camera pose when it is free).
    """
    theta = dict(exp.theta)
    for key, value in read_initial(spec).items():
        name = canonical(key)
        value = scene_value(spec, "initial", key, value, exp.topology, exp.state0)
        if QUANTITIES[name].file_type == "float|float[]" and name in theta:  # per link: [k] -> [p, k]
            value = np.broadcast_to(value, np.shape(theta[name]))
        theta[name] = jnp.asarray(value, exp.dtype)
    if "camera_pose" in spec.fit_config.free:
        theta = with_camera_pose(exp, theta)
    return theta


def scene_value(spec, section: str, key: str, value, topology, state0) -> np.ndarray:
    """A [material] or [initial] value of a quantity, in the shape theta holds it for this scene: a velocity
    [3] for every particle, one value per particle checked against their number; SceneFileError when the
    scene has nothing the quantity sets.

    Args:
        spec: the validated scene file (`SceneSpec`), named in messages.
        section: "material" or "initial", named in messages.
        key: the quantity's key as written in the file (a name or alias of the registry).
        value: the value as read: a number or a list of numbers, in the quantity's unit.
        topology: the built scene's `Topology`.
        state0: the built scene's initial `State` (its particle count, and its ODE links).

    Returns:
        float64 array: velocity [n, 3] m/s; a per-particle quantity [n]; otherwise the value's own shape.
    """
    name = canonical(key)
    q = QUANTITIES[name]
    a = np.asarray(value, np.float64)
    n = int(np.shape(state0.particles.x)[0])
    if (q.applies is not None and not q.applies(topology)) or (q.field.startswith("particles.") and n == 0):
        raise SceneFileError(f"{spec.path}: [{section}] {key}: the scene has no {q.doc}")
    if name == "velocity":
        return np.broadcast_to(a, (n, 3))
    links = np.shape(getattr(state0.ode, "theta", ()))[-1:]
    if q.file_type == "float|float[]" and a.ndim == 1 and links and a.shape != links:
        raise SceneFileError(f"{spec.path}: [{section}] {key} takes one value for every link or one per link "
                             f"({links[0]}), got {a.size}")
    if q.file_type == "float[]" and a.shape != (n,):
        raise SceneFileError(f"{spec.path}: [{section}] {key} needs one value per particle: {n} (the cloth's, then "
                             f"each soft body's in order), got {a.size}")
    return a


def material_quantities(spec, topology, params, state0):
    """(params, state0) with the [material] values of registered quantities set (`MATERIAL_QUANTITIES`: the
    quantities the builders take no key for, e.g. fem_mu for every tet, body_mass for every body).

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology`.
        params: the built scene's `Params`.
        state0: the built scene's initial `State`.

    Returns:
        (params, state0) with the values set.
    """
    from gradsim_jax.sysid.quantities import scene_context

    values = read_material(spec).quantities
    for key, name in MATERIAL_QUANTITIES.items():
        value = values[key]
        if value is None:
            continue
        value = scene_value(spec, "material", key, value, topology, state0)
        q = QUANTITIES[name]
        ctx = scene_context(topology, params, state0)
        updates = q.expand(ctx, jnp.asarray(value, ctx.dtype))
        to_state = {k[len("state."):] if k.startswith("state.") else k: v for k, v in updates.items()
                    if k.startswith("state.") or q.container == "state"}
        to_params = {k: v for k, v in updates.items() if not (k.startswith("state.") or q.container == "state")}
        params = replace_paths(params, to_params) if to_params else params
        state0 = replace_paths(state0, to_state) if to_state else state0
    return params, state0
