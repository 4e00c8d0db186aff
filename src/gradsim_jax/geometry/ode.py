"""Host-side builders of ODE bodies (`physics.ode`) as `Scene` pieces: pendulums (`physics.pendulum`), bouncing balls
(`physics.ball`) and a user's own system (`ode_body`). Each returns a `Scene` with no particles and its `ode` set;
combine it with other pieces (one ODE body per scene) and `build` it as any scene."""

from __future__ import annotations

import dataclasses

import numpy as np

from gradsim_jax.geometry.primitives import sphere_mesh
from gradsim_jax.geometry.scene import Scene, particles
from gradsim_jax.physics.ball import BallParams, BallState, BallSystem, validate_balls
from gradsim_jax.physics.ode import OdeSystem
from gradsim_jax.physics.pendulum import PendulumParams, PendulumState, PendulumSystem, validate_pendulums

#: The colours bobs are drawn in, link by link (red, blue, green, yellow), by the demos and scene files.
BOB_COLORS = ((0.9, 0.25, 0.2), (0.2, 0.45, 0.9), (0.2, 0.75, 0.3), (0.9, 0.75, 0.2))
#: Subdivisions of a bob's icosphere (42 vertices, 80 faces: round enough at the sizes a fit renders).
BOB_SUBDIVISIONS = 1


def ode_body(system: OdeSystem, params, y0) -> Scene:
    """A user's ODE body as a `Scene` piece: its system (`physics.ode.OdeSystem`, e.g. a `FunctionOde`), its
    parameters (any pytree of arrays) and its initial state y0 (a pytree).

    Args:
        system: the `physics.ode.OdeSystem` (TypeError otherwise).
        params: any pytree of arrays, the system's parameters.
        y0: a pytree, the system's initial state.

    Returns:
        A `Scene` piece with no particles and its `ode` set to (system, params, y0).
    """
    if not isinstance(system, OdeSystem):
        raise TypeError(f"ode_body: system must be a physics.ode.OdeSystem (e.g. FunctionOde), got {type(system)}")
    return dataclasses.replace(particles(np.zeros((0, 3))), ode=(system, params, y0))


def pendulum(lengths, masses, theta, *, omega=0.0, damping=0.0, pivot=(0.0, 0.0, 0.0), bob_radius=0.1,
             rod_radius=0.02) -> Scene:
    """A pendulum of k = len(lengths) links as a `Scene` (`physics.pendulum`): link lengths [k] m, bob masses
    [k] kg, initial angles theta [k] rad from the downward vertical (counter-clockwise seen from +z), initial
    angular velocities omega [k] rad/s, joint damping [k] N m s/rad, the pivot [3] m, bob radii [k] m (drawn
    as spheres) and rod half widths [k] m (square rods; 0: none). One link: the simple pendulum; two: the
    double pendulum. It swings in the x-y plane. Each per-link value may be one number for every link.

    Args:
        lengths: [k] m, link lengths (one number: one link).
        masses: [k] kg, bob masses.
        theta: [k] rad, initial angles from the downward vertical (counter-clockwise seen from +z).
        omega: [k] rad/s, initial angular velocities.
        damping: [k] N m s/rad, joint damping.
        pivot: [3] m, the pivot.
        bob_radius: [k] m, bob radii (drawn as spheres).
        rod_radius: [k] m, rod half widths (square rods; 0: none).

    Returns:
        A `Scene` piece with no particles and its `ode` set to the pendulum.
    """
    lengths = np.atleast_1d(np.asarray(lengths, np.float64))
    if lengths.ndim != 1:
        raise ValueError(f"pendulum lengths must be one value per link, got shape {lengths.shape}")
    k = lengths.shape[0]

    def per_link(value, name):
        a = np.asarray(value, np.float64)
        if a.ndim == 0:
            a = np.full(k, float(a))
        if a.shape != (k,):
            raise ValueError(f"pendulum {name} needs one value per link ({k}), got shape {np.shape(value)}")
        return a[None].copy()

    template, faces = sphere_mesh(1.0, BOB_SUBDIVISIONS, fit="vertices")
    piv = np.asarray(pivot, np.float64)
    if piv.shape != (3,):
        raise ValueError(f"pendulum pivot must be [3] m, got shape {piv.shape}")
    params = PendulumParams(length=lengths[None].copy(), mass=per_link(masses, "masses"),
                            damping=per_link(damping, "damping"), pivot=piv[None].copy(),
                            bob_radius=per_link(bob_radius, "bob_radius"), bob_shape=np.asarray(template),
                            rod_radius=per_link(rod_radius, "rod_radius"))
    state = PendulumState(theta=per_link(theta, "theta"), omega=per_link(omega, "omega"))
    validate_pendulums(params, state)
    system = PendulumSystem(bob_faces=tuple(map(tuple, np.asarray(faces, int).tolist())))
    return ode_body(system, params, state)


def balls(x, v=0.0, *, radius=0.5, restitution=0.8, friction=0.0) -> Scene:
    """Bouncing balls with exact impacts as a `Scene` (`physics.ball`): centres x [b, 3] (or [3]) m, velocities
    v [b, 3] (or [3], or one number for every component) m/s, radius, restitution in [0, 1] and Coulomb friction
    (one each, or [b]). They bounce on the world's ground plane (`build(ground_height=...)`) under its gravity.
    A ball in a vertical plane is one whose velocity has no component out of it.

    Args:
        x: [b, 3] (or [3]) m, ball centres.
        v: [b, 3] (or [3], or one number for every component) m/s, velocities.
        radius: m, one value or [b].
        restitution: in [0, 1], one value or [b].
        friction: the Coulomb friction coefficient (dimensionless), one value or [b].

    Returns:
        A `Scene` piece with no particles and its `ode` set to the balls.
    """
    x = np.atleast_2d(np.asarray(x, np.float64))
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"balls: x must be [b, 3] (or [3]) m, got shape {np.shape(x)}")
    b = x.shape[0]

    def per_ball(value, name, shape):
        a = np.asarray(value, np.float64)
        try:
            return np.broadcast_to(a, shape).copy()
        except ValueError:
            raise ValueError(f"balls: {name} must be one value or {list(shape)}, got shape {a.shape}") from None

    template, faces = sphere_mesh(1.0, BOB_SUBDIVISIONS, fit="vertices")
    params = BallParams(radius=per_ball(radius, "radius", (b,)), restitution=per_ball(restitution, "restitution", (b,)),
                        friction=per_ball(friction, "friction", (b,)), shape=np.asarray(template))
    state = BallState(x=x.copy(), v=per_ball(v, "v", (b, 3)))
    validate_balls(params, state)
    return ode_body(BallSystem(sphere_faces=tuple(map(tuple, np.asarray(faces, int).tolist()))), params, state)
