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
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.transforms import Bounded
from gradsim_jax.physics import Params, State, Topology, get_path, replace_paths
from gradsim_jax.render import Camera
from gradsim_jax.render.camera import pose_vector, with_pose_vector

Array = Any


@dataclasses.dataclass(frozen=True)
class Quantity:
    """A named physical quantity a fit can estimate.

    name: canonical name ("stiffness"); field: the dotted path it sets ("cloth.tri_ke"; "particles.v" of
    the initial State; "camera");
    unit; transform: the space it is fitted in ("log", "identity", see fit.transforms);
    aliases: names accepted for it (the canonical name included); doc: one line for users.
    read: `read(topology, params, state0) -> value`, the scene's own value (None: not read from the scene).
    expand: `expand(experiment, value) -> {path: array}`, the updates of `container` for `value` (already
      in the scene's dtype); traceable. None: applied elsewhere (the camera pose, by `camera_for`).
    container: "params", "state", "camera" or "render": what `expand`'s fields belong to (a params quantity
      may also move the initial state: its paths that start with "state." do; the camera's pose and the
      render's blur are applied where the frames are rendered, `camera_for` and `blur_for`).
    applies: `applies(topology) -> bool`, whether a scene has what the quantity sets (None: always);
      `default_theta` reads only those that apply.
    key: its key in scene files' [material] and [initial] (None: the canonical name; "" : none, it has a
      section of its own, the camera's pose); file_type: the TOML type there ("float", "float[3]" for one
      velocity of every particle, "float[4]", "float[]" for one value per particle).
    auto: whether `default_theta` gives it unasked (particle_mass restates every mass "mass" already does).
    """

    name: str
    field: str
    unit: str
    transform: Any
    aliases: tuple[str, ...]
    doc: str
    read: Optional[Callable] = None
    expand: Optional[Callable] = None
    container: str = "params"
    applies: Optional[Callable] = None
    key: Optional[str] = None
    file_type: str = "float"
    auto: bool = True

    @property
    def file_key(self) -> str:
        """Its key in scene files' [material] and [initial] ("" when it has none)."""
        return self.name if self.key is None else self.key


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


def canonical_theta(theta: dict) -> dict:
    """theta with every quantity under its canonical name ("mass" -> "particles.mass"); known inputs and
    private entries (a leading underscore) pass unchanged."""
    return {k if k in KNOWN_INPUTS or k.startswith("_") else canonical(k): v for k, v in theta.items()}


def transforms_for(names) -> dict[str, str]:
    return {n: QUANTITIES[n].transform for n in names}


class MassWarning(UserWarning):
    """Two sources of the particles' masses disagree (theta's quantities and the scene's Params), or a
    quantity asked for cannot express the scene's masses; the message says which wins."""


#: A quantity restates a scene when its expansion of the scene's own value reproduces the leaves it sets to
#: this relative tolerance (float32 rounding of a recomputation, e.g. density x lumped volume).
RESTATE_RTOL = 1e-5


def derived_values(topology, params, dtype) -> dict:
    """What `expand` reads of an experiment besides its trees: mass_ref (kg, the mean mass of the free
    particles: "mass" scales every mass by mass / mass_ref), area_ratio (tri_ka / tri_ke per triangle) and
    free_particles ([n] bool, host)."""
    mass = np.asarray(params.particles.mass)
    free = np.asarray(~np.asarray(topology.particles.pinned) & (mass > 0))
    ke, ka = np.asarray(params.cloth.tri_ke), np.asarray(params.cloth.tri_ka)
    return {"free_particles": free, "mass_ref": float(np.mean(mass[free])) if free.any() else 1.0,
            "area_ratio": jnp.asarray(np.where(ke > 0, ka / np.where(ke > 0, ke, 1.0), 1.0), dtype)}


