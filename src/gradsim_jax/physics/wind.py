"""Wind: a uniform air stream that pushes a cloth's faces along their normals, its strength keyed in time.

The model is the one Blender's cloth takes from a wind force field (a wind effector seen by the cloth modifier),
restated in SI units and written here from its description. A triangle of area A and unit normal n, in a wind
blowing along the unit direction w with pressure p(t), feels

    f = p(t) (w . n) A n,

a third of it on each of its vertices (the wind is uniform over the face). The sign of n cancels (it enters
twice), so the winding of the triangles does not matter; a face edge-on to the wind (w . n = 0) feels nothing,
and the push falls as a hanging cloth tilts away from the wind. The force does not depend on the cloth's velocity:
it models a field that blows (Blender's wind with its `flow` 0), not the air's resistance to a moving cloth (that
is `cloth.tri_drag` and the particles' linear `damping`).

Blender's units. Blender's cloth solver works in frame units and its wind field gives each vertex the vector
S w / fps (S the field's `strength`; `vel_to_sec` = fps for a cloth); the cloth turns it into a face force
0.02 A (w . n) n S / fps (its `effector_scale` 0.02), in kg m per frame^2, i.e. times fps^2 in newtons. With the
cloth's vertex mass taken in kg, Blender's strength S is therefore the pressure

    p = 0.02 fps S  Pa          (`blender_pressure`; S = 1500 at 30 fps: 900 Pa),

and the fit's effective value absorbs what differs (another mass, another solver).

The strength over time: p(t) = strength factor(t), with factor interpolated between keyframes (key_times [K] s,
key_factors [K]) and held before the first key and after the last (no keys: the strength throughout). Between two
keys the ease is "smooth", u^2 (3 - 2 u) of the segment's fraction u (the curve Blender's default keyframes, Bezier
with auto-clamped handles, give between two keys, and at a key that is a local extreme or a plateau), or "linear".
The integrator evaluates it at each step's start time (`wind_forces(..., t)`), so the keys need not fall on frames.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from gradsim_jax.mathutil import key_segment, safe_div, safe_norm
from gradsim_jax.physics.gather import gather_corners, scatter_corners
from gradsim_jax.typing import Array, pytree_dataclass

#: The eases between two keys.
EASES = ("smooth", "linear")


@pytree_dataclass(meta=("ease",))
class WindParams:
    """A uniform wind (module docstring): direction [3] (where it blows to; normalized on use), strength () Pa (the
    pressure on a face square to it at factor 1; a fit's quantity `wind`), key_times [K] s (increasing; K = 0: the
    strength throughout), key_factors [K] (the strength's factor at each key) and ease (static: "smooth" or
    "linear")."""

    direction: Array
    strength: Array
    key_times: Array
    key_factors: Array
    ease: str = "smooth"


def wind_params(direction, strength, key_times=(), key_factors=(), ease: str = "smooth", dtype=jnp.float32):
    """A checked `WindParams`.

    Args:
        direction: [3], where the wind blows to (any length but 0).
        strength: Pa, the pressure on a face square to the wind at factor 1.
        key_times: [K] s, increasing keyframe times (empty: the strength throughout).
        key_factors: [K], the strength's factor at each key time.
        ease: "smooth" or "linear", the interpolation between two keys.
        dtype: the float dtype of the leaves.

    Returns:
        The `WindParams`.

    Raises:
        ValueError: for a zero or non-finite direction, a negative or non-finite strength, keys that do not
            increase, key_factors of another length than key_times, or an unknown ease.
    """
    d = jnp.asarray(direction, dtype).reshape(-1)
    times, factors = jnp.asarray(key_times, dtype).reshape(-1), jnp.asarray(key_factors, dtype).reshape(-1)
    if d.shape != (3,) or not bool(jnp.all(jnp.isfinite(d))) or not bool(jnp.any(d != 0)):
        raise ValueError(f"wind direction must be a finite nonzero 3-vector, got {list(map(float, d))}")
    if not (float(strength) >= 0.0 and bool(jnp.isfinite(strength))):
        raise ValueError(f"wind strength must be a finite pressure >= 0 (Pa), got {float(strength)}")
    if times.shape != factors.shape:
        raise ValueError(f"wind key_factors needs one factor per key time: {times.shape[0]}, got {factors.shape[0]}")
    if not bool(jnp.all(jnp.isfinite(times))) or not bool(jnp.all(jnp.isfinite(factors))) or (
            times.shape[0] > 1 and not bool(jnp.all(jnp.diff(times) > 0))):
        raise ValueError(f"wind key_times must be finite and increasing (and key_factors finite), got "
                         f"{[float(t) for t in times]}")
    if ease not in EASES:
        raise ValueError(f"wind ease must be one of {', '.join(EASES)}, got {ease!r}")
    return WindParams(direction=d, strength=jnp.asarray(strength, dtype), key_times=times, key_factors=factors,
                      ease=ease)


def blender_pressure(strength, fps):
    """The pressure of a Blender wind field on a cloth (module docstring): 0.02 fps S.

    Args:
        strength: S, the field's `strength` in Blender's units.
        fps: 1/s, the scene's frame rate (Blender's cloth works in frames).

    Returns:
        Pa, the pressure `WindParams.strength` takes for it.
    """
    return 0.02 * fps * strength


def wind_factor(wind: WindParams, t):
    """The strength's factor at time t: the keys interpolated with the wind's ease, held outside them.

    Args:
        wind: the `WindParams` (key_times [K] s, key_factors [K], ease).
        t: s, the time (a scalar, may be traced).

    Returns:
        () the factor (1 without keys).
    """
    times, factors = wind.key_times, wind.key_factors
    if times.shape[0] == 0:
        return jnp.ones((), wind.strength.dtype)
    if times.shape[0] == 1:
        return factors[0]
    i, u = key_segment(times, t)
    if wind.ease == "smooth":
        u = u * u * (3.0 - 2.0 * u)
    return factors[i] + (factors[i + 1] - factors[i]) * u


def face_wind_forces(x, triangles, direction, pressure, incidence=None):
    """The wind's push on every vertex: p (w . n) A n of each triangle, a third on each of its corners.

    Args:
        x: [n, 3] m, particle positions.
        triangles: [t, 3] int, the faces' corner indices.
        direction: [3], where the wind blows to (normalized here).
        pressure: () Pa, the pressure on a face square to the wind.
        incidence: the triangles' `corner_incidence` table [K, n] int32, or None (scatter-add).

    Returns:
        [n, 3] N, the force on each particle (0 on a particle in no triangle).
    """
    w = safe_div(direction, safe_norm(direction))
    corners = gather_corners(x, triangles, incidence)  # [t, 3, 3]
    cross = jnp.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])  # 2 A n
    # p (w . n) A n = p (w . c) c / (2 |c|), c = 2 A n: no division by a vanishing area's norm twice.
    scale = pressure * safe_div(cross @ w, 2.0 * safe_norm(cross))
    per_corner = jnp.broadcast_to((scale[:, None] * cross / 3.0)[:, None, :], corners.shape)
    return scatter_corners(per_corner, triangles, x.shape[0], incidence)


def wind_forces(topology, params, x, t):
    """The wind's force on the cloth's particles at time t (`Topology.wind`; the integrator adds it).

    Args:
        topology: the scene's `Topology`; uses `cloth.triangles` [t, 3] and `cloth.tri_incidence`.
        params: the scene's `Params`; uses `wind` (`WindParams`).
        x: [n, 3] m, particle positions.
        t: s, the time (the step's start).

    Returns:
        [n, 3] N, the force on each particle.
    """
    wind = params.wind
    pressure = wind.strength * wind_factor(wind, t)
    return face_wind_forces(x, topology.cloth.triangles, wind.direction, pressure, topology.cloth.tri_incidence)


def with_wind(topology, params, wind: WindParams):
    """The scene's trees with a wind: `Topology.wind` set and `Params.wind` the given one.

    Args:
        topology: the scene's `Topology` (it must have the cloth's triangles the wind pushes).
        params: the scene's `Params`.
        wind: the `WindParams` (`wind_params`).

    Returns:
        (topology, params).

    Raises:
        ValueError: when the scene has no triangles for the wind to push.
    """
    if topology.cloth.triangles.shape[0] == 0:
        raise ValueError("a wind pushes a cloth's faces, and the scene has no cloth triangles")
    return dataclasses.replace(topology, wind=True), dataclasses.replace(params, wind=wind)
