"""[pendulum] and [[ball]]: a scene file's ODE body (`physics.ode`), a pendulum of len(lengths) links or
bouncing balls, as a `Scene` piece (one of the two per file), and the colours of its faces."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.ode import BOB_COLORS, balls, pendulum
from gradsim_jax.scenefile.schema import SceneFileError

@dataclasses.dataclass(frozen=True)
class OdeBody:
    """[pendulum] or [[ball]] read: the file's ODE body.

    Attributes:
        piece: a host-side `Scene` piece holding the pendulum or the balls (`geometry.ode`), or None without
            either.
        pendulum: whether it is a pendulum (else balls, or nothing).
        colors: RGB in [0, 1] of each bob (link by link: [pendulum] color, else `BOB_COLORS`) or of each ball
            ([[ball]] color, or None for the faces' own).
    """

    piece: object
    pendulum: bool
    colors: tuple


def _has_pendulum(p) -> bool:
    """Whether the [pendulum] record `p` sets a key other than pivot, bob_radius and rod_radius (which have
    defaults)."""
    return any(getattr(p, f.name) is not None for f in dataclasses.fields(p)
               if f.name not in ("pivot", "bob_radius", "rod_radius"))


def read_ode_body(spec) -> OdeBody:
    """The file's ODE body: [pendulum] or [[ball]] tables (the one reader of both sections).

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        The `OdeBody` (its piece None without a pendulum or balls).

    Raises:
        SceneFileError: for both a pendulum and balls, or for a bad value, naming the key.
    """
    p, tables = spec.sections.pendulum, spec.sections.ball
    piece = _ode_piece(spec.path, p, tables)
    if _has_pendulum(p):
        colors = tuple(p.color or BOB_COLORS[b % len(BOB_COLORS)] for b in range(len(p.lengths)))
        return OdeBody(piece=piece, pendulum=True, colors=colors)
    return OdeBody(piece=piece, pendulum=False, colors=tuple(t.color for t in tables))


def _ode_piece(path, p, tables):
    """The `Scene` piece of the [pendulum] record `p` or the [[ball]] records `tables`, or None (SceneFileError
    naming `path` and the key)."""
    if _has_pendulum(p) and tables:
        raise SceneFileError(f"{path}: a scene holds one ODE body: a [pendulum] or [[ball]] tables, not both")
    if _has_pendulum(p):
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
    if tables:
        for i, t in enumerate(tables):
            if t.pos is None:
                raise SceneFileError(f"{path}: [[ball]] {i}: missing key 'pos'")
        field = lambda key: np.asarray([getattr(t, key) for t in tables], np.float64)  # noqa: E731
        try:
            return balls(field("pos"), field("velocity"), radius=field("radius"), restitution=field("restitution"),
                         friction=field("friction"))
        except ValueError as e:
            raise SceneFileError(f"{path}: [[ball]]: {e}") from None
    return None


def ode_face_colors(ode: OdeBody, topology, rgb: np.ndarray, first: int) -> None:
    """Colour the ODE body's faces in rgb [F, 3] (its faces start at `first`): each bob its link's colour
    ([pendulum] color, else `BOB_COLORS`), the rods dark grey; each ball its [[ball]] color, if given.

    Args:
        ode: the file's `OdeBody` (`read_ode_body`).
        topology: the built scene's `Topology` (nothing is done when its `ode` is None).
        rgb: [F, 3] float RGB in [0, 1] of every face of the scene, changed in place.
        first: index in `rgb` of the ODE body's first face.
    """
    if topology.ode is None:
        return
    system = topology.ode.system
    count = len(np.asarray(topology.ode.faces).reshape(-1, 3))
    if ode.pendulum:
        per_bob = len(system.bob_faces)
        rgb[first:first + count] = 0.35
        for b, color in enumerate(ode.colors):
            rgb[first + b * per_bob:first + (b + 1) * per_bob] = color
        return
    per_ball = len(system.sphere_faces)
    for b, color in enumerate(ode.colors):
        if color is not None:
            rgb[first + b * per_ball:first + (b + 1) * per_ball] = color