def scene_context(topology, params, state0):
    """An object with what `Quantity.expand` reads of an experiment (trees, dtype, `derived_values`), for a
    scene that has no Experiment yet."""
    dtype = jnp.result_type(state0.particles.x)
    return types.SimpleNamespace(topology=topology, params=params, state0=state0, dtype=dtype,
                                 **derived_values(topology, params, dtype))


def expansion_difference(ctx, name: str, value) -> tuple[float, str, int]:
    """(largest relative difference, its leaf's path, its flat index) between the leaves `expand(ctx, value)`
    of the quantity `name` sets and the scene's own (0.0, "", -1 when it reproduces them exactly or sets
    nothing); host-side."""
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
    restate the scene is given all the same, with a `MassWarning` when it sets the masses."""
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
    value differs from the scene's is dropped with a `MassWarning` (masses) naming both."""
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
    sets)."""
    return dataclasses.replace(exp, theta=settled_theta(exp, exp.theta, free)), settled_theta(exp, theta, free)


def check_masses(exp) -> None:
    """`MassWarning` when a quantity of `exp.theta` that sets the particles' masses disagrees with the scene's
    Params (e.g. Params changed after theta was read from them): theta's value is what fits and videos use."""
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
    every triangle / edge); traceable."""
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
    """The experiment's camera, with its pose from theta["camera_pose"] when theta has one; traceable."""
    if "camera_pose" not in theta:
        return exp.camera
    return with_pose_vector(exp.camera, theta["camera_pose"])


def blur_for(theta: dict):
    """The Gaussian blur (pixels) of theta["blur"], or None when theta has none; traceable."""
    return theta.get("blur")


def with_camera_pose(exp, theta: dict) -> dict:
    """theta with "camera_pose" set to the experiment camera's own pose when it has none."""
    if "camera_pose" in theta:
        return theta
    return dict(theta, camera_pose=jnp.asarray(pose_vector(exp.camera), exp.dtype))


# --------------------------------------------------------------------------------------------------
# The cloth's quantities (particles, membrane, bending, aerodynamics, ground contact) and the camera pose
# --------------------------------------------------------------------------------------------------


def _first(a, fallback: float = 1.0) -> float:
    return float(np.asarray(a).reshape(-1)[0]) if np.size(a) else fallback


def _free_mean_mass(topology, params, state0) -> float:
    mass = np.asarray(params.particles.mass)
    free = ~np.asarray(topology.particles.pinned) & (mass > 0)
    return float(np.mean(mass[free])) if free.any() else 1.0


def _read_path(path: str):
    return lambda topology, params, state0: _first(get_path(params, path))


def _broadcast(path: str):
    """expand: one scalar for every element of the Params leaf at `path`."""
    return lambda exp, value: {path: jnp.broadcast_to(value, get_path(exp.params, path).shape)}


def _expand_stiffness(exp, value):
    # k_lambda (tri_ka) keeps the scene's ratio to k_mu.
    tri_ke = jnp.broadcast_to(value, exp.params.cloth.tri_ke.shape)
    return {"cloth.tri_ke": tri_ke, "cloth.tri_ka": tri_ke * exp.area_ratio}


def _expand_mass(exp, value):
    return {"particles.mass": exp.params.particles.mass * (value / exp.mass_ref)}


