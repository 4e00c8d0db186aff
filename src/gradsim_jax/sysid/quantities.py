"""The quantities a fit may estimate: a registry of named physical values and how each one sets the scene.

A `Quantity` says which `Params` (or `State`, or camera) field it sets, its unit, the transform it is fitted
in ("log" for positive scalars), its aliases, how its default is read from a built scene (`read`) and how
a value expands to per-element arrays (`expand`: a scalar broadcast to every triangle or edge, a mean mass
that scales every particle mass alike, ...). `register` adds one; a component (rigid bodies, FEM) registers
its own quantities beside its physics, and `canonical`, `default_theta` and `assemble` know them at once.

theta is a dict {canonical name: value}; besides the estimable quantities it may hold the known inputs
`KNOWN_INPUTS` ("push": [n, 3] N, a force applied during the first `push_frames` frames), never estimated.
`assemble(experiment, theta)` runs inside the traced loss, so the scene is rebuilt from theta on every
forward pass (DESIGN.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics import Params, State, Topology
from gradsim_jax.render import Camera
from gradsim_jax.render.camera import pose_vector, with_pose_vector

Array = Any


@dataclasses.dataclass(frozen=True)
class Quantity:
    """A named physical quantity a fit can estimate.

    name: canonical name; field: the Params field it sets ("v": the initial State's velocity, "camera": the
    camera pose); unit; transform: the space it is fitted in ("log", "identity", see fit.transforms);
    aliases: names accepted for it (the canonical name included); doc: one line for users.
    read: `read(topology, params, state0) -> value`, the scene's own value (None: not read from the scene).
    expand: `expand(experiment, value) -> {field: array}`, the updates of `container` for `value` (already
      in the scene's dtype); traceable. None: applied elsewhere (the camera pose, by `camera_for`).
    container: "params", "state" or "camera": what `expand`'s fields belong to.
    """

    name: str
    field: str
    unit: str
    transform: str
    aliases: tuple[str, ...]
    doc: str
    read: Optional[Callable] = None
    expand: Optional[Callable] = None
    container: str = "params"


#: Estimable quantities, by canonical name, in registration order. Positive scalars are fitted in log space.
QUANTITIES: dict[str, Quantity] = {}
#: Known inputs that live in theta but are never estimated.
KNOWN_INPUTS = ("push",)


def register(quantity: Quantity) -> Quantity:
    """Add `quantity` to the registry; ValueError when its name or an alias is taken by another."""
    for q in QUANTITIES.values():
        if q.name == quantity.name:
            continue
        clash = ({quantity.name, *quantity.aliases}) & ({q.name, *q.aliases})
        if clash:
            raise ValueError(f"quantity {quantity.name!r}: {sorted(clash)} already name {q.name!r}")
    QUANTITIES[quantity.name] = quantity
    return quantity


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


def default_theta(topology: Topology, params: Params, state0: State, names=None) -> dict:
    """theta with the scene's own values of the quantities `names` (default: every quantity the scene can
    give, `Quantity.read`), + push."""
    if names is None:
        names = [n for n, q in QUANTITIES.items() if q.read is not None]
    dtype = np.asarray(state0.x).dtype
    theta = {n: jnp.asarray(QUANTITIES[n].read(topology, params, state0), dtype) for n in names}
    theta["push"] = jnp.zeros_like(jnp.asarray(state0.x))
    return theta


def assemble(exp, theta: dict) -> tuple[Params, State]:
    """Expand theta into (Params, State0) of the experiment `exp` (`Quantity.expand`: scalars broadcast to
    every triangle / edge); traceable."""
    dtype = exp.params.mass.dtype
    updates: dict[str, dict] = {"params": {}, "state": {}}
    for name, q in QUANTITIES.items():
        if name in theta and q.expand is not None:
            updates[q.container].update(q.expand(exp, jnp.asarray(theta[name], dtype)))
    params = dataclasses.replace(exp.params, **updates["params"])
    state = dataclasses.replace(exp.state0, **updates["state"]) if updates["state"] else exp.state0
    return params, state


def camera_for(exp, theta: dict) -> Camera:
    """The experiment's camera, with its pose from theta["camera_pose"] when theta has one; traceable."""
    if "camera_pose" not in theta:
        return exp.camera
    return with_pose_vector(exp.camera, theta["camera_pose"])


