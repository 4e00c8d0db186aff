"""Rigid bodies with ground contact: containers, forces, one semi-implicit Euler step, momenta.

Conventions (PHYSICS.md, "Rigid bodies"): SI units, y up. A body has its centre of mass at x [3] m,
orientation q [4] (unit quaternion, wxyz, body to world, see `quaternion.py`), linear velocity v [3] m/s
and angular velocity w [3] rad/s in the WORLD frame. Its inertia about the COM in the body frame is
mass * gyration; in the world frame I_w = R (mass gyration) R^T. Hull vertices (body frame, relative to
the COM) are the contact points and the render vertices. Bodies of mass 0 are kinematic: the step leaves
their whole state unchanged.

Step (semi-implicit Euler, all forces at the current state; PHYSICS.md):
    v += dt (f / m + g);  w += dt I_w^-1 (tau - w x I_w w)  (gyroscopic term kept);
    [impulse contact, when Topology.contact == "impulse"];
    x += dt v;  q = normalize(q + dt/2 (0, w) q)  [then the impulse model's no-penetration projection].
The gyroscopic term is explicit, so a torque-free body keeps its world angular momentum only to O(dt)
(global): measured drift about 0.2 (dt |w|)^2 per step, relative; the kinetic energy creeps up alike.

Contact models (`RigidTopology.contact`):
- "penalty": every hull vertex below the plane (c = n . p - h < 0, no radius) gets the particle penalty
  force of PHYSICS.md ("Ground contact") at its world velocity v + w x r, via `penalty_force`; forces
  and torques r x f are summed per body. The viscous friction branch (kf) is explicit: it is stable for
  dt kf (vertices in contact) / m < 2; above that, the Coulomb clamp still bounds it (it chatters at
  |vt| ~ mu g dt instead of sticking).
- "impulse" (gradSim's restitution mode; impulses after Mirtich 1996 and Baraff 1997): after the
  velocity update, a hull vertex is in contact when it would be on or below the plane at the end of the
  step, c + dt min(v_n, 0) <= 0 (a speculative contact: bodies stop at the surface, not inside it, and
  rest up to about g dt^2 above it). Each contact vertex carries an accumulated normal impulse >= 0 that
  makes its normal velocity at least -e v_n (e = restitution) and a friction impulse inside the Coulomb
  cone mu x normal impulse that stops its tangential velocity; they are found by IMPULSE_SWEEPS fixed
  sweeps (no while loop), each a coarse correction (one impulse at the contact centroid split equally
  among the contact vertices, exact for the mean normal velocity: a box landing flat bounces with
  exactly -e v_n in one sweep) and a Jacobi correction relaxed by 1 / (contact count) for the tilts.
  Resting contact must not bounce: e is ramped from 0 to its value as the approach speed rises from
  v_rest to 2 v_rest, v_rest = RESTING_STEPS dt |g . n| (the speed gravity adds in a few steps).
  After the position update, a body whose deepest vertex lies below the plane is translated along n by
  that depth (a position projection: no velocity change, so no energy is added); nothing sinks. All of
  it is piecewise smooth in the state, e, mu and the masses.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_div, safe_norm, safe_normalize
from gradsim_jax.physics.bodycontact import body_body_loads, body_collider_loads, body_sizes
from gradsim_jax.physics.contact import penalty_force
from gradsim_jax.physics.quaternion import quat_multiply, quat_normalize, quat_to_matrix
from gradsim_jax.typing import Array, pytree_dataclass

#: The contact models a RigidTopology may name.
CONTACT_MODELS = ("none", "penalty", "impulse")

#: Approach speeds below RESTING_STEPS steps of gravity count as resting contact (no restitution).
RESTING_STEPS = 2.0

#: Jacobi sweeps of the impulse solver per step (a fixed count: differentiable, no while loop).
IMPULSE_SWEEPS = 8


@pytree_dataclass(meta=("contact", "collide", "particles"))
class RigidTopology:
    """vertex_body [m] int32: body of each hull vertex (all bodies' vertices concatenated);
    push_body [k] int32: body each push acts on; faces [f, 3] int32: the bodies' surface triangles, indices
    into the concatenated hull vertices (rendering, mass properties of a fitted shape, body contact);
    contact (static): the ground's model, "none", "penalty" or "impulse"; collide (static): the bodies meet
    each other (penalty, `physics.bodycontact`; their hulls must be closed and convex); particles (static): the
    particles meet the bodies (`physics.particle_body`; closed convex hulls too)."""

    vertex_body: Array
    push_body: Array
    faces: Array
    contact: str = "penalty"
    collide: bool = False
    particles: bool = False


@pytree_dataclass
class RigidControl:
    """Extra loads per body and step (a controller's): force [b, 3] N and torque [b, 3] N m, world frame,
    about the COM; None: none."""

    force: Optional[Array] = None
    torque: Optional[Array] = None


@pytree_dataclass
class RigidParams:
    """mass [b] kg (0: kinematic); gyration [b, 3, 3] m^2 (body-frame inertia about the COM / mass);
    vertices [m, 3] m (body frame, relative to the COM); contact_ke [b] N/m, contact_kd [b] N s/m,
    contact_kf [b] N s/m, contact_mu [b] (penalty material per body; mu also the impulse model's friction);
    restitution [b] (impulse model's e); push_force [k, 3] N (world frame), push_point [k, 3] m (body
    frame), push_start [k] s, push_end [k] s (active for push_start <= t < push_end)."""

    mass: Array
    gyration: Array
    vertices: Array
    contact_ke: Array
    contact_kd: Array
    contact_kf: Array
    contact_mu: Array
    restitution: Array
    push_force: Array
    push_point: Array
    push_start: Array
    push_end: Array


@pytree_dataclass
class RigidState:
    """x [b, 3] m (COM); q [b, 4] (wxyz, unit, body to world); v [b, 3] m/s; w [b, 3] rad/s (world)."""

    x: Array
    q: Array
    v: Array
    w: Array


def _num_bodies(params) -> int:
    return int(np.shape(params.mass)[0])


def _inverse_mass(mass):
    """1/m for free bodies and 0 for kinematic ones (mass 0), with a finite gradient at 0."""
    free = mass > 0.0
    return jnp.where(free, 1.0 / jnp.where(free, mass, jnp.ones_like(mass)), jnp.zeros_like(mass))


def _inverse_world_inertia(params, rotation):
    """I_w^-1 = R (m gyration)^-1 R^T [b, 3, 3]; 0 for kinematic bodies."""
    mass = params.mass
    free = (mass > 0.0)[:, None, None]
    body = mass[:, None, None] * params.gyration
    eye = jnp.broadcast_to(jnp.eye(3, dtype=body.dtype), body.shape)
    inverse = jnp.where(free, jnp.linalg.inv(jnp.where(free, body, eye)), jnp.zeros_like(body))
    return rotation @ inverse @ jnp.swapaxes(rotation, -1, -2)


def _hull_points(topology, params, state, rotation):
    """World offsets r = R r_body [m, 3] of the hull vertices from their COM, and their world points."""
    r = jnp.einsum("mij,mj->mi", rotation[topology.vertex_body], params.vertices)
    return r, state.x[topology.vertex_body] + r


def world_vertices(topology: RigidTopology, params: RigidParams, state: RigidState) -> Array:
    """Hull vertices in the world frame: x_b + R(q_b) r [m, 3] m.

    Args:
        topology: the bodies' topology (vertex_body [m] int32).
        params: the bodies' parameters (vertices [m, 3] m, body frame, relative to the COM).
        state: the bodies' state (x [b, 3] m, q [b, 4]).

    Returns:
        [m, 3] m, the hull vertices in the world frame.
    """
    return _hull_points(topology, params, state, quat_to_matrix(state.q))[1]


def world_inertia(params: RigidParams, state: RigidState) -> Array:
    """Inertia about the COM in the world frame, R (mass gyration) R^T: [b, 3, 3] kg m^2.

    Args:
        params: the bodies' parameters (mass [b] kg, gyration [b, 3, 3] m^2).
        state: the bodies' state (q [b, 4]).

    Returns:
        [b, 3, 3] kg m^2, the world-frame inertia tensors.
    """
    rotation = quat_to_matrix(state.q)
    body = params.mass[:, None, None] * params.gyration
    return rotation @ body @ jnp.swapaxes(rotation, -1, -2)


def linear_momentum(params: RigidParams, state: RigidState) -> Array:
    """m v: [b, 3] kg m/s.

    Args:
        params: the bodies' parameters (mass [b] kg).
        state: the bodies' state (v [b, 3] m/s).

    Returns:
        [b, 3] kg m/s, each body's linear momentum.
    """
    return params.mass[:, None] * state.v


def angular_momentum(params: RigidParams, state: RigidState) -> Array:
    """Angular momentum about the COM in the world frame, I_w w: [b, 3] kg m^2/s.

    Args:
        params: the bodies' parameters (mass [b] kg, gyration [b, 3, 3] m^2).
        state: the bodies' state (q [b, 4], w [b, 3] rad/s).

    Returns:
        [b, 3] kg m^2/s, each body's angular momentum.
    """
    return jnp.einsum("bij,bj->bi", world_inertia(params, state), state.w)


def kinetic_energy(params: RigidParams, state: RigidState) -> Array:
    """Translational plus rotational kinetic energy, m |v|^2 / 2 + w . I_w w / 2: [b] J.

    Args:
        params: the bodies' parameters (mass [b] kg, gyration [b, 3, 3] m^2).
        state: the bodies' state (q [b, 4], v [b, 3] m/s, w [b, 3] rad/s).

    Returns:
        [b] J, each body's kinetic energy.
    """
    spin = jnp.sum(state.w * angular_momentum(params, state), axis=-1)
    return 0.5 * (params.mass * jnp.sum(state.v * state.v, axis=-1) + spin)


def _push_loads(topology, params, state, rotation, t, b):
    """Force and torque [b, 3] of the pushes active at time t (push_start <= t < push_end)."""
    active = (params.push_start <= t) & (t < params.push_end)
    force = jnp.where(active[:, None], params.push_force, 0.0)
    r = jnp.einsum("kij,kj->ki", rotation[topology.push_body], params.push_point)
    torque = jnp.cross(r, force)
    seg = lambda a: jax.ops.segment_sum(a, topology.push_body, num_segments=b)
    return seg(force), seg(torque)


def _penalty_loads(topology, params, world, state, rotation, b):
    """Ground penalty force and torque [b, 3] summed over each body's hull vertices."""
    vb = topology.vertex_body
    n = safe_normalize(world.ground_normal)
    r, p = _hull_points(topology, params, state, rotation)
    velocity = state.v[vb] + jnp.cross(state.w[vb], r)
    f = penalty_force(n, p @ n - world.ground_height, velocity, params.contact_ke[vb], params.contact_kd[vb],
                      params.contact_kf[vb], params.contact_mu[vb], world.contact_smoothing)
    seg = lambda a: jax.ops.segment_sum(a, vb, num_segments=b)
    return seg(f), seg(jnp.cross(r, f))


def rigid_forces(topology: RigidTopology, params: RigidParams, world, state: RigidState, t: Array,
                 colliders=None):
    """World-frame force [b, 3] N and torque about the COM [b, 3] N m on each body at time t (s): active
    pushes (torque r x F at their body points), ground penalty contact when topology.contact is "penalty",
    the bodies' contacts with each other when topology.collide and with `colliders` ((ColliderTopology,
    ColliderParams) or None) (`physics.bodycontact`). Gravity is not a force here (the step adds it as an
    acceleration).

    Args:
        topology: the bodies' topology (vertex_body, push_body, faces, contact, collide).
        params: the bodies' parameters (mass, gyration, hull vertices, contact coefficients, pushes).
        world: the scene's World (ground_normal, ground_height m, contact_smoothing m).
        state: the bodies' state (x [b, 3] m, q [b, 4], v [b, 3] m/s, w [b, 3] rad/s).
        t: () s, the time (pushes act for push_start <= t < push_end).
        colliders: (ColliderTopology, ColliderParams) the hull vertices meet, or None.

    Returns:
        (force [b, 3] N, torque [b, 3] N m), world frame, about each COM.
    """
    b = _num_bodies(params)
    rotation = quat_to_matrix(state.q)
    force, torque = _push_loads(topology, params, state, rotation, t, b)
    if topology.contact == "penalty":
        f, tau = _penalty_loads(topology, params, world, state, rotation, b)
        force, torque = force + f, torque + tau
    if topology.collide and b > 1:
        f, tau = body_body_loads(topology, params, state, rotation, b, world.contact_smoothing)
        force, torque = force + f, torque + tau
    if colliders is not None and colliders[0] is not None and colliders[0].kinds:
        f, tau = body_collider_loads(colliders[0], colliders[1], topology, params, state, rotation, b,
                                     world.contact_smoothing)
        force, torque = force + f, torque + tau
    return force, torque


def _contact_impulses(topology, params, world, state, rotation, v, w, inv_m, inv_inertia, dt, b):
    """Velocities [b, 3] after the restitution and friction impulses of the "impulse" model.

    Accumulated impulses per contact vertex (normal >= 0, friction inside the Coulomb cone), found by a
    fixed number of sweeps; each sweep makes a coarse correction (one impulse at the contact centroid,
    split equally among the contact vertices: it settles the mean normal velocity exactly, the mode that
    plain Jacobi converges slowest) and a Jacobi correction relaxed by 1 / (contact count) (the tilts).
    """
    vb = topology.vertex_body
    n = safe_normalize(world.ground_normal)
    r, p = _hull_points(topology, params, state, rotation)

    def point_velocity(v, w):
        return v[vb] + jnp.cross(w[vb], r)

    def response(offset, axis, inv_m, inv_inertia):  # 1 / effective mass along `axis` at `offset`
        ra = jnp.cross(offset, axis)
        return inv_m + jnp.einsum("...i,...ij,...j->...", ra, inv_inertia, ra)

    def apply(v, w, impulse):  # impulse [m, 3] at the vertices
        linear = jax.ops.segment_sum(impulse, vb, num_segments=b)
        angular = jax.ops.segment_sum(jnp.cross(r, impulse), vb, num_segments=b)
        return v + inv_m[:, None] * linear, w + jnp.einsum("bij,bj->bi", inv_inertia, angular)

    def per_body_mean(a):
        return safe_div(jax.ops.segment_sum(a, vb, num_segments=b), count.reshape((b,) + (1,) * (a.ndim - 1)))

    vn0 = point_velocity(v, w) @ n
    c = p @ n - world.ground_height
    contact = c + dt * jnp.minimum(vn0, 0.0) <= 0.0
    count = jax.ops.segment_sum(contact.astype(r.dtype), vb, num_segments=b)
    share = jnp.where(contact, safe_div(jnp.ones_like(c), count[vb]), 0.0)
    approach = jnp.maximum(-vn0, 0.0)
    v_rest = RESTING_STEPS * dt * jnp.maximum(-(world.gravity @ n), 0.0)
    ramp = jnp.clip(safe_div(approach - v_rest, v_rest), 0.0, 1.0)
    target = params.restitution[vb] * jnp.where(v_rest > 0.0, ramp, 1.0) * approach  # vn' >= target
    mu = params.contact_mu[vb]
    centroid = per_body_mean(jnp.where(contact[:, None], r, 0.0))
    inv_inertia_v = inv_inertia[vb]
    normals = jnp.broadcast_to(n, r.shape)
    k_n = response(r, normals, inv_m[vb], inv_inertia_v)
    k_centroid = response(centroid, jnp.broadcast_to(n, centroid.shape), inv_m, inv_inertia)

    def push(v, w, jn, step):  # normal impulses += step, kept >= 0
        jn_new = jnp.where(contact, jnp.maximum(jn + step, 0.0), 0.0)
        v, w = apply(v, w, (jn_new - jn)[:, None] * n)
        return v, w, jn_new

    def rub(v, w, jn, jt, step):  # friction impulses += step [m, 3], kept inside the cone mu jn
        trial = jt + step
        length = safe_norm(trial)
        limit = mu * jn
        jt_new = jnp.where((length > limit)[:, None], trial * safe_div(limit, length)[:, None], trial)
        jt_new = jnp.where(contact[:, None], jt_new, 0.0)
        v, w = apply(v, w, jt_new - jt)
        return v, w, jt_new

    def tangential(v, w):
        vp = point_velocity(v, w)
        return vp - (vp @ n)[:, None] * n

    def sweep(carry, _):
        v, w, jn, jt = carry
        residual = jnp.where(contact, target - point_velocity(v, w) @ n, 0.0)
        v, w, jn = push(v, w, jn, share * safe_div(per_body_mean(residual), k_centroid)[vb])
        residual = target - point_velocity(v, w) @ n
        v, w, jn = push(v, w, jn, share * safe_div(residual, k_n))
        slip = per_body_mean(jnp.where(contact[:, None], tangential(v, w), 0.0))
        t_hat = safe_normalize(slip)
        coarse = safe_div(safe_norm(slip), response(centroid, t_hat, inv_m, inv_inertia))
        v, w, jt = rub(v, w, jn, jt, -(share * coarse[vb])[:, None] * t_hat[vb])
        slip = tangential(v, w)
        t_hat = safe_normalize(slip)
        fine = safe_div(safe_norm(slip), response(r, t_hat, inv_m[vb], inv_inertia_v))
        v, w, jt = rub(v, w, jn, jt, -(share * fine)[:, None] * t_hat)
        return (v, w, jn, jt), None

    carry = (v, w, jnp.zeros_like(c), jnp.zeros_like(r))
    (v, w, _, _), _ = jax.lax.scan(sweep, carry, None, length=IMPULSE_SWEEPS)
    return v, w


def _project_out_of_ground(topology, params, world, x, q, free, b):
    """Translate each free body along n by the depth of its deepest hull vertex below the plane."""
    vb = topology.vertex_body
    n = safe_normalize(world.ground_normal)
    r = jnp.einsum("mij,mj->mi", quat_to_matrix(q)[vb], params.vertices)
    depth = world.ground_height - (x[vb] + r) @ n
    deepest = jnp.maximum(jax.ops.segment_max(depth, vb, num_segments=b), 0.0)
    return x + jnp.where(free, deepest, 0.0)[:, None] * n


def rigid_step(topology: RigidTopology, params: RigidParams, world, state: RigidState, t: Array, dt: Array,
               force: Optional[Array] = None, torque: Optional[Array] = None, colliders=None) -> RigidState:
    """Advance the bodies by one semi-implicit Euler step of dt (s) from time t (s) (module docstring).

    Kinematic bodies (mass 0) keep their state. An empty component (b = 0) is returned unchanged.

    Args:
        topology: the bodies' topology (vertex_body, push_body, faces, contact, collide).
        params: the bodies' parameters (mass, gyration, hull vertices, contact coefficients, restitution,
            pushes).
        world: the scene's World (gravity [3] m/s^2, ground_normal, ground_height m, contact_smoothing m).
        state: the bodies' state at time t (x [b, 3] m, q [b, 4], v [b, 3] m/s, w [b, 3] rad/s).
        t: () s, the time at the start of the step.
        dt: () s, the step.
        force: [b, 3] N, world frame, an optional extra force on each COM (e.g. a controller's); None: none.
        torque: [b, 3] N m, world frame, an optional extra torque about each COM; None: none.
        colliders: (ColliderTopology, ColliderParams) the hull vertices meet, or None (`rigid_forces`).

    Returns:
        The RigidState at t + dt.
    """
    b = _num_bodies(params)
    if b == 0:
        return state
    f, tau = rigid_forces(topology, params, world, state, t, colliders)
    if force is not None:
        f = f + force
    if torque is not None:
        tau = tau + torque
    rotation = quat_to_matrix(state.q)
    inv_m = _inverse_mass(params.mass)
    inv_inertia = _inverse_world_inertia(params, rotation)
    free = params.mass > 0.0
    inertia = world_inertia(params, state)
    gyroscopic = jnp.cross(state.w, jnp.einsum("bij,bj->bi", inertia, state.w))
    v = state.v + dt * jnp.where(free[:, None], inv_m[:, None] * f + world.gravity, 0.0)
    w = state.w + dt * jnp.einsum("bij,bj->bi", inv_inertia, tau - gyroscopic)
    if topology.contact == "impulse":
        v, w = _contact_impulses(topology, params, world, state, rotation, v, w, inv_m, inv_inertia, dt, b)
    x = jnp.where(free[:, None], state.x + dt * v, state.x)
    spin = jnp.concatenate([jnp.zeros_like(w[:, :1]), w], axis=-1)
    q = jnp.where(free[:, None], quat_normalize(state.q + 0.5 * dt * quat_multiply(spin, state.q)), state.q)
    if topology.contact == "impulse":
        x = _project_out_of_ground(topology, params, world, x, q, free, b)
    return RigidState(x=x, q=q, v=v, w=w)


def rigid_contact_message(topology: RigidTopology, params: RigidParams, world, state: RigidState,
                          dt: Optional[float] = None) -> str:
    """Host-side check of the bodies' initial ground contact (and, given dt in s, of the penalty step):
    what is wrong and what to do, or "". Inputs must be concrete.

    A body whose hull starts more than 1 % of its size below the plane is thrown out (penalty) or lifted
    (impulse). The penalty spring of a free body resting on `RESTING_VERTICES` hull vertices is stable for
    dt^2 N ke / m + 2 dt N kd / m < 4, its friction for dt N kf / m < 2 (semi-implicit Euler).

    Args:
        topology: the bodies' topology (vertex_body, contact).
        params: the bodies' parameters (mass kg, hull vertices m, contact_ke N/m, contact_kd N s/m,
            contact_kf N s/m).
        world: the scene's World (ground_normal, ground_height m).
        state: the bodies' concrete initial state (x [b, 3] m, q [b, 4]).
        dt: s, the step to check against the penalty contact; None skips that check.

    Returns:
        The problems joined by "; ", or "" when there is none.
    """
    b = _num_bodies(params)
    if b == 0 or topology.contact == "none":
        return ""
    parts = []
    n = np.asarray(world.ground_normal, np.float64)
    n = n / np.linalg.norm(n)
    h = float(np.asarray(world.ground_height))
    vb = np.asarray(topology.vertex_body)
    r = np.einsum("mij,mj->mi", np.asarray(quat_to_matrix(jnp.asarray(state.q)), np.float64)[vb],
                  np.asarray(params.vertices, np.float64))
    height = (np.asarray(state.x, np.float64)[vb] + r) @ n - h
    size = body_sizes(vb, params.vertices, b)
    depth = np.zeros(b)
    np.maximum.at(depth, vb, -height)
    deep = depth > 0.01 * size
    if deep.any():
        i = int(np.argmax(depth / np.maximum(size, 1e-12)))
        parts.append(f"rigid body {i} starts {depth[i]:.3g} m below the ground (ground_height {h:.4g} m): place it "
                     "on or above the ground, or it is thrown out")
    mass = np.asarray(params.mass, np.float64)
    free = mass > 0
    if dt is not None and topology.contact == "penalty" and free.any():
        count = np.minimum(np.bincount(vb, minlength=b), RESTING_VERTICES)
        ke, kd, kf = (np.asarray(getattr(params, k), np.float64) for k in ("contact_ke", "contact_kd", "contact_kf"))
        spring = dt * dt * count * ke / np.where(free, mass, 1.0) + 2.0 * dt * count * kd / np.where(free, mass, 1.0)
        friction = dt * count * kf / np.where(free, mass, 1.0)
        bad = free & ((spring >= 4.0) | (friction >= 2.0))
        if bad.any():
            i = int(np.argmax(np.where(bad, np.maximum(spring / 4.0, friction / 2.0), 0.0)))
            factor = int(np.ceil(1.25 * max(spring[i] / 4.0, friction[i] / 2.0, np.sqrt(spring[i] / 4.0))))
            parts.append(
                f"the ground contact of rigid body {i} is too stiff for the time step: on {count[i]} contact "
                f"vertices, dt^2 N ke / m + 2 dt N kd / m = {spring[i]:.3g} (must be < 4) and dt N kf / m = "
                f"{friction[i]:.3g} (must be < 2) with dt {dt:.3g} s, mass {mass[i]:.3g} kg, contact_ke "
                f"{ke[i]:.4g}, contact_kd {kd[i]:.4g}, contact_kf {kf[i]:.4g}: use about {factor} times as many "
                "substeps, or smaller coefficients")
    return "; ".join(parts)


#: Hull vertices a resting body is assumed to stand on in `rigid_contact_message` (a box on a face).
RESTING_VERTICES = 4