for _q in (
    Quantity("velocity", "particles.v", "m/s", "identity", ("velocity", "vel", "particles.v"),
             "initial velocity of every particle [n, 3]",
             read=lambda topology, params, state0: np.asarray(state0.particles.v),
             expand=lambda exp, value: {"particles.v": value}, container="state", file_type="float[3]"),
    Quantity("mass", "particles.mass", "kg", "log", ("mass", "particles.mass"),
             "mean mass of the free particles (all scaled alike)", read=_free_mean_mass, expand=_expand_mass),
    Quantity("stiffness", "cloth.tri_ke", "N/m", "log", ("stiffness", "tri_ke", "cloth.tri_ke"),
             "membrane stiffness k_mu (tri_ke); k_lambda (tri_ka) follows at the scene's ratio",
             read=_read_path("cloth.tri_ke"), expand=_expand_stiffness, key="tri_ke"),
    Quantity("damping", "cloth.tri_kd", "N s/m", "log", ("damping", "tri_kd", "cloth.tri_kd"),
             "membrane damping k_damp (tri_kd)", read=_read_path("cloth.tri_kd"), expand=_broadcast("cloth.tri_kd"),
             key="tri_kd"),
    Quantity("bending", "cloth.bend_ke", "N m/rad", "log", ("bending", "bend_ke", "cloth.bend_ke", "edge_ke"),
             "bending stiffness (bend_ke)", read=_read_path("cloth.bend_ke"), expand=_broadcast("cloth.bend_ke"),
             key="bend_ke"),
    Quantity("drag", "cloth.tri_drag", "N s^2/m^4", "log", ("drag", "tri_drag", "cloth.tri_drag"),
             "aerodynamic drag coefficient", read=_read_path("cloth.tri_drag"), expand=_broadcast("cloth.tri_drag"),
             key="tri_drag"),
    Quantity("lift", "cloth.tri_lift", "N s^2/m^4", "log", ("lift", "tri_lift", "cloth.tri_lift"),
             "aerodynamic lift coefficient", read=_read_path("cloth.tri_lift"), expand=_broadcast("cloth.tri_lift"),
             key="tri_lift"),
    Quantity("friction", "contact.mu", "1", "log", ("friction", "contact_mu", "contact.mu", "mu"),
             "ground friction coefficient of the particles",
             read=lambda topology, params, state0: float(np.asarray(params.contact.mu)),
             expand=lambda exp, value: {"contact.mu": value}, key="contact_mu"),
    Quantity("camera_pose", "camera", "rad, m", "identity", ("camera_pose", "pose"),
             "camera pose (rvec [3] rad, tvec [3] m; OpenCV world-to-camera) when only roughly known",
             container="camera", key=""),
    Quantity("blur", "render.blur", "px", "log", ("blur", "psf"),
             "Gaussian blur of the rendered frames, standard deviation in pixels of the render: a lens's point "
             "spread, or another renderer's softer edges (a nuisance quantity; [fit] blur)", container="render",
             key=""),
):
    register(_q)
del _q


# --------------------------------------------------------------------------------------------------
# Rigid bodies (physics/rigid.py): a scalar sets every body alike, a [b] array each body
# --------------------------------------------------------------------------------------------------


def _has_bodies(topology) -> bool:
    return topology.rigid.vertex_body.shape[0] > 0


def _body_quantity(name: str, path: str, unit: str, doc: str, transform="log", aliases=()) -> Quantity:
    """A per-body Params leaf: answers to `name` and `path`; read from the first body, a scalar sets all."""
    return Quantity(name, path, unit, transform, (name, path, *aliases), doc, read=_read_path(path),
                    expand=_broadcast(path), applies=_has_bodies)


def _expand_shape(exp, offsets):
    """Vertices = the scene's (template) hull + offsets [m, 3]; the body's centre of mass, gyration and
    initial position follow the new solid (its mass stays). One body only (`check_shape_scene`)."""
    from gradsim_jax.geometry.rigid import mass_properties
    from gradsim_jax.physics.quaternion import quat_rotate

    rigid = exp.params.rigid
    verts = rigid.vertices + offsets
    props = mass_properties(verts, exp.topology.rigid.faces, mass=rigid.mass[0])
    x0 = exp.state0.rigid.x + quat_rotate(exp.state0.rigid.q, props.com[None])
    return {"rigid.vertices": verts - props.com, "rigid.gyration": props.gyration[None], "state.rigid.x": x0}


