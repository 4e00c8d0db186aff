"""[pendulum] and [[ball]]: a scene file's ODE body (`physics.ode`), a pendulum of len(lengths) links or
bouncing balls, as a `Scene` piece (one of the two per file), and the colours of its faces."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.ode import BOB_COLORS, balls, pendulum
from gradsim_jax.scenefile.schema import SceneFileError

def has_pendulum(spec) -> bool:
    """Whether the file has a [pendulum] table.

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        True when a [pendulum] key other than pivot, bob_radius and rod_radius (which have defaults) is set.
    """
    return any(getattr(spec.sections.pendulum, f.name) is not None for f in dataclasses.fields(spec.sections.pendulum)
               if f.name not in ("pivot", "bob_radius", "rod_radius"))


def read_ode_body(spec):
    """The file's ODE body as a `Scene` piece, or None: [pendulum] or [[ball]] tables (SceneFileError for both,
    or for a bad value, naming the key).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        A host-side `Scene` piece holding the pendulum or the balls (`geometry.ode`), or None without either.
    """
    path = spec.path
    if has_pendulum(spec) and spec.sections.ball:
        raise SceneFileError(f"{path}: a scene holds one ODE body: a [pendulum] or [[ball]] tables, not both")
    if has_pendulum(spec):
        p = spec.sections.pendulum
        for key in ("lengths", "theta"):
            if getattr(p, key) is None:
                raise SceneFileError(f"{path}: missing key {key!r} in [pendulum]")
        k = len(p.lengths)
        for key in ("theta", "masses", "omega", "damping"):
            if getattr(p, key) is not None and len(getattr(p, key)) != k:
                raise SceneFileError(f"{path}: [pendulum] {key} needs one value per link ({k}, as lengths), got "
                                     f"{len(getattr(p, key))}")
        try:
            return pendulum(p.lengths, p.masses if p.masses is not None else 1.0, p.theta,
                            omega=p.omega if p.omega is not None else 0.0,
                            damping=p.damping if p.damping is not None else 0.0, pivot=p.pivot,
                            bob_radius=p.bob_radius, rod_radius=p.rod_radius)
        except ValueError as e:
            raise SceneFileError(f"{path}: [pendulum] {e}") from None
    if spec.sections.ball:
        for i, t in enumerate(spec.sections.ball):
            if t.pos is None:
                raise SceneFileError(f"{path}: [[ball]] {i}: missing key 'pos'")
        field = lambda key: np.asarray([getattr(t, key) for t in spec.sections.ball], np.float64)  # noqa: E731
        try:
            return balls(field("pos"), field("velocity"), radius=field("radius"), restitution=field("restitution"),
                         friction=field("friction"))
        except ValueError as e:
            raise SceneFileError(f"{path}: [[ball]]: {e}") from None
    return None


def ode_face_colors(spec, topology, rgb: np.ndarray, first: int) -> None:
    """Colour the ODE body's faces in rgb [F, 3] (its faces start at `first`): each bob its link's colour
    ([pendulum] color, else `BOB_COLORS`), the rods dark grey; each ball its [[ball]] color, if given.

    Args:
        spec: the validated scene file (`SceneSpec`).
        topology: the built scene's `Topology` (nothing is done when its `ode` is None).
        rgb: [F, 3] float RGB in [0, 1] of every face of the scene, changed in place.
        first: index in `rgb` of the ODE body's first face.
    """
    if topology.ode is None:
        return
    system = topology.ode.system
    count = len(np.asarray(topology.ode.faces).reshape(-1, 3))
    if has_pendulum(spec):
        p = spec.sections.pendulum
        per_bob, k = len(system.bob_faces), len(p.lengths)
        rgb[first:first + count] = 0.35
        for b in range(k):
            rgb[first + b * per_bob:first + (b + 1) * per_bob] = p.color or BOB_COLORS[b % len(BOB_COLORS)]
        return
    per_ball = len(system.sphere_faces)
    for b, t in enumerate(spec.sections.ball):
        if t.color is not None:
            rgb[first + b * per_ball:first + (b + 1) * per_ball] = t.color
