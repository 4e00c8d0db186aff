"""Bouncing balls with exact impacts: an ODE body (`physics.ode`) whose events are solved, not stepped.

Each of b balls (radius r [b] m) flies under the world's gravity g and bounces on the world's ground plane
(`World.ground_height` h along `World.ground_normal` n, which must be parallel to gravity). Between impacts its
motion is the exact ballistic arc, x(t) = x + v t + g t^2 / 2, so the time of the next impact is a root of a
quadratic, d(t) = d + (n.v) t + (n.g) t^2 / 2 = 0 with d = n.x - h - r, found in closed form inside the
step (the stable root of the quadratic formula). At the impact the ball's centre is put on the plane and
its velocity changes by an impulse:

    normal:      v_n' = -e v_n                                    (coefficient of restitution e [b] in [0, 1])
    tangential:  v_t' = v_t max(0, 1 - mu (1 + e) |v_n| / |v_t|)  (Coulomb friction mu [b] >= 0 over the impact)

and it flies on for the rest of the step (up to `EVENTS` impacts a step). Everything is a smooth function of
the parameters and the initial state between changes of the number of impacts: the impact time moves with
them, and its derivative is the implicit one, d t* = -(d d) / (n.v(t*)). A ball whose bounce would rise less
than `REST_HEIGHT` comes to rest on the plane and slides, its speed falling by mu |g| per second until it
stops. The ball does not spin (friction only slows it); drag is not modelled.

Its state y = `BallState` (x, v [b, 3]), its parameters `BallParams`; rendered as a sphere per ball.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.ode import OdeSystem, check_shapes, check_values
from gradsim_jax.typing import pytree_dataclass

Array = Any

#: Impacts a step resolves (a ball about to rest bounces fast; more than this in one step rest it).
EVENTS = 3
#: A bounce that would rise less than this (m) rests the ball on the plane instead (no Zeno cascade).
REST_HEIGHT = 1e-5


@pytree_dataclass
class BallParams:
    """radius [b] m (> 0), restitution [b] in [0, 1], friction [b] >= 0 (Coulomb, at impacts and while
    resting), shape [s, 3]: the unit sphere a ball is drawn as."""

    radius: Array
    restitution: Array
    friction: Array
    shape: Array


@pytree_dataclass
class BallState:
    """x [b, 3] m (centres), v [b, 3] m/s."""

    x: Array
    v: Array


def _impact_time(d, vn, gn):
    """Time [b] until d + vn t + gn t^2 / 2 = 0 is next crossed downwards (gn < 0; inf when never): the larger
    root, by the stable quadratic formula; 0 for a ball already below the plane and moving down."""
    disc = jnp.maximum(vn * vn - 2.0 * gn * d, 0.0)
    root = jnp.sqrt(disc)
    q = -0.5 * (vn + jnp.where(vn >= 0, root, -root))
    safe_q = jnp.where(q == 0, 1.0, q)
    t = jnp.where(vn >= 0, q / (0.5 * gn), d / safe_q)
    t = jnp.where(q == 0, jnp.inf, t)
    return jnp.where((d <= 0) & (vn < 0), 0.0, jnp.maximum(t, 0.0))


def _dot(a, n):
    return jnp.sum(a * n, axis=-1)


def _length(a):
    """|a| over the last axis, with a zero (not NaN) derivative at a = 0 (a ball friction has stopped)."""
    sq = jnp.sum(a * a, axis=-1)
    return jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)


def ball_step(params: BallParams, world, state: BallState, h) -> BallState:
    """The balls' state after h seconds: exact arcs, up to `EVENTS` impacts, resting balls slide.

    Args:
        params: the balls' parameters (radius [b] m, restitution [b], friction [b]).
        world: the scene's World (gravity [3] m/s^2, ground_normal [3], ground_height m).
        state: the balls' state at the start (x [b, 3] m, v [b, 3] m/s).
        h: () s, the length of the step.

    Returns:
        The BallState after the step.
    """
    g = world.gravity
    n = world.ground_normal / jnp.linalg.norm(world.ground_normal)
    gn = _dot(g, n)
    e, mu, r = params.restitution, params.friction, params.radius
    v_rest = jnp.sqrt(2.0 * REST_HEIGHT * -gn)
    x, v = state.x, state.v
    remaining = jnp.broadcast_to(jnp.asarray(h, x.dtype), r.shape)
    for _ in range(EVENTS):
        d = _dot(x, n) - world.ground_height - r
        vn = _dot(v, n)
        resting = (d <= 1e-6 * (1.0 + r)) & (jnp.abs(vn) <= v_rest)
        t_hit = _impact_time(d, vn, gn)
        hit = ~resting & (t_hit <= remaining)
        t = jnp.where(resting, 0.0, jnp.where(hit, t_hit, remaining))[:, None]
        x = x + v * t + 0.5 * g * t * t
        v = v + g * t
        remaining = jnp.where(resting, remaining, remaining - t[:, 0])
        # The impact: onto the plane, the impulse on the normal and (friction) the tangential velocity.
        vn = _dot(v, n)
        tangent = v - vn[:, None] * n
        speed = _length(tangent)
        kept = jnp.maximum(0.0, 1.0 - mu * (1.0 + e) * jnp.abs(vn) / jnp.where(speed > 0, speed, 1.0))
        bounce = -e * vn
        bounce = jnp.where(bounce < v_rest, 0.0, bounce)
        after = tangent * kept[:, None] + bounce[:, None] * n
        on_plane = x - (_dot(x, n) - world.ground_height - r)[:, None] * n
        x = jnp.where(hit[:, None], on_plane, x)
        v = jnp.where(hit[:, None], after, v)
    # What is left of the step: resting balls slide against friction, the others fly on.
    d = _dot(x, n) - world.ground_height - r
    resting = (d <= 1e-6 * (1.0 + r)) & (jnp.abs(_dot(v, n)) <= v_rest)
    tangent = v - _dot(v, n)[:, None] * n
    speed = _length(tangent)
    decel = mu * -gn
    stop = jnp.where(decel > 0, speed / jnp.where(decel > 0, decel, 1.0), jnp.inf)
    ts = jnp.minimum(remaining, stop)
    direction = tangent / jnp.where(speed > 0, speed, 1.0)[:, None]
    slid = x + direction * (speed * ts - 0.5 * decel * ts * ts)[:, None]
    slid_v = direction * jnp.maximum(speed - decel * ts, 0.0)[:, None]
    t = remaining[:, None]
    flown, flown_v = x + v * t + 0.5 * g * t * t, v + g * t
    return BallState(x=jnp.where(resting[:, None], slid, flown), v=jnp.where(resting[:, None], slid_v, flown_v))


def ball_trajectory(params: BallParams, world, state0: BallState, frames: int, substeps: int, dt) -> BallState:
    """The balls' state at every frame (frames + 1, the first state0), `substeps` exact steps of dt a frame.

    Args:
        params: the balls' parameters (radius [b] m, restitution [b], friction [b]).
        world: the scene's World (gravity [3] m/s^2, ground_normal [3], ground_height m).
        state0: the balls' initial state (x [b, 3] m, v [b, 3] m/s).
        frames: the number of frames after the first (static).
        substeps: exact steps per frame (static).
        dt: () s, the length of one step (a frame lasts substeps x dt).

    Returns:
        A BallState whose leaves have a leading axis of frames + 1 (x [frames + 1, b, 3] m, v ... m/s).
    """

    def frame(state, _):
        state = jax.lax.fori_loop(0, substeps, lambda i, s: ball_step(params, world, s, dt), state)
        return state, state

    _, traj = jax.lax.scan(frame, state0, None, length=frames)
    return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), state0, traj)


def validate_balls(params: BallParams, state: BallState, world=None) -> None:
    """ValueError naming the field and index of a bad value: radius > 0, restitution in [0, 1], friction >= 0,
    finite positions and velocities; gravity must point into the ground (parallel to its normal).

    Args:
        params: the balls' parameters (`Params.ode`), concrete.
        state: the balls' state (`State.ode`), concrete.
        world: the scene's World whose gravity and ground normal are checked; None skips that check.
    """
    b = np.shape(params.radius)
    if len(b) != 1:
        raise ValueError(f"Params.ode.radius must be [b] (one per ball), got shape {b}")
    check_shapes("Params.ode", params, {"restitution": b, "friction": b})
    check_shapes("State.ode", state, {"x": (b[0], 3), "v": (b[0], 3)})
    check_values("Params.ode", params, {"radius": "> 0", "restitution": (0.0, 1.0), "friction": ">= 0"})
    check_values("State.ode", state, {"x": "finite", "v": "finite"})
    if world is not None:
        g, n = np.asarray(world.gravity, np.float64), np.asarray(world.ground_normal, np.float64)
        n = n / np.linalg.norm(n)
        if not np.dot(g, n) < 0 or np.linalg.norm(np.cross(g, n)) > 1e-9 * np.linalg.norm(g):
            raise ValueError(f"a bouncing ball needs gravity into its ground: World.gravity = {g.tolist()} is not "
                             f"along -ground_normal = {(-n).tolist()}")


@dataclasses.dataclass(frozen=True)
class BallSystem(OdeSystem):
    """Bouncing balls as an ODE body: y = `BallState`, params = `BallParams`; sphere_faces: the triangles of
    one ball's sphere over `BallParams.shape` (static). Its motion (`trajectory`) is `ball_trajectory`:
    exact, whatever the `OdeSolver` (the field, y' = (v, g), holds only between impacts)."""

    sphere_faces: tuple
    coordinates = ("x", "v")
    energy_unit = "J/kg"

    def field(self, t, y, params, world):
        """The field y' = (v, g) between impacts: the velocities and the world's gravity for every ball.

        Args:
            t: () s, the time (unused: the field is autonomous).
            y: the balls' state (x [b, 3] m, v [b, 3] m/s).
            params: the balls' parameters (unused).
            world: the scene's World (gravity [3] m/s^2).

        Returns:
            A BallState of the rates (x: [b, 3] m/s, v: [b, 3] m/s^2).
        """
        return BallState(x=y.v, v=jnp.broadcast_to(world.gravity, y.v.shape))

    def trajectory(self, params, world, y0, ts, dt0, solver, steps):
        """The balls' state at the times ts: `ball_trajectory` with steps / (T - 1) exact steps of dt0 a frame,
        whatever the solver.

        Args:
            params: the balls' parameters.
            world: the scene's World (gravity, ground).
            y0: the initial BallState.
            ts: [T] s, the frame times, the first that of y0 (only their count T is read: the frames are
                steps / (T - 1) steps of dt0 apart).
            dt0: () s, the length of one exact step.
            solver: the scene's OdeSolver (unused: the motion is exact).
            steps: the total number of steps over the T - 1 frames (at least one a frame).

        Returns:
            A BallState whose leaves have a leading axis of T.
        """
        frames = ts.shape[0] - 1
        return ball_trajectory(params, world, y0, frames, max(steps // max(frames, 1), 1), dt0)

    def vertices(self, params, y):
        """Render vertices [b s, 3] m: each ball's sphere (`BallParams.shape` scaled by its radius) at its centre.

        Args:
            params: the balls' parameters (radius [b] m, shape [s, 3]).
            y: the balls' state (x [b, 3] m).

        Returns:
            [b s, 3] m, the vertices, ball by ball.
        """
        return (y.x[:, None, :] + params.radius[:, None, None] * params.shape[None]).reshape(-1, 3)

    def faces(self, params, y):
        """Faces [b f, 3] int32 over `vertices`: `sphere_faces` repeated for every ball (host side).

        Args:
            params: the balls' parameters (radius [b] and shape [s, 3] give the counts).
            y: the balls' state (unused).

        Returns:
            [b f, 3] int32 numpy array of vertex indices.
        """
        sphere = np.asarray(self.sphere_faces, np.int32).reshape(-1, 3)
        per_ball = int(np.shape(params.shape)[0])
        return np.concatenate([sphere + b * per_ball for b in range(int(np.size(params.radius)))]).astype(np.int32)

    def validate(self, params, y, world):
        """ValueError naming the field of a bad concrete value (`validate_balls`).

        Args:
            params: the balls' parameters.
            y: the balls' state.
            world: the scene's World (gravity must point into the ground).
        """
        validate_balls(params, y, world)

    def energy(self, params, world, y):
        """Kinetic + potential energy per unit mass [b] J/kg (zero potential at the ground's height).

        Args:
            params: the balls' parameters (unused: the energy is per unit mass).
            world: the scene's World (gravity [3] m/s^2, ground_normal, ground_height m).
            y: the balls' state (x [b, 3] m, v [b, 3] m/s).

        Returns:
            [b] J/kg, each ball's energy.
        """
        n = world.ground_normal / jnp.linalg.norm(world.ground_normal)
        return 0.5 * jnp.sum(y.v ** 2, -1) - jnp.sum(world.gravity * n) * (_dot(y.x, n) - world.ground_height)

    def conservative(self, params):
        """Perfectly elastic, frictionless impacts: the energy is then a constant of the motion.

        Args:
            params: the balls' parameters.

        Returns:
            `params` with restitution 1 and friction 0 for every ball.
        """
        return dataclasses.replace(params, restitution=jnp.ones_like(params.restitution),
                                   friction=jnp.zeros_like(params.friction))