def shape_roughness(offsets, faces):
    """Laplacian regularizer of "shape": mean over vertices of |o_i - mean of its neighbours' o_j|^2 (m^2),
    offsets [m, 3], neighbours along the edges of faces [f, 3] (a closed mesh lists each edge once each way,
    so every neighbour counts twice and the mean is unchanged); traceable. A vertex of no face counts 0."""
    faces = jnp.asarray(faces)
    src = jnp.concatenate([faces[:, 0], faces[:, 1], faces[:, 2], faces[:, 1], faces[:, 2], faces[:, 0]])
    dst = jnp.concatenate([faces[:, 1], faces[:, 2], faces[:, 0], faces[:, 0], faces[:, 1], faces[:, 2]])
    m = offsets.shape[0]
    total = jax.ops.segment_sum(offsets[src], dst, num_segments=m)
    count = jax.ops.segment_sum(jnp.ones_like(dst, offsets.dtype), dst, num_segments=m)
    mean = total / jnp.maximum(count, 1.0)[:, None]
    return jnp.mean(jnp.where(count[:, None] > 0, jnp.square(offsets - mean), 0.0).sum(-1))


for _q in (
    _body_quantity("body_mass", "rigid.mass", "kg", "mass of each rigid body (its inertia follows: I = mass x "
                   "gyration)"),
    _body_quantity("body_ke", "rigid.contact_ke", "N/m", "ground contact stiffness of the rigid bodies (penalty "
                   "model)"),
    _body_quantity("body_kd", "rigid.contact_kd", "N s/m", "ground contact damping of the rigid bodies (penalty "
                   "model)"),
    _body_quantity("body_kf", "rigid.contact_kf", "N s/m", "ground friction stiffness of the rigid bodies (viscous "
                   "slope below the Coulomb limit)"),
    _body_quantity("body_mu", "rigid.contact_mu", "1", "Coulomb friction coefficient of the rigid bodies on the "
                   "ground"),
    _body_quantity("restitution", "rigid.restitution", "1", "coefficient of restitution of the rigid bodies "
                   "(impulse contact model)", transform=Bounded(0.0, 1.0), aliases=("e",)),
    Quantity("shape", "rigid.vertices", "m", "identity", ("shape", "vertex_offsets"),
             "per-vertex offsets [m, 3] of a rigid body's hull from its template (one body)",
             read=lambda topology, params, state0: np.zeros(np.shape(params.rigid.vertices)),
             expand=_expand_shape, applies=lambda topology: False, key=""),
):
    register(_q)
del _q


# --------------------------------------------------------------------------------------------------
# FEM soft bodies (physics/fem.py): a scalar sets every tet alike; per-particle masses; density
# --------------------------------------------------------------------------------------------------


def _has_tets(topology) -> bool:
    return topology.fem.tets.shape[0] > 0


def _tet_quantity(name: str, path: str, unit: str, doc: str, aliases=()) -> Quantity:
    """A per-tet Params leaf: answers to `name`, `path` and `aliases` (the builders' names); read from the
    first tet, a scalar sets every tet."""
    return Quantity(name, path, unit, "log", (name, path, *aliases), doc, read=_read_path(path),
                    expand=_broadcast(path), applies=_has_tets)


def particle_volumes(topology, params):
    """Per-particle volume [n] (m^3) whose density gives each particle's mass (`FemParams.particle_volume`:
    lumped V0 / 4 shares by default, a whole cell for Warp's grids; 0 for particles of no tet); traceable."""
    return params.fem.particle_volume


def lumped_volumes(topology, params):
    """Per-particle lumped rest volume [n] (m^3): the sum of V0 / 4 over the particle's tets, V0 from the
    rest shape `params.fem.rest_x` (a particle of no tet: 0); traceable. density x this = the lumped mass
    (`geometry.tets.lumped_masses`)."""
    from gradsim_jax.physics.fem import rest_shapes

    tets = topology.fem.tets
    n = params.particles.mass.shape[0]
    _, v0 = rest_shapes(params.fem.rest_x, tets)
    share = jnp.repeat(v0 / 4.0, 4)
    return jax.ops.segment_sum(share, tets.reshape(-1), num_segments=n)


def _read_density(topology, params, state0) -> float:
    vol = np.asarray(particle_volumes(topology, params), np.float64)
    mass = np.asarray(params.particles.mass, np.float64)
    inside = vol > 0
    return float(mass[inside].sum() / vol[inside].sum()) if inside.any() else 1000.0