def with_camera_pose(exp, theta: dict) -> dict:
    """theta with "camera_pose" set to the experiment camera's own pose when it has none."""
    if "camera_pose" in theta:
        return theta
    return dict(theta, camera_pose=jnp.asarray(pose_vector(exp.camera), exp.params.mass.dtype))


# --------------------------------------------------------------------------------------------------
# The cloth's quantities (particles, membrane, bending, aerodynamics, ground contact) and the camera pose
# --------------------------------------------------------------------------------------------------


def _first(a, fallback: float = 1.0) -> float:
    return float(np.asarray(a).reshape(-1)[0]) if np.size(a) else fallback


def _free_mean_mass(topology, params, state0) -> float:
    free = ~np.asarray(topology.pinned) & (np.asarray(params.mass) > 0)
    return float(np.mean(np.asarray(params.mass)[free])) if free.any() else 1.0


def _read_field(field: str):
    return lambda topology, params, state0: _first(getattr(params, field))


def _broadcast(field: str):
    """expand: one scalar for every element of the Params field `field`."""
    return lambda exp, value: {field: jnp.broadcast_to(value, getattr(exp.params, field).shape)}


def _expand_stiffness(exp, value):
    # k_lambda (tri_ka) keeps the scene's ratio to k_mu.
    tri_ke = jnp.broadcast_to(value, exp.params.tri_ke.shape)
    return {"tri_ke": tri_ke, "tri_ka": tri_ke * exp.area_ratio}


for _q in (
    Quantity("velocity", "v", "m/s", "identity", ("velocity", "vel"), "initial velocity of every particle [n, 3]",
             read=lambda topology, params, state0: np.asarray(state0.v),
             expand=lambda exp, value: {"v": value}, container="state"),
    Quantity("mass", "mass", "kg", "log", ("mass",), "mean mass of the free particles (all scaled alike)",
             read=_free_mean_mass, expand=lambda exp, value: {"mass": exp.params.mass * (value / exp.mass_ref)}),
    Quantity("stiffness", "tri_ke", "N/m", "log", ("stiffness", "tri_ke"),
             "membrane stiffness k_mu (tri_ke); k_lambda (tri_ka) follows at the scene's ratio",
             read=_read_field("tri_ke"), expand=_expand_stiffness),
    Quantity("damping", "tri_kd", "N s/m", "log", ("damping", "tri_kd"), "membrane damping k_damp (tri_kd)",
             read=_read_field("tri_kd"), expand=_broadcast("tri_kd")),
    Quantity("bending", "bend_ke", "N m/rad", "log", ("bending", "edge_ke", "bend_ke"), "bending stiffness",
             read=_read_field("bend_ke"), expand=_broadcast("bend_ke")),
    Quantity("drag", "tri_drag", "N s^2/m^4", "log", ("drag", "tri_drag"), "aerodynamic drag coefficient",
             read=_read_field("tri_drag"), expand=_broadcast("tri_drag")),
    Quantity("lift", "tri_lift", "N s^2/m^4", "log", ("lift", "tri_lift"), "aerodynamic lift coefficient",
             read=_read_field("tri_lift"), expand=_broadcast("tri_lift")),
    Quantity("friction", "contact_mu", "1", "log", ("friction", "contact_mu", "mu"), "ground friction coefficient",
             read=lambda topology, params, state0: float(np.asarray(params.contact_mu)),
             expand=lambda exp, value: {"contact_mu": value}),
    Quantity("camera_pose", "camera", "rad, m", "identity", ("camera_pose", "pose"),
             "camera pose (rvec [3] rad, tvec [3] m; OpenCV world-to-camera) when only roughly known",
             container="camera"),
):
    register(_q)
del _q
