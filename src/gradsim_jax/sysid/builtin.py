"""The quantities of the built-in components, registered: the cloth's (particles, membrane, bending, aerodynamics,
ground contact), the camera pose and the render blur, the rigid bodies' (mass, contact coefficients, restitution,
shape) and the FEM soft bodies' (Lame parameters, damping, per-particle masses, density and a density field), the
world's gravity, the pendulums', the bouncing balls' and the smoke's. A new component registers its own the same way
(`registry.register`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.fit.transforms import Bounded
from gradsim_jax.physics import get_path
from gradsim_jax.physics.ball import BallSystem
from gradsim_jax.physics.pendulum import PendulumSystem
from gradsim_jax.sysid.registry import Quantity, register

Array = Any


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
             read=_read_path("cloth.tri_ke"), expand=_expand_stiffness, key="tri_ke",
             applies=lambda topology: topology.cloth.membrane),
    Quantity("damping", "cloth.tri_kd", "N s/m", "log", ("damping", "tri_kd", "cloth.tri_kd"),
             "membrane damping k_damp (tri_kd)", read=_read_path("cloth.tri_kd"), expand=_broadcast("cloth.tri_kd"),
             key="tri_kd", applies=lambda topology: topology.cloth.membrane),
    Quantity("bending", "cloth.bend_ke", "N m/rad", "log", ("bending", "bend_ke", "cloth.bend_ke", "edge_ke"),
             "bending stiffness (bend_ke)", read=_read_path("cloth.bend_ke"), expand=_broadcast("cloth.bend_ke"),
             key="bend_ke"),
    Quantity("drag", "cloth.tri_drag", "N s^2/m^4", "log", ("drag", "tri_drag", "cloth.tri_drag"),
             "aerodynamic drag coefficient", read=_read_path("cloth.tri_drag"), expand=_broadcast("cloth.tri_drag"),
             key="tri_drag"),
    Quantity("lift", "cloth.tri_lift", "N s^2/m^4", "log", ("lift", "tri_lift", "cloth.tri_lift"),
             "aerodynamic lift coefficient", read=_read_path("cloth.tri_lift"), expand=_broadcast("cloth.tri_lift"),
             key="tri_lift"),
    Quantity("spring_stiffness", "springs.ke", "N/m", "log", ("spring_stiffness", "spring_ke", "springs.ke"),
             "stiffness of every spring (a scene file's springs along the mesh edges, [material] spring_ke: "
             "Blender's structural springs)", read=_read_path("springs.ke"), expand=_broadcast("springs.ke"),
             applies=lambda topology: topology.springs.pairs.shape[0] > 0, key="spring_ke"),
    Quantity("spring_damping", "springs.kd", "N s/m", "log", ("spring_damping", "spring_kd", "springs.kd"),
             "damping of every spring along its length ([material] spring_kd)", read=_read_path("springs.kd"),
             expand=_broadcast("springs.kd"), applies=lambda topology: topology.springs.pairs.shape[0] > 0,
             key="spring_kd"),
    Quantity("air_damping", "particles.damping", "1/s", "log", ("air_damping", "particles.damping"),
             "linear air damping of every particle's velocity (acceleration -c v, the same for every mass): a "
             "viscous medium, as Blender's cloth damps with air; drag is the quadratic, per-face kind",
             read=_read_path("particles.damping"), expand=_broadcast("particles.damping"), key="air_damping"),
    Quantity("wind", "wind.strength", "Pa", "log", ("wind", "wind_strength", "wind.strength"),
             "the wind's pressure on a face square to it ([wind] strength; its keyed factors and direction stay)",
             read=_read_path("wind.strength"), expand=lambda exp, value: {"wind.strength": value},
             applies=lambda topology: topology.wind, key=""),
    Quantity("particle_radius", "particles.radius", "m", "log", ("particle_radius", "contact_thickness",
                                                                  "particles.radius"),
             "the particles' contact radius: how far off the ground and the colliders contact holds them (another "
             "engine's collision distance; starts at [scene] particle_radius)",
             read=_read_path("particles.radius"), expand=_broadcast("particles.radius"), key=""),
    Quantity("friction", "contact.mu", "1", "log", ("friction", "contact_mu", "contact.mu", "mu"),
             "ground friction coefficient of the particles",
             read=lambda topology, params, state0: float(np.asarray(params.contact.mu)),
             expand=lambda exp, value: {"contact.mu": value}, key="contact_mu"),
    Quantity("camera_pose", "camera", "rad, m", "identity", ("camera_pose", "pose"),
             "camera pose (rvec [3] rad, tvec [3] m; OpenCV world-to-camera) when only roughly known",
             container="camera", key=""),
    Quantity("albedo", "render.albedo", "1", Bounded(0.0, 1.0), ("albedo", "texture"),
             "albedo RGB of every face [F, 3] (the renderer's colours before shading), read from the "
             "video's first frame and refined ([render] appearance = \"video\"; a nuisance quantity)",
             container="render", key="", auto=False),
    Quantity("ambient", "render.ambient", "1", "log", ("ambient", "light_ambient"),
             "ambient light intensity ([render] ambient; fitted with [render] appearance = \"video\")",
             container="render", key="", auto=False),
    Quantity("directional", "render.directional", "1", "log", ("directional", "light_directional"),
             "directional light intensity ([render] directional; fitted with [render] appearance = \"video\")",
             container="render", key="", auto=False),
    Quantity("light_direction", "render.light_direction", "1", "identity", ("light_direction",),
             "direction towards the directional light [3] (normalized on use; fitted with [render] appearance "
             "= \"video\")", container="render", key="", auto=False),
    Quantity("shadow", "render.shadow", "1", Bounded(0.0, 1.0), ("shadow", "shadow_strength"),
             "the share of the light the meshes' shadow on the ground holds back (render.shadows; [render] "
             "shadows = true, with appearance = \"video\")", container="render", key="", auto=False),
    Quantity("shadow_blur", "render.shadow_blur", "px", "log", ("shadow_blur",),
             "the softness of that shadow, a Gaussian's standard deviation in pixels (a sun's disc, a rough floor)",
             container="render", key="", auto=False),
    Quantity("blur", "render.blur", "px", "log", ("blur", "psf"),
             "Gaussian blur of the rendered frames, standard deviation in pixels of the render: a lens's point "
             "spread, or another renderer's softer edges (a nuisance quantity; [fit] blur)", container="render",
             key=""),
):
    register(_q)
del _q


# --------------------------------------------------------------------------------------------------
# Static colliders (physics/colliders.py): a scalar sets every collider alike, a [k] array each collider
# --------------------------------------------------------------------------------------------------


def _has_colliders(topology) -> bool:
    return topology.colliders is not None and len(topology.colliders.kinds) > 0


for _name, _field, _unit, _doc in (
        ("collider_ke", "ke", "N/m", "contact stiffness of the colliders (penalty model, with the particles)"),
        ("collider_kd", "kd", "N s/m", "contact damping of the colliders (on approach)"),
        ("collider_kf", "kf", "N s/m", "friction stiffness of the colliders (viscous slope below the Coulomb limit)"),
        ("collider_mu", "mu", "1", "Coulomb friction coefficient of the particles on the colliders")):
    register(Quantity(_name, "colliders." + _field, _unit, "log", (_name, "colliders." + _field), _doc,
                      read=_read_path("colliders." + _field), expand=_broadcast("colliders." + _field),
                      applies=_has_colliders))
del _name, _field, _unit, _doc


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
    neighbours along the edges of the faces (a closed mesh lists each edge once each way, so every neighbour
    counts twice and the mean is unchanged); traceable. A vertex of no face counts 0.

    Args:
        offsets: [m, 3] m, the offset of each vertex.
        faces: [f, 3] int, the triangles' vertex indices (into offsets).

    Returns:
        scalar m^2, the mean squared difference.
    """
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
    lumped V0 / 4 shares by default, a whole cell for Warp's grids; 0 for particles of no tet); traceable.

    Args:
        topology: the scene's Topology (not read; the signature of the volume functions).
        params: the scene's Params (its `fem.particle_volume`).

    Returns:
        [n] m^3, each particle's volume.
    """
    return params.fem.particle_volume


def lumped_volumes(topology, params):
    """Per-particle lumped rest volume [n] (m^3): the sum of V0 / 4 over the particle's tets, V0 from the
    rest shape `params.fem.rest_x` (a particle of no tet: 0); traceable. density x this = the lumped mass
    (`geometry.tets.lumped_masses`).

    Args:
        topology: the scene's Topology (its `fem.tets`, [k, 4] particle indices).
        params: the scene's Params (rest positions `fem.rest_x` [n, 3] m; the particle count from `particles.mass`).

    Returns:
        [n] m^3, each particle's lumped rest volume.
    """
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
    volume-weighted centroid, over the largest such distance (|s| <= 1; 0 for particles of no tet).

    Args:
        topology: the scene's Topology.
        params: the scene's Params (per-particle volumes and rest positions `fem.rest_x` [n, 3] m).

    Returns:
        ([n] m^3 volumes, [n, 3] dimensionless scaled positions).
    """
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


