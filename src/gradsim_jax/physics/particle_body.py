"""Contact of particles (cloth, soft-body and free particles) with the scene's rigid bodies, both ways.

A particle at p meets body B's solid as a rigid body's contact point does (`physics.bodycontact`): the signed
distance d = max_f (n_f . p - o_f) over B's hull faces (exact inside a closed convex hull, positive outside), less
the particle radius; the penalty force f of `contact.penalty_force` at the particle's velocity relative to B's
surface there, v - (v_B + w_B x (p - x_B)), with the pair's coefficients: the mean of the particles' contact ke,
kd, kf, mu (`Params.contact`) and the body's (`RigidParams.contact_*`), as NVIDIA Warp averages a particle's and a
shape's (its kernel caps friction at mu |c ke|, ours at mu |fn|: `physics.colliders`). f acts on the particle, -f
on B at p (force and torque (p - x_B) x -f): equal and opposite, so particles and bodies exchange momentum exactly.
A kinematic body (mass 0) is a moving obstacle.

With the integrator's implicit contact, the damping and friction are taken backward over the step for the
particle's mass alone (`contact.implicit_penalty_force`: the body's velocity held over the step), which is
stable for any kd, kf where the body is much heavier than a particle, the common case (a cloth on a box). The
cost is O(n F) a step for n particles and F hull faces in all.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.bodycontact import START_DEPTH_FRACTION, body_distance, body_sizes, hull_planes
from gradsim_jax.physics.contact import implicit_penalty_force, penalty_force
from gradsim_jax.physics.quaternion import quat_to_matrix


def particle_body_loads(topology, params, x, v, rigid, v_free=None, inv_mass=None, dt=None):
    """The contact loads between the particles and the rigid bodies (module docstring): explicit at v when v_free
    is None, else with damping and friction taken backward over dt for the particles' inverse masses.

    Args:
        topology: the scene's `Topology` (its `rigid` branch: the bodies' hulls).
        params: the scene's `Params` (the bodies' `rigid` and the particles' `contact` coefficients, the
            particle radius in m, `world.contact_smoothing`).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.
        rigid: the `RigidState` of the b bodies (COM x [b, 3] m, unit quaternion q [b, 4] wxyz, v [b, 3] m/s
            and w [b, 3] rad/s).
        v_free: [n, 3] m/s, the particles' velocities at the end of the step without contact, or None
            (explicit contact at v).
        inv_mass: [n] 1/kg, the particles' inverse masses (with v_free).
        dt: s, the step (with v_free).

    Returns:
        (force on each particle [n, 3] N, force on each body [b, 3] N, torque on each body about its COM
        [b, 3] N m).
    """
    b = rigid.x.shape[0]
    n = x.shape[0]
    rotation = quat_to_matrix(rigid.q)
    planes = hull_planes(topology.rigid, params.rigid, rigid.x, rotation)
    d, normal = body_distance(planes, x, jnp.full((n,), -1, jnp.int32), b)  # [n, b], [n, b, 3]
    c = d - params.particles.radius
    arm = x[:, None, :] - rigid.x[None]  # [n, b, 3] from each body's COM
    surface = rigid.v[None] + jnp.cross(jnp.broadcast_to(rigid.w[None], arm.shape), arm)
    def pair(particle, body):  # [b] or [n, b]: the particles' coefficients are scalars or per particle
        particle = jnp.asarray(particle)
        return 0.5 * ((particle[:, None] if particle.ndim == 1 else particle) + body)

    contact, body = params.contact, params.rigid
    ke, kd = pair(contact.ke, body.contact_ke), pair(contact.kd, body.contact_kd)
    kf, mu = pair(contact.kf, body.contact_kf), pair(contact.mu, body.contact_mu)
    s = params.world.contact_smoothing
    if v_free is None:
        f = penalty_force(normal, c, v[:, None, :] - surface, ke, kd, kf, mu, s)
    else:
        f = implicit_penalty_force(normal, c, v_free[:, None, :] - surface, inv_mass[:, None], dt, ke, kd, kf, mu, s)
    return jnp.sum(f, axis=1), -jnp.sum(f, axis=0), -jnp.sum(jnp.cross(arm, f), axis=0)


def has_particle_body_contact(topology) -> bool:
    """Whether particles meet the rigid bodies (static: `RigidTopology.particles`).

    Args:
        topology: the scene's `Topology`.

    Returns:
        bool, `topology.rigid.particles`.
    """
    return topology.rigid.particles



def particle_body_message(topology, params, state) -> str:
    """Host-side: the deepest particle that starts inside a body by more than START_DEPTH_FRACTION of the body's
    size (the contact force would throw it out), or "".

    Args:
        topology: the scene's `Topology` (the bodies' hulls).
        params: the scene's `Params` (the bodies' vertices, the particle radius in m).
        state: the scene's `State`, concrete (particle positions [n, 3] m, the bodies' poses).

    Returns:
        str, the message naming the particle, the body and the depth in m, or "" when none starts that deep.
    """
    b, n = int(np.shape(state.rigid.x)[0]), int(np.shape(state.particles.x)[0])
    if b == 0 or n == 0:
        return ""
    rigid = state.rigid
    planes = hull_planes(topology.rigid, params.rigid, rigid.x, quat_to_matrix(jnp.asarray(rigid.q)))
    d, _ = body_distance(planes, jnp.asarray(state.particles.x), jnp.full((n,), -1, jnp.int32), b)
    d = np.asarray(d, np.float64) - float(np.max(np.asarray(params.particles.radius)))
    size = body_sizes(topology.rigid.vertex_body, params.rigid.vertices, b)
    if not (d < -START_DEPTH_FRACTION * size[None, :]).any():
        return ""
    k, body = np.unravel_index(np.argmin(d), d.shape)
    return (f"particle {k} starts inside rigid body {body} ({-d[k, body]:.3g} m deep, its radius included): the "
            "contact force will throw it out; move the particles or the body")