def _expand_density(exp, value):
    # Every particle of a soft body gets density x its volume; the others (cloth, anchors) keep their mass.
    vol = particle_volumes(exp.topology, exp.params)
    return {"particles.mass": jnp.where(vol > 0, value * vol, exp.params.particles.mass)}


def density_field_coordinates(topology, params):
    """(particle volumes [n], s [n, 3]): the rest positions of the soft bodies' particles relative to their
    volume-weighted centroid, over the largest such distance (|s| <= 1; 0 for particles of no tet)."""
    vol = particle_volumes(topology, params)
    x = params.fem.rest_x
    soft = vol > 0
    centroid = jnp.sum(vol[:, None] * x, 0) / jnp.maximum(jnp.sum(vol), 1e-30)
    r = jnp.where(soft[:, None], x - centroid, 0.0)
    reach = jnp.max(jnp.sqrt(jnp.sum(r * r, 1)))
    return vol, r / jnp.maximum(reach, 1e-30)


def _read_density_field(topology, params, state0):
    """The field whose masses come closest to the scene's (least squares on log(mass / volume) over the soft
    particles): exact when the masses are a field's (one density: [log density, 0, 0, 0])."""
    vol, s = (np.asarray(a, np.float64) for a in density_field_coordinates(topology, params))
    mass = np.asarray(params.particles.mass, np.float64)
    soft = (vol > 0) & (mass > 0)
    if not soft.any():
        return np.array([np.log(1000.0), 0.0, 0.0, 0.0])
    design = np.concatenate([np.ones((int(soft.sum()), 1)), s[soft]], axis=1)
    return np.linalg.lstsq(design, np.log(mass[soft] / vol[soft]), rcond=None)[0]


def _expand_density_field(exp, value):
    # density(s) = exp(value[0] + value[1:] . s), s the rest position scaled to the body (|s| <= 1).
    vol, s = density_field_coordinates(exp.topology, exp.params)
    density = jnp.exp(value[0] + s @ value[1:])
    return {"particles.mass": jnp.where(vol > 0, density * vol, exp.params.particles.mass)}


for _q in (
    _tet_quantity("fem_mu", "fem.k_mu", "Pa", "FEM shear modulus k_mu (Lame mu) of every tet",
                  aliases=("k_mu", "tet_k_mu")),
    _tet_quantity("fem_lambda", "fem.k_lambda", "Pa", "FEM volume modulus k_lambda (Lame lambda) of every tet",
                  aliases=("k_lambda", "tet_k_lambda")),
    _tet_quantity("fem_damping", "fem.k_damp", "Pa s", "FEM damping k_damp of every tet",
                  aliases=("fem_damp", "k_damp", "tet_k_damp")),
    Quantity("particle_mass", "particles.mass", "kg", "log", ("particle_mass", "particle_masses", "masses"),
             "the mass of every particle [n] (each its own; `mass` scales them all alike)",
             read=lambda topology, params, state0: np.asarray(params.particles.mass),
             expand=lambda exp, value: {"particles.mass": value}, file_type="float[]", auto=False),
    Quantity("density", "particles.mass", "kg/m^3", "log", ("density", "fem_density"),
             "density of the soft bodies: each particle's mass = density x its volume (FemParams.particle_volume: "
             "the sum of V0 / 4 over its tets, or a whole grid cell)", read=_read_density, expand=_expand_density,
             applies=_has_tets),
    Quantity("density_field", "particles.mass", "log(kg/m^3), 1", "identity", ("density_field",),
             "a density varying across the soft bodies, [4]: log density(s) = value[0] + value[1:] . s, s the "
             "rest position from the volume-weighted centroid over the largest such distance; each particle's "
             "mass = density(s) x its volume", read=_read_density_field, expand=_expand_density_field,
             applies=_has_tets, file_type="float[4]"),
):
    register(_q)
del _q