# --------------------------------------------------------------------------------------------------
# The world's gravity, and ODE bodies (physics/ode.py): pendulums, per link [p, k] (a scalar sets every link)
# --------------------------------------------------------------------------------------------------


def _expand_gravity(exp, value):
    return {"world.gravity": exp.params.world.gravity.at[1].set(value)}


register(Quantity("gravity", "world.gravity", "m/s^2", "identity", ("gravity", "g", "world.gravity"),
                  "the world's gravity along y (negative: down; gradSim's g = -9), every component feels it",
                  read=lambda topology, params, state0: float(np.asarray(params.world.gravity)[1]),
                  expand=_expand_gravity, auto=False, key=""))


def _has_pendulums(topology) -> bool:
    return topology.ode is not None and isinstance(topology.ode.system, PendulumSystem)


def _pendulum_quantity(name: str, path: str, unit: str, doc: str, aliases=()) -> Quantity:
    """A per-link Params leaf of the pendulums, read whole ([p, k]); a scalar sets every link, a list of k
    values each link (scene files: "float|float[]")."""
    return Quantity(name, path, unit, "log", (name, *aliases), doc,
                    read=lambda topology, params, state0: np.asarray(get_path(params, path)),
                    expand=_broadcast(path), applies=_has_pendulums, file_type="float|float[]")


