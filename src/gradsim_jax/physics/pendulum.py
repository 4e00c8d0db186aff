"""Pendulums: chains of point masses on rigid massless rods, written as an ODE in their joint angles and
integrated with Diffrax (the simple pendulum is a chain of one link, gradSim's double pendulum one of two).

A scene holds p pendulums of k links each (one k per scene). Pendulum i hangs from `pivot[i]` and swings in
the vertical x-y plane; link j makes the angle theta[i, j] with the downward vertical (counter-clockwise,
seen from +z) and has length `length[i, j]` m; its bob is a point mass `mass[i, j]` kg at its end, drawn as
a sphere of radius `bob_radius[i, j]` m. Joint j has a viscous damping `damping[i, j]` N m s/rad on the
relative angular velocity of link j against link j - 1 (the pivot's for j = 0).

Equations (Lagrange, generalized coordinates theta): with M_j = sum_{m >= j} mass_m (the mass hanging from
link j),

    sum_j M_{max(i,j)} l_i l_j cos(theta_i - theta_j) theta_j''
        = - sum_j M_{max(i,j)} l_i l_j sin(theta_i - theta_j) omega_j^2 - M_i g l_i sin(theta_i) + Q_i,

with the damping's generalized forces Q_i = -c_i (omega_i - omega_{i-1}) + c_{i+1} (omega_{i+1} - omega_i).
For one link this is theta'' = -(g / l) sin(theta) - c / (m l^2) omega; for two it is the textbook double
pendulum. g is the magnitude of the world's gravity along -y (`Params.world.gravity[1] = -g`); pendulums
refuse gravity with x or z components, which would leave their plane.

The system does not interact with the other components (no contact): it is an ODE body
(`physics.ode`): `PendulumSystem` is its `OdeSystem`, `PendulumParams` its `Params.ode` and `PendulumState`
its `State.ode`, solved by Diffrax (`physics.ode.OdeSolver`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.ode import OdeSystem, check_shapes, check_values
from gradsim_jax.typing import pytree_dataclass

Array = Any


@pytree_dataclass
class PendulumParams:
    """length [p, k] m, mass [p, k] kg (> 0), damping [p, k] N m s/rad (>= 0) per joint, pivot [p, 3] m,
    bob_radius [p, k] m and rod_radius [p, k] m (rendering only: each bob a sphere, each link a square rod of
    that half width; 0: no rod), bob_shape [s, 3]: the unit sphere a bob is drawn as."""

    length: Array
    mass: Array
    damping: Array
    pivot: Array
    bob_radius: Array
    bob_shape: Array
    rod_radius: Array


@pytree_dataclass
class PendulumState:
    """theta [p, k] rad (from the downward vertical), omega [p, k] rad/s."""

    theta: Array
    omega: Array


def accelerations(params: PendulumParams, g, theta: Array, omega: Array) -> Array:
    """theta'' [p, k] of the chains at (theta, omega) under gravity g m/s^2 (module docstring).

    Args:
        params: the pendulums' parameters (length [p, k] m, mass [p, k] kg, damping [p, k] N m s/rad).
        g: () m/s^2, the magnitude of gravity along -y.
        theta: [p, k] rad, the links' angles from the downward vertical.
        omega: [p, k] rad/s, their angular velocities.

    Returns:
        [p, k] rad/s^2, the angular accelerations.
    """
    l, m, c = params.length, params.mass, params.damping
    k = theta.shape[-1]
    hanging = jnp.flip(jnp.cumsum(jnp.flip(m, -1), -1), -1)  # M_j = sum_{m >= j} mass_m, [p, k]
    idx = jnp.arange(k)
    big = hanging[:, jnp.maximum(idx[:, None], idx[None, :])]  # M_{max(i, j)}, [p, k, k]
    diff = theta[:, :, None] - theta[:, None, :]
    ll = l[:, :, None] * l[:, None, :]
    mass_matrix = big * ll * jnp.cos(diff)
    rhs = -jnp.sum(big * ll * jnp.sin(diff) * (omega ** 2)[:, None, :], axis=-1) - hanging * g * l * jnp.sin(theta)
    rel = omega - jnp.concatenate([jnp.zeros_like(omega[:, :1]), omega[:, :-1]], axis=-1)  # omega_j - omega_{j-1}
    torque = c * rel
    q = -torque + jnp.concatenate([torque[:, 1:], jnp.zeros_like(torque[:, :1])], axis=-1)
    return jnp.linalg.solve(mass_matrix, (rhs + q)[..., None])[..., 0]


def bob_positions(params: PendulumParams, theta: Array) -> Array:
    """World positions [p, k, 3] m of the bobs at angles theta [p, k].

    Args:
        params: the pendulums' parameters (length [p, k] m, pivot [p, 3] m).
        theta: [p, k] rad, the links' angles from the downward vertical.

    Returns:
        [p, k, 3] m, the bobs' positions (z that of the pivot).
    """
    dx = params.length * jnp.sin(theta)
    dy = -params.length * jnp.cos(theta)
    offsets = jnp.stack([jnp.cumsum(dx, -1), jnp.cumsum(dy, -1), jnp.zeros_like(dx)], axis=-1)
    return params.pivot[:, None, :] + offsets


def energy(params: PendulumParams, g, state: PendulumState) -> Array:
    """Total mechanical energy [p] J of each pendulum (kinetic + potential, zero at the pivot's height).

    Args:
        params: the pendulums' parameters (length [p, k] m, mass [p, k] kg).
        g: () m/s^2, the magnitude of gravity along -y.
        state: the pendulums' state (theta [p, k] rad, omega [p, k] rad/s).

    Returns:
        [p] J, the energy of each pendulum.
    """
    l, m = params.length, params.mass
    vx = jnp.cumsum(l * jnp.cos(state.theta) * state.omega, -1)
    vy = jnp.cumsum(l * jnp.sin(state.theta) * state.omega, -1)
    y = jnp.cumsum(-l * jnp.cos(state.theta), -1)
    return jnp.sum(0.5 * m * (vx ** 2 + vy ** 2) + m * g * y, -1)


#: A rod's 8 corners in its own frame: (along the link from 0 to 1, across in the plane, across along z).
ROD_SHAPE = np.array([[a, b, c] for a in (0.0, 1.0) for b in (-1.0, 1.0) for c in (-1.0, 1.0)])
#: Its 12 triangles, wound outwards (corner index = 4 a + 2 (b > 0) + (c > 0)).
ROD_FACES = np.array([[0, 2, 3], [0, 3, 1], [4, 5, 7], [4, 7, 6], [0, 1, 5], [0, 5, 4], [2, 6, 7], [2, 7, 3],
                      [0, 4, 6], [0, 6, 2], [1, 3, 7], [1, 7, 5]], np.int32)


def bob_vertices(params: PendulumParams, theta: Array) -> Array:
    """Render vertices [p k s + p k 8, 3] m (theta [p, k]): every bob's sphere at its position, then every
    link's rod from its joint to its bob.

    Args:
        params: the pendulums' parameters (length, pivot, bob_radius, bob_shape [s, 3], rod_radius).
        theta: [p, k] rad, the links' angles from the downward vertical.

    Returns:
        [p k s + p k 8, 3] m, the bobs' vertices then the rods' corners.
    """
    centres = bob_positions(params, theta)
    bobs = centres[:, :, None, :] + params.bob_radius[:, :, None, None] * params.bob_shape[None, None]
    starts = jnp.concatenate([params.pivot[:, None, :], centres[:, :-1]], axis=1)  # [p, k, 3]
    along = jnp.stack([jnp.sin(theta), -jnp.cos(theta), jnp.zeros_like(theta)], -1) * params.length[..., None]
    across = jnp.stack([jnp.cos(theta), jnp.sin(theta), jnp.zeros_like(theta)], -1) * params.rod_radius[..., None]
    depth = jnp.broadcast_to(jnp.asarray([0.0, 0.0, 1.0], theta.dtype), across.shape) * params.rod_radius[..., None]
    shape = jnp.asarray(ROD_SHAPE, theta.dtype)
    rods = (starts[:, :, None, :] + shape[None, None, :, 0:1] * along[:, :, None, :]
            + shape[None, None, :, 1:2] * across[:, :, None, :] + shape[None, None, :, 2:3] * depth[:, :, None, :])
    return jnp.concatenate([bobs.reshape(-1, 3), rods.reshape(-1, 3)], axis=0)


def validate_pendulums(params: PendulumParams, state: PendulumState, gravity=None) -> None:
    """ValueError naming the field and index of a bad pendulum value (host side, concrete values): shapes
    [p, k] alike, length and mass > 0, damping, bob_radius and rod_radius >= 0, every value finite; gravity
    along -y.

    Args:
        params: the pendulums' parameters (`Params.ode`), concrete.
        state: the pendulums' state (`State.ode`), concrete.
        gravity: [3] m/s^2, the world's gravity (must have no x or z component); None skips that check.
    """
    shape = np.shape(params.length)
    if len(shape) != 2 or shape[1] < 1:
        raise ValueError(f"Params.ode.length must be [p, k] (k >= 1 links), got shape {shape}")
    check_shapes("Params.ode", params, {n: shape for n in ("mass", "damping", "bob_radius", "rod_radius")}
                 | {"pivot": (shape[0], 3)})
    check_shapes("State.ode", state, {"theta": shape, "omega": shape})
    check_values("Params.ode", params, {"length": "> 0", "mass": "> 0", "damping": ">= 0", "bob_radius": ">= 0",
                                        "rod_radius": ">= 0", "pivot": "finite"})
    check_values("State.ode", state, {"theta": "finite", "omega": "finite"})
    if gravity is not None:
        g = np.asarray(gravity, np.float64)
        if g[0] != 0 or g[2] != 0:
            raise ValueError(f"pendulums swing in the x-y plane under gravity along -y; World.gravity = {g.tolist()} "
                             "has x or z components")


@dataclasses.dataclass(frozen=True)
class PendulumSystem(OdeSystem):
    """The pendulums as an ODE body (`physics.ode`): y = `PendulumState`, params = `PendulumParams`;
    bob_faces: the triangles of one bob's sphere over `PendulumParams.bob_shape` (a tuple of index triples,
    static)."""

    bob_faces: tuple
    coordinates = ("theta", "omega")
    pose_period = 2.0 * np.pi

    def field(self, t, y, params, world):
        """The field (theta', omega') = (omega, `accelerations`) under the world's gravity along -y.

        Args:
            t: () s, the time (unused: the field is autonomous).
            y: the pendulums' state (theta [p, k] rad, omega [p, k] rad/s).
            params: the pendulums' parameters.
            world: the scene's World (gravity [3] m/s^2, along -y).

        Returns:
            A PendulumState of the rates (theta: [p, k] rad/s, omega: [p, k] rad/s^2).
        """
        return PendulumState(theta=y.omega, omega=accelerations(params, -world.gravity[1], y.theta, y.omega))

    def vertices(self, params, y):
        """Render vertices (`bob_vertices`) at state y.

        Args:
            params: the pendulums' parameters.
            y: the pendulums' state (theta [p, k] rad).

        Returns:
            [p k s + p k 8, 3] m, the bobs' vertices then the rods' corners.
        """
        return bob_vertices(params, y.theta)

    def faces(self, params, y):
        """Faces [F, 3] int32 over `vertices`: `bob_faces` for every bob, then `ROD_FACES` for every rod (host side).

        Args:
            params: the pendulums' parameters (length [p, k] and bob_shape [s, 3] give the counts).
            y: the pendulums' state (unused).

        Returns:
            [F, 3] int32 numpy array of vertex indices.
        """
        sphere = np.asarray(self.bob_faces, np.int32).reshape(-1, 3)
        per_bob = int(np.shape(params.bob_shape)[0])
        bobs = int(np.size(params.length))
        parts = [sphere + b * per_bob for b in range(bobs)]
        parts += [ROD_FACES + bobs * per_bob + 8 * b for b in range(bobs)]
        return np.concatenate(parts).astype(np.int32)

    def validate(self, params, y, world):
        """ValueError naming the field of a bad concrete value (`validate_pendulums`).

        Args:
            params: the pendulums' parameters.
            y: the pendulums' state.
            world: the scene's World (its gravity must lie along -y).
        """
        validate_pendulums(params, y, world.gravity)

    def energy(self, params, world, y):
        """Total mechanical energy [p] J of each pendulum.

        Args:
            params: the pendulums' parameters (length [p, k] m, mass [p, k] kg).
            world: the scene's World (gravity [3] m/s^2, along -y).
            y: the pendulums' state (theta [p, k] rad, omega [p, k] rad/s).

        Returns:
            [p] J, the energy of each pendulum (zero potential at the pivot's height).
        """
        return energy(params, -world.gravity[1], y)

    def conservative(self, params):
        """No joint damping: the total energy is then a constant of the motion.

        Args:
            params: the pendulums' parameters.

        Returns:
            `params` with damping 0 at every joint.
        """
        return dataclasses.replace(params, damping=jnp.zeros_like(params.damping))
