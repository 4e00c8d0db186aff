"""Contact of rigid bodies with each other and with the scene's colliders (penalty forces, both directions).

Contact points (`contact_points`): each body's hull vertices and, on every hull face, its three corners moved
FACE_INSET of the way to the face's centroid. The vertices alone miss the commonest contact of all: two boxes
of one footprint stacked square have every corner of the upper one on the side planes of the lower one, at
signed distance exactly 0 (no force), and the upper box would sink in; the inset points lie on the faces and
inside the footprint. (The ground keeps the vertices: a plane has no such edges.) A contact point p of body A
meets:

- a collider (`physics.colliders`): signed distance d and outward normal n of the collider's exact shape at p,
  the penalty force of PHYSICS.md ("Ground contact", `contact.penalty_force`) at the point's velocity, with the
  collider's ke, kd, kf, mu; it acts on A at p (force and torque r x f). Colliders do not move.
- another body B (`RigidTopology.collide`): B's solid is the intersection of the half-spaces behind its hull
  faces, so d = max_f (n_f . p - o_f) over B's faces (outward unit normal n_f, offset o_f, in the world), its
  normal the maximizing face's. For a convex closed hull this is the exact signed distance inside (d < 0) and
  positive outside, which is all a penalty force needs (zero out of contact). The force f of the penalty model
  at the relative velocity v_A(p) - v_B(p) with the pair's coefficients (the mean of the two bodies' contact_ke,
  kd, kf, mu, as NVIDIA Warp averages shape materials) acts on A at p and -f on B at the same point: equal and
  opposite, so the pair conserves linear and angular momentum exactly (about any point).

A body's faces are oriented outward from its centre of mass (the origin of its body frame, inside a convex
hull); degenerate (zero-area) faces are left out. Only point-in-solid contacts are found: two boxes crossing
edge to edge with no contact point inside the other are not (resting, sliding and stacking contacts always
have some). The contact is the penalty spring's, so bodies rest m g / (N ke) deep on N points. The cost is
O(P b F) per step for P = m + 3 F contact points, b bodies and F hull faces in all (two boxes: 88 points
against 24 faces).

`hull_problems` (host) finds hulls that cannot be solids for this test: an edge not shared by exactly two faces
(a non-closed mesh) or a vertex outside a face plane (not convex). `body_contact_message` (host) names bodies
that start inside another body or a collider.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics.collider_motion import surface_velocity
from gradsim_jax.physics.colliders import collider_distance
from gradsim_jax.mathutil import safe_norm, safe_normalize
from gradsim_jax.physics.contact import penalty_force
from gradsim_jax.physics.quaternion import quat_to_matrix

#: Stand-in distance (m) for "no face of that body" in the dense vertex x body x face table; any value far
#: beyond a scene's size serves (float32 holds it exactly enough).
FAR = 1.0e30

#: Where the extra contact points of each face lie: its corners moved this fraction of the way to its centroid.
FACE_INSET = 0.1

#: Relative tolerance (of the hull's size) of the convexity test in `hull_problems`.
CONVEX_RTOL = 1e-5


def hull_planes(topology, params, x, rotation):
    """World face planes of every body's hull: outward unit normals [F, 3], offsets [F] (n . p = o on the face),
    the body of each face [F] and whether the face is usable [F] (nonzero area).

    Args:
        topology: the bodies' RigidTopology (vertex_body [m] int32, faces [F, 3] int32).
        params: the bodies' RigidParams (vertices [m, 3] m, body frame, relative to the COM).
        x: [b, 3] m, the bodies' centres of mass.
        rotation: [b, 3, 3], the bodies' rotation matrices (body to world).

    Returns:
        (normals [F, 3], offsets [F] m, face body [F] int, usable [F] bool).
    """
    faces = topology.faces
    face_body = topology.vertex_body[faces[:, 0]]
    tri = params.vertices[faces]  # [F, 3, 3] body frame, relative to the COM
    cross = jnp.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    usable = safe_norm(cross) > 0.0
    normal = safe_normalize(cross)
    offset = jnp.sum(normal * tri[:, 0], axis=-1)
    sign = jnp.where(offset < 0.0, -1.0, 1.0).astype(offset.dtype)  # outward: the COM behind every face
    normal, offset = normal * sign[:, None], offset * sign
    world_normal = jnp.einsum("fij,fj->fi", rotation[face_body], normal)
    return world_normal, offset + jnp.sum(world_normal * x[face_body], axis=-1), face_body, usable


def body_distance(planes, p, vertex_body, b: int):
    """(signed distance [m, b] m, outward normal [m, b, 3]) of points p [m, 3] (of bodies vertex_body [m]) to
    every body's solid; FAR for a point's own body and for bodies without faces.

    Args:
        planes: `hull_planes`'s (normals [F, 3], offsets [F] m, face body [F], usable [F]).
        p: [m, 3] m, world points.
        vertex_body: [m] int, the body each point belongs to.
        b: the number of bodies (static).

    Returns:
        (distance [m, b] m, negative inside; normal [m, b, 3] the maximizing face's outward unit normal).
    """
    normal, offset, face_body, usable = planes
    s = p @ normal.T - offset  # [m, F]
    mask = (face_body[None, :] == jnp.arange(b)[:, None]) & usable[None, :]  # [b, F]
    table = jnp.where(mask[None], s[:, None, :], -FAR)  # [m, b, F]
    face = jnp.argmax(table, axis=-1)  # [m, b]
    d = jnp.take_along_axis(table, face[..., None], axis=-1)[..., 0]
    skip = (vertex_body[:, None] == jnp.arange(b)[None, :]) | ~mask.any(axis=-1)[None, :]
    return jnp.where(skip, FAR, d), normal[face]


def contact_points(topology, params):
    """Body-frame contact points [m + 3 F, 3] of the bodies and their bodies [m + 3 F]: the hull vertices, and
    on every face its corners moved FACE_INSET of the way to its centroid (module docstring).

    Args:
        topology: the bodies' RigidTopology (vertex_body [m] int32, faces [F, 3] int32).
        params: the bodies' RigidParams (vertices [m, 3] m, body frame, relative to the COM).

    Returns:
        (points [m + 3 F, 3] m, body frame; body [m + 3 F] int32).
    """
    faces = topology.faces
    tri = params.vertices[faces]  # [F, 3, 3]
    inset = tri + FACE_INSET * (jnp.mean(tri, axis=1, keepdims=True) - tri)
    body = jnp.concatenate([topology.vertex_body, jnp.repeat(topology.vertex_body[faces[:, 0]], 3)])
    return jnp.concatenate([params.vertices, inset.reshape(-1, 3)]), body


def body_body_loads(topology, params, state, rotation, b: int, smoothing: float = 0.0):
    """Force and torque [b, 3] (N, N m about each COM) of the bodies' contacts with each other (module
    docstring): f on the body of each contact point, -f on the body it is inside, at the same point.
    `smoothing`: the contact's smooth onset (m, `contact.contact_depth`).

    Args:
        topology: the bodies' RigidTopology (vertex_body, faces).
        params: the bodies' RigidParams (hull vertices m, contact_ke N/m, contact_kd N s/m, contact_kf N s/m,
            contact_mu).
        state: the bodies' RigidState (x [b, 3] m, v [b, 3] m/s, w [b, 3] rad/s).
        rotation: [b, 3, 3], the bodies' rotation matrices (body to world).
        b: the number of bodies (static).
        smoothing: m, static, the contact's smooth onset (0: the exact penalty).

    Returns:
        (force [b, 3] N, torque [b, 3] N m about each COM), world frame.
    """
    local, vb = contact_points(topology, params)
    r = jnp.einsum("mij,mj->mi", rotation[vb], local)
    p = state.x[vb] + r
    d, normal = body_distance(hull_planes(topology, params, state.x, rotation), p, vb, b)
    own = state.v[vb] + jnp.cross(state.w[vb], r)  # [m, 3]
    arm = p[:, None, :] - state.x[None]  # [m, b, 3] from the other body's COM
    other = state.v[None] + jnp.cross(jnp.broadcast_to(state.w[None], arm.shape), arm)
    pair = lambda a: 0.5 * (a[vb][:, None] + a[None, :])  # noqa: E731  the pair's coefficient [m, b]
    f = penalty_force(normal, d, own[:, None, :] - other, pair(params.contact_ke), pair(params.contact_kd),
                      pair(params.contact_kf), pair(params.contact_mu), smoothing)  # [m, b, 3]
    on_point = jnp.sum(f, axis=1)
    seg = lambda a: jax.ops.segment_sum(a, vb, num_segments=b)  # noqa: E731
    force = seg(on_point) - jnp.sum(f, axis=0)
    torque = seg(jnp.cross(r, on_point)) - jnp.sum(jnp.cross(arm, f), axis=0)
    return force, torque


def body_collider_loads(collider_topology, colliders, topology, params, state, rotation, b: int,
                        smoothing: float = 0.0):
    """Force and torque [b, 3] of the colliders on the bodies' contact points (`contact_points`): each
    collider's penalty force at the point's velocity, with the collider's coefficients (`smoothing`: as in
    `body_body_loads`).

    Args:
        collider_topology: the colliders' ColliderTopology (kinds, meshes).
        colliders: the colliders' ColliderParams (pose, size, ke, kd, kf, mu; velocities when moving).
        topology: the bodies' RigidTopology (vertex_body, faces).
        params: the bodies' RigidParams (hull vertices, body frame, m).
        state: the bodies' RigidState (x [b, 3] m, v [b, 3] m/s, w [b, 3] rad/s).
        rotation: [b, 3, 3], the bodies' rotation matrices (body to world).
        b: the number of bodies (static).
        smoothing: m, static, the contact's smooth onset (0: the exact penalty).

    Returns:
        (force [b, 3] N, torque [b, 3] N m about each COM), world frame.
    """
    local, vb = contact_points(topology, params)
    r = jnp.einsum("mij,mj->mi", rotation[vb], local)
    p = state.x[vb] + r
    d, normal = collider_distance(collider_topology, colliders, p)
    velocity = (state.v[vb] + jnp.cross(state.w[vb], r))[:, None, :]
    surface = surface_velocity(colliders, p)
    if surface is not None:  # a moving collider: the velocity relative to its surface
        velocity = velocity - surface
    f = jnp.sum(penalty_force(normal, d, velocity, colliders.ke, colliders.kd, colliders.kf, colliders.mu,
                              smoothing), axis=1)
    seg = lambda a: jax.ops.segment_sum(a, vb, num_segments=b)  # noqa: E731
    return seg(f), seg(jnp.cross(r, f))


def hull_problems(vertex_body, faces, vertices, b: int) -> dict:
    """{body: what is wrong} for hulls that are not closed convex solids (host, numpy): an edge not shared by
    exactly two faces, no faces at all, or a vertex in front of a face plane by more than CONVEX_RTOL of the
    hull's size.

    Args:
        vertex_body: [m] int, the body of each hull vertex.
        faces: [F, 3] int, the hulls' triangles over the concatenated vertices.
        vertices: [m, 3] m, the hull vertices (body frame, relative to the COM).
        b: the number of bodies.

    Returns:
        {body index: a sentence fragment}, empty when every hull is a closed convex solid.
    """
    vertex_body = np.asarray(vertex_body)
    faces = np.asarray(faces).reshape(-1, 3)
    vertices = np.asarray(vertices, np.float64).reshape(-1, 3)
    face_body = vertex_body[faces[:, 0]] if len(faces) else np.zeros(0, int)
    problems = {}
    for i in range(b):
        own = faces[face_body == i]
        if len(own) == 0:
            problems[i] = "its hull has no faces"
            continue
        edges = np.sort(np.concatenate([own[:, [0, 1]], own[:, [1, 2]], own[:, [2, 0]]]), axis=1)
        _, counts = np.unique(edges, axis=0, return_counts=True)
        if (counts != 2).any():
            problems[i] = (f"its hull is not a closed surface ({int((counts != 2).sum())} edge(s) not shared by "
                           "exactly two faces)")
            continue
        tri = vertices[own]
        normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        length = np.linalg.norm(normal, axis=1)
        keep = length > 0
        normal = normal[keep] / length[keep, None]
        offset = np.sum(normal * tri[keep, 0], axis=1)
        normal, offset = normal * np.where(offset < 0, -1.0, 1.0)[:, None], np.abs(offset)
        points = vertices[vertex_body == i]
        size = float(np.ptp(points, axis=0).max()) if len(points) else 0.0
        outside = points @ normal.T - offset
        if size == 0.0 or outside.max() > CONVEX_RTOL * size:
            problems[i] = (f"its hull is not convex (a vertex lies {max(outside.max(), 0.0):.3g} m in front of a "
                           "face plane)")
    return problems


#: Depth below which a contact point inside another body or a collider at the start is not reported (fraction of
#: its body's size, as for the ground in `rigid.rigid_contact_message`).
START_DEPTH_FRACTION = 0.01


def body_sizes(vertex_body, vertices, b: int) -> np.ndarray:
    """[b]: each body's size for the start checks, its hull's largest distance from its COM (host, numpy).

    Args:
        vertex_body: [m] int, the body of each hull vertex.
        vertices: [m, 3] m, the hull vertices (body frame, relative to the COM).
        b: the number of bodies.

    Returns:
        [b] m, float64 (0 for a body without vertices).
    """
    size = np.zeros(b)
    np.maximum.at(size, np.asarray(vertex_body), np.linalg.norm(np.asarray(vertices, np.float64), axis=1))
    return size


def face_point_counts(topology, params) -> np.ndarray:
    """[b]: the most contact points of each body on one of its face planes (a box: 10 on a side), the count a body
    lying on that face presses with (host, numpy).

    Args:
        topology: the bodies' RigidTopology (vertex_body, faces), concrete.
        params: the bodies' RigidParams (vertices [m, 3] m, mass [b] kg), concrete.

    Returns:
        [b] int numpy array.
    """
    local, vb = (np.asarray(a) for a in contact_points(topology, params))
    faces = np.asarray(topology.faces).reshape(-1, 3)
    vertices = np.asarray(params.vertices, np.float64)
    b = int(np.shape(params.mass)[0])
    counts = np.zeros(b, int)
    for f in faces:
        body = int(np.asarray(topology.vertex_body)[f[0]])
        n = np.cross(vertices[f[1]] - vertices[f[0]], vertices[f[2]] - vertices[f[0]])
        if np.linalg.norm(n) == 0:
            continue
        n = n / np.linalg.norm(n)
        size = max(float(np.abs(vertices[f]).max()), 1e-12)
        on = (vb == body) & (np.abs((local - vertices[f[0]]) @ n) <= 1e-6 * size)
        counts[body] = max(counts[body], int(on.sum()))
    return counts


def contact_step_numbers(topology, params, dt: float, colliders=None):
    """[(what, normal number, friction number)] of the penalty step for each free body against each other body
    (reduced mass, the pair's mean coefficients) and each collider, on `face_point_counts` points:
    dt^2 N ke / m + 2 dt N kd / m (stable below 4) and dt N kf / m (below 2). Host, numpy.

    Args:
        topology: the bodies' RigidTopology (collide, vertex_body, faces), concrete.
        params: the bodies' RigidParams (mass kg, contact_ke N/m, contact_kd N s/m, contact_kf N s/m), concrete.
        dt: s, the step.
        colliders: (ColliderTopology, ColliderParams) of the scene, or None.

    Returns:
        A list of (description str, normal number float, friction number float), dimensionless.
    """
    mass = np.asarray(params.mass, np.float64)
    b = mass.shape[0]
    count = face_point_counts(topology, params)
    coef = {k: np.asarray(getattr(params, "contact_" + k), np.float64) for k in ("ke", "kd", "kf")}
    rows = []

    def numbers(what, n, m, ke, kd, kf):
        rows.append((what, dt * dt * n * ke / m + 2.0 * dt * n * kd / m, dt * n * kf / m))

    for i in np.flatnonzero(mass > 0):
        if topology.collide:
            for j in range(b):
                if j != i and (j > i or mass[j] == 0):  # each free pair once
                    m = mass[i] * mass[j] / (mass[i] + mass[j]) if mass[j] > 0 else mass[i]
                    pair = {k: 0.5 * (v[i] + v[j]) for k, v in coef.items()}
                    numbers(f"rigid bodies {i} and {j}", max(count[i], count[j]), m, **pair)
        if colliders is not None and colliders[0] is not None:
            for c, kind in enumerate(colliders[0].kinds):
                col = {k: float(np.asarray(getattr(colliders[1], k))[c]) for k in ("ke", "kd", "kf")}
                numbers(f"rigid body {i} and collider {c} ({kind})", count[i], mass[i], **col)
    return rows


def body_contact_message(topology, params, state, colliders=None, dt=None) -> str:
    """Host-side: bodies whose contact points start deeper than START_DEPTH_FRACTION of their body's size inside
    another body (when `topology.collide`) or inside a collider (`colliders`: (ColliderTopology, ColliderParams)
    or None), and (given the step dt in s) contacts too stiff for it (`contact_step_numbers`); "" when none.

    Args:
        topology: the bodies' RigidTopology (collide, vertex_body, faces), concrete.
        params: the bodies' RigidParams (mass, hull vertices, contact coefficients), concrete.
        state: the bodies' concrete initial RigidState (x [b, 3] m, q [b, 4]).
        colliders: (ColliderTopology, ColliderParams) of the scene, or None.
        dt: s, the step to check; None skips the stiffness check.

    Returns:
        The problems joined by "; ", or "" when there is none.
    """
    b = int(np.shape(params.mass)[0])
    if b == 0:
        return ""
    rotation = quat_to_matrix(jnp.asarray(state.q))
    local, vb = contact_points(topology, params)
    p = jnp.asarray(state.x)[vb] + jnp.einsum("mij,mj->mi", rotation[vb], local)
    vb = np.asarray(vb)
    size = body_sizes(topology.vertex_body, params.vertices, b)
    tolerance = START_DEPTH_FRACTION * size[vb][:, None]
    parts = []
    if topology.collide and b > 1:
        d, _ = body_distance(hull_planes(topology, params, state.x, rotation), p, jnp.asarray(vb), b)
        d = np.asarray(d, np.float64)
        if (d < -tolerance).any():
            k, other = np.unravel_index(np.argmin(d), d.shape)
            parts.append(f"rigid body {vb[k]} starts inside rigid body {other} (a contact point {-d[k, other]:.3g} m "
                         "deep): the contact force will throw them apart; move them apart")
    if colliders is not None and colliders[0] is not None and colliders[0].kinds:
        d, _ = collider_distance(colliders[0], colliders[1], p)
        d = np.asarray(d, np.float64)
        if (d < -tolerance).any():
            k, c = np.unravel_index(np.argmin(d), d.shape)
            parts.append(f"rigid body {vb[k]} starts inside collider {c} ({colliders[0].kinds[c]}) (a contact point "
                         f"{-d[k, c]:.3g} m deep): the contact force will throw it out; move it or the collider")
    if dt is not None:
        rows = contact_step_numbers(topology, params, float(dt), colliders)
        bad = [r for r in rows if r[1] >= 4.0 or r[2] >= 2.0]
        if bad:
            what, normal, friction = max(bad, key=lambda r: max(r[1] / 4.0, r[2] / 2.0))
            factor = int(np.ceil(1.25 * max(normal / 4.0, friction / 2.0)))
            parts.append(f"the contact of {what} is too stiff for the time step {float(dt):.3g} s: dt^2 N ke / m + "
                         f"2 dt N kd / m = {normal:.3g} (must be < 4) and dt N kf / m = {friction:.3g} (must be < 2) "
                         f"on the N contact points of a face, m the pair's reduced mass: use about {factor} times "
                         "as many substeps, or smaller contact coefficients")
    return "; ".join(parts)