for _q in (
    _pendulum_quantity("pendulum_length", "ode.length", "m", "length of each pendulum link [p, k]"),
    _pendulum_quantity("bob_mass", "ode.mass", "kg", "mass of each pendulum bob [p, k]"),
    _pendulum_quantity("pendulum_damping", "ode.damping", "N m s/rad",
                       "viscous damping of each pendulum joint [p, k]"),
):
    register(_q)
del _q


# Bouncing balls (physics/ball.py): one value for every ball


def _has_balls(topology) -> bool:
    return topology.ode is not None and isinstance(topology.ode.system, BallSystem)


def _speed(state0) -> float:
    return float(np.linalg.norm(np.asarray(state0.ode.v).reshape(-1, 3)[0]))


def _expand_ball_speed(exp, value):
    v = exp.state0.ode.v
    speed = jnp.linalg.norm(v, axis=-1, keepdims=True)
    return {"state.ode.v": v / jnp.where(speed > 0, speed, 1.0) * value}


for _q in (
    Quantity("ball_speed", "ode.v", "m/s", "log", ("ball_speed", "launch_speed"),
             "initial speed of each ball along its initial direction",
             read=lambda topology, params, state0: _speed(state0),
             expand=_expand_ball_speed, applies=_has_balls),
    Quantity("ball_restitution", "ode.restitution", "1", Bounded(0.0, 1.0), ("ball_restitution",),
             "coefficient of restitution of the balls' impacts, in [0, 1]",
             read=lambda topology, params, state0: _first(params.ode.restitution),
             expand=_broadcast("ode.restitution"), applies=_has_balls),
    Quantity("ball_friction", "ode.friction", "1", "log", ("ball_friction",),
             "Coulomb friction of the balls with the ground (at impacts and while resting)",
             read=lambda topology, params, state0: _first(params.ode.friction),
             expand=_broadcast("ode.friction"), applies=_has_balls),
):
    register(_q)
del _q


# Smoke (physics/smoke.py): the grid's parameters (scalars, or a field of the grid's shape) and its initial velocity


def _has_smoke(topology) -> bool:
    return topology.smoke is not None


def _smoke_quantity(name: str, field: str, unit: str, transform, doc: str, aliases=()) -> Quantity:
    path = f"smoke.{field}"
    return Quantity(name, path, unit, transform, (name, path, *aliases), doc,
                    read=lambda topology, params, state0: np.asarray(get_path(params, path)),
                    expand=lambda exp, value: {path: value}, applies=_has_smoke)


def _read_smoke_velocity(topology, params, state0):
    return np.stack([np.asarray(state0.smoke.u), np.asarray(state0.smoke.v)])


for _q in (
    _smoke_quantity("smoke_buoyancy", "buoyancy", "m/s^2 per unit density", "log",
                    "upward acceleration of the smoke per unit density", ("buoyancy",)),
    _smoke_quantity("inflow_rate", "inflow_rate", "density/s", "log",
                    "smoke added per second where the inflow mask is 1", ("smoke_inflow_rate",)),
    _smoke_quantity("smoke_dissipation", "dissipation", "1/s", "softplus",
                    "exponential decay rate of the smoke's density"),
    _smoke_quantity("smoke_vorticity", "vorticity", "1", "softplus", "vorticity confinement eps"),
    Quantity("smoke_velocity", "smoke.u", "m/s", "identity", ("smoke_velocity",),
             "the smoke's initial velocity field (u, v) on the grid's faces [2, ny, nx]",
             read=_read_smoke_velocity, expand=lambda exp, value: {"smoke.u": value[0], "smoke.v": value[1]},
             container="state", applies=_has_smoke, key="", auto=False),
):
    register(_q)
del _q
