"""[wind]: a uniform wind that pushes the cloth's faces (`physics.wind`), its strength keyed in time: `read_wind` ->
`WindOptions` (or None without one), and `add_wind`, the built trees with it."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from gradsim_jax.physics import wind_params, with_wind
from gradsim_jax.physics.wind import EASES
from gradsim_jax.scenefile.schema import SceneFileError


@dataclasses.dataclass(frozen=True)
class WindOptions:
    """[wind] read and checked.

    Attributes:
        direction: [3] where the wind blows to, in the scene's world axes (unit length).
        strength: Pa, the pressure on a face square to the wind at factor 1.
        key_times: keyframe times of the strength, s, increasing (empty: the strength throughout).
        key_factors: the strength's factor at each key time.
        ease: "smooth" or "linear", the interpolation between two keys.
    """

    direction: tuple
    strength: float
    key_times: tuple
    key_factors: tuple
    ease: str


def read_wind(spec) -> Optional[WindOptions]:
    """[wind] as `WindOptions` (the one reader of the section), or None when the file gives no strength.

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `WindOptions`, or None.

    Raises:
        SceneFileError: naming the key, for a missing or zero direction, a negative strength, keys that do not
            increase, key_factors not one per key time, an unknown ease, or wind keys without a strength.
    """
    w, path = spec.sections.wind, spec.path
    if w.strength is None:
        if w.direction is not None or w.key_times or w.key_factors:
            raise SceneFileError(f"{path}: [wind] needs strength (the pressure, Pa) with its other keys")
        return None
    if w.direction is None:
        raise SceneFileError(f"{path}: [wind] direction is required with strength (where the wind blows to)")
    d = np.asarray(w.direction, np.float64)
    if not np.linalg.norm(d) > 0:
        raise SceneFileError(f"{path}: [wind] direction must be a nonzero vector, got {list(w.direction)}")
    if w.strength < 0:
        raise SceneFileError(f"{path}: [wind] strength must be a pressure >= 0 (Pa), got {w.strength}")
    times, factors = list(w.key_times), list(w.key_factors)
    if len(times) != len(factors):
        raise SceneFileError(f"{path}: [wind] key_factors needs one factor per key time: {len(times)}, got "
                             f"{len(factors)}")
    if any(b <= a for a, b in zip(times, times[1:])):
        raise SceneFileError(f"{path}: [wind] key_times must increase, got {times}")
    if w.ease not in EASES:
        raise SceneFileError(f"{path}: [wind] ease must be one of {', '.join(EASES)}, got {w.ease!r}")
    return WindOptions(direction=tuple(float(v) for v in d / np.linalg.norm(d)), strength=float(w.strength),
                       key_times=tuple(float(t) for t in times), key_factors=tuple(float(f) for f in factors),
                       ease=w.ease)


def add_wind(spec, topology, params):
    """The built trees with the file's wind (`physics.with_wind`); unchanged without [wind].

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology`.
        params: the built scene's `Params`.

    Returns:
        (topology, params).

    Raises:
        SceneFileError: for a bad [wind] (`read_wind`), or a wind in a scene without a cloth.
    """
    wind = read_wind(spec)
    if wind is None:
        return topology, params
    dtype = np.asarray(params.particles.mass).dtype
    built = wind_params(wind.direction, wind.strength, wind.key_times, wind.key_factors, wind.ease, dtype=dtype)
    try:
        return with_wind(topology, params, built)
    except ValueError as e:
        raise SceneFileError(f"{spec.path}: [wind]: {e} (give [scene] grid or mesh)") from e
