"""Blender's cloth collision response: velocity impulses between the cloth's triangles and the colliders' triangles,
with a repulsion zone, taken after an implicit step (`ImplicitEuler(contact=ImpulseContact(...))`).

The penalty contact of `physics.contact` and `physics.colliders` pushes each particle out of a surface with a
spring. Blender's cloth does not: after its implicit step it corrects the velocities the step reached, pair by
pair of (cloth triangle, collider triangle) closer than the collision distance. A video made by Blender's cloth
(a cloth dropped on a ball, crumpling on the floor) follows that rule, and the penalty model under any
coefficients stays centimetres off it (docs: how-to "a video of a real cloth"). This module restates the rule
(read from Blender 5.0's `collision.cc`; the formulas below, no code copied) so that such a video can be fitted.

Units: dt the step (s), tv = dt v the displacement a particle makes over the step (m), T = frame_time / dt
(Blender's steps per frame: its time unit is the frame), D the collision distance (`ParticleParams.radius`:
Blender's cloth collision distance plus the collider's outer thickness), D' = 8 D / 9, mu the Coulomb
coefficient of the pair (the collider's `mu`, the ground's `ContactParams.mu`: Blender's cloth friction / 100).

Each step, after the solve, with tv the free particles' displacements and x their positions at the step's start:

1. Candidates: the pairs whose bounding boxes overlap at x + tv (the cloth triangle's grown by D).
2. `rounds` times: at tx = x + tv, each candidate's contact: if a cloth vertex lies behind the collider
   triangle's plane, rays along its normal (from the cloth's vertices and back from the collider's) and the
   edges' crossings find the deepest point: distance 0, n from the cloth point to the collider's. Otherwise the
   closest pair of points (6 point-triangle, 9 segment-segment tests), dropped when it lies behind the collider
   triangle; n from the collider's point to the cloth's. A contact is a pair at distance d <= D, with the
   cloth point's barycentric weights w (Blender's projection, clamped).
3. `passes` times per round, per contact: the relative displacement u = (collider's) - sum_k w_k tv_k, its normal
   part un = u . n (> 0: approaching) and tangential part ut.
   - approaching: a stopping impulse I = un / 1.5 along n and a friction impulse min(mu un, |ut|) / 1.5 along ut,
     both to each vertex times w_k; and, while un < 0.1 (D' - d) T, a repulsion
     r = max(I, min((D' - d) / T, 0.1 (D' - d) T - un, 5 I)) / 1.5 along n to all three vertices;
   - separating, d < D': (D' - d) / (4.5 T) along n times w_k.
   A vertex takes, per axis, the impulse of largest magnitude among its contacts (impulses are not summed:
   Blender's merge); tv += the impulses. Pinned particles take none.
4. v = tv / dt.

The ground (`Topology.ground`) is Blender's floor, a plane object: with `ground_size` > 0 a square of that side
centred at the foot of the origin, two triangles split along its (-, -) to (+, +) diagonal (in the plane's two
world axes other than its normal's, in order: x, y under a z normal), taken as the colliders' triangles are (a
cloth triangle straddling the diagonal meets each half apart: that changes the response where a cloth lies
on it); with `ground_size` 0 an unbounded plane, where the closest pair of a cloth triangle is its lowest vertex
(weight 1), its distance max(height, 0). "plane" colliders are unbounded planes likewise.
Spheres, boxes and meshes collide through their triangles (`physics.colliders.collider_faces`): give a sphere
Blender's UV tessellation (`ColliderTopology.segments`, e.g. (64, 32)) to match a Blender ball, whose facets
shape the response (the impulses of the facets around a contact do not cancel: the largest wins per axis).
Capsules are not supported. Rigid bodies meeting particles are not supported either (a `ValueError`).

Cost: the overlap test of every cloth triangle with every collider triangle, then `rounds` tests of at most
`capacity` candidate pairs per step (a static bound: an overflow drops pairs and warns). The whole is
differentiable almost everywhere (the branches are `where`s, the merge a segment maximum).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_norm
from gradsim_jax.physics.colliders import collider_faces, collider_owners, collider_vertices
from gradsim_jax.physics.mesh_collider import closest_on_triangle
from gradsim_jax.physics.quaternion import quat_rotate

#: Blender's ALMOST_ZERO (FLT_EPSILON): its thresholds on distances and impulses (m).
ALMOST_ZERO = 1.1920929e-07
#: A distance that stands for "no contact" (m; finite so that masked branches keep finite derivatives).
_FAR = 1.0e3


class ContactCapacityWarning(UserWarning):
    """More candidate (cloth triangle, collider triangle) pairs than `ImpulseContact.capacity` in a step."""


@dataclasses.dataclass(frozen=True)
class ImpulseContact:
    """Blender's collision response (the module docstring), static settings.

    Attributes:
        frame_time: s, Blender's time unit, the frame (1 / fps at time scale 1): the repulsion restores the
            collision distance over about this time.
        rounds: contact searches per step (Blender: 3).
        passes: impulse passes per search (Blender: 2).
        capacity: candidate pairs kept per step (None: 64 per cloth triangle and 2 per collider triangle); more
            are dropped with a `ContactCapacityWarning`.
        ground_size: m, the side of the ground's square of two triangles (Blender's floor plane: its size; 0: an
            unbounded plane).
    """

    frame_time: float = 1.0 / 30.0
    rounds: int = 3
    passes: int = 2
    capacity: Optional[int] = None
    ground_size: float = 0.0

    def __post_init__(self):
        if not self.frame_time > 0.0:
            raise ValueError(f"ImpulseContact.frame_time must be positive (s), got {self.frame_time}")
        if self.rounds < 1 or self.passes < 1:
            raise ValueError(f"ImpulseContact needs rounds and passes >= 1, got {self.rounds}, {self.passes}")
        if not self.ground_size >= 0.0:
            raise ValueError(f"ImpulseContact.ground_size must be >= 0 (m), got {self.ground_size}")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError(f"ImpulseContact.capacity must be positive, got {self.capacity}")

    def pair_capacity(self, cloth_triangles: int, collider_triangles: int) -> int:
        """The candidate pairs a step keeps (static): `capacity`, or 64 per cloth triangle and 2 per collider
        triangle, at most every pair.

        Args:
            cloth_triangles: the cloth's triangles.
            collider_triangles: the colliders' (and a bounded ground's 2) triangles.

        Returns:
            int, the pairs tested in each of the `rounds`.
        """
        capacity = self.capacity or 64 * cloth_triangles + 2 * collider_triangles
        return min(capacity, cloth_triangles * collider_triangles)


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def _safe(x):
    return jnp.where(jnp.abs(x) < 1e-30, 1e-30, x)


def _segments_closest(p1, q1, p2, q2):
    """Closest points of the segments p1-q1 and p2-q2 [..., 3] (Ericson's clamping)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, f = _dot(d1, d1), _dot(d2, d2), _dot(d2, r)
    c, b = _dot(d1, r), _dot(d1, d2)
    den = a * e - b * b
    s = jnp.where(den > 1e-20, jnp.clip((b * f - c * e) / jnp.where(den > 1e-20, den, 1.0), 0.0, 1.0), 0.0)
    t = (b * s + f) / jnp.maximum(e, 1e-30)
    a_ = jnp.maximum(a, 1e-30)
    s = jnp.where(t < 0, jnp.clip(-c / a_, 0.0, 1.0), jnp.where(t > 1, jnp.clip((b - c) / a_, 0.0, 1.0), s))
    t = jnp.clip(t, 0.0, 1.0)
    return p1 + d1 * s[..., None], p2 + d2 * t[..., None]


def _ray_triangle(o, d, a, b, c):
    """(hit [...], distance along d [...]) of rays o + l d, l >= 0, through triangles (two-sided)."""
    e1, e2 = b - a, c - a
    p = jnp.cross(d, e2)
    det = _dot(e1, p)
    ok = jnp.abs(det) > 1e-6
    f = 1.0 / jnp.where(ok, det, 1.0)
    s = o - a
    u = f * _dot(s, p)
    q = jnp.cross(s, e1)
    v = f * _dot(d, q)
    lam = f * _dot(e2, q)
    return ok & (u >= 0) & (u <= 1) & (v >= 0) & (u + v <= 1) & (lam >= 0), lam


def barycentric(p, a, b, c):
    """Blender's clamped barycentric weights [..., 3] of points p in triangles (a, b, c) (origin at c; a
    degenerate triangle: 1/3 each).

    Args:
        p: [..., 3] points (on or near the triangles).
        a: [..., 3] the triangles' first corners.
        b: [..., 3] their second corners.
        c: [..., 3] their third corners (the weights' origin).

    Returns:
        [..., 3] weights of a, b, c (the first two clamped at 0; they sum to 1).
    """
    v1, v2, v4 = a - c, b - c, p - c
    d11, d12, d22, d14, d24 = _dot(v1, v1), _dot(v1, v2), _dot(v2, v2), _dot(v1, v4), _dot(v2, v4)
    det = d11 * d22 - d12 * d12
    bad = jnp.abs(det) < ALMOST_ZERO
    w1 = jnp.maximum((d14 * d22 - d12 * d24) / jnp.where(bad, 1.0, det), 0.0)
    w2 = jnp.maximum((d24 - d12 * w1) / jnp.where(bad, 1.0, d22), 0.0)
    w = jnp.stack([w1, w2, 1.0 - w1 - w2], axis=-1)
    return jnp.where(bad[..., None], 1.0 / 3.0, w)


#: The closest-pair candidates of two triangles: segment i of one against segment j of the other.
_SEG_I, _SEG_J = np.repeat(np.arange(3), 3), np.tile(np.arange(3), 3)


def _first_best(values, valid, pick_max: bool):
    """Index [P] of the first best valid value [P, k] (max or min), and whether any is valid [P]."""
    fill = -jnp.inf if pick_max else jnp.inf
    masked = jnp.where(valid, values, fill)
    index = jnp.argmax(masked, axis=-1) if pick_max else jnp.argmin(masked, axis=-1)
    return index, jnp.any(valid, axis=-1)


def _take(points, index):
    """points [P, k, 3] at index [P]: [P, 3]."""
    return jnp.take_along_axis(points, index[:, None, None], axis=1)[:, 0]


def triangle_pair_contact(A, B, normal, point):
    """Blender's contact of cloth triangles A [P, 3, 3] with collider triangles B [P, 3, 3] (outward unit normals
    `normal` [P, 3], a point of each plane `point` [P, 3]): (distance [P] m, cloth point [P, 3], direction
    [P, 3] from the collider to the cloth, unnormalized). Pairs whose closest points lie behind the collider
    triangle get a distance of 1e3 (no contact).

    Args:
        A: [P, 3, 3] m, the cloth triangles' corners.
        B: [P, 3, 3] m, the collider triangles' corners.
        normal: [P, 3], the collider triangles' outward unit normals.
        point: [P, 3] m, a point of each collider triangle's plane.

    Returns:
        (distance [P] m, cloth point [P, 3] m, direction [P, 3]).
    """
    nb = normal[:, None, :]
    behind = jnp.any(_dot(A - point[:, None, :], nb) < 0.0, axis=-1)
    # Behind: the deepest point along the normal, the first of the largest depths in Blender's order (the rays
    # from the cloth's corners, back from the collider's, then the edges' crossings).
    hit_a, lam_a = _ray_triangle(A, nb, B[:, None, 0], B[:, None, 1], B[:, None, 2])  # [P, 3]
    hit_b, lam_b = _ray_triangle(B, -nb, A[:, None, 0], A[:, None, 1], A[:, None, 2])
    b0, b1 = B[:, _SEG_I], B[:, (_SEG_I + 1) % 3]  # [P, 9, 3]: each collider edge against the cloth's three
    a0, a1 = A[:, _SEG_J], A[:, (_SEG_J + 1) % 3]
    across, eb, u = jnp.cross(b1 - b0, nb), b1 - b0, a1 - a0
    den = _dot(across, u)
    ok = jnp.abs(den) > 1e-12
    lam = _dot(across, b0 - a0) / jnp.where(ok, den, 1.0)
    on_a = a0 + u * lam[..., None]
    lb = _dot(on_a - b0, eb) / _safe(_dot(eb, eb))
    on_b = b0 + eb * lb[..., None]
    gap = on_a - on_b
    cross_ok = ok & (lam >= 0) & (lam <= 1) & (lb >= 0) & (lb <= 1) & (_dot(gap, nb) < 0)
    depth = jnp.concatenate([lam_a, lam_b, safe_norm(gap)], axis=1)  # [P, 15]
    valid = jnp.concatenate([hit_a, hit_b, cross_ok], axis=1) & (depth > 0.0) & behind[:, None]
    deep_a = jnp.concatenate([A, B - nb * lam_b[..., None], on_a], axis=1)
    deep_b = jnp.concatenate([A + nb * lam_a[..., None], B, on_b], axis=1)
    index, found = _first_best(depth, valid, pick_max=True)
    deep_a, deep_b = _take(deep_a, index), _take(deep_b, index)
    # Otherwise the closest pair of points: the first of the nearest in Blender's order (the cloth's corners on
    # the collider's triangle, the collider's corners on the cloth's, then the 9 pairs of edges).
    on_b_tri = closest_on_triangle(A, B[:, None, 0], B[:, None, 1], B[:, None, 2])  # [P, 3, 3]
    on_a_tri = closest_on_triangle(B, A[:, None, 0], A[:, None, 1], A[:, None, 2])
    sa, sb = _segments_closest(A[:, _SEG_I], A[:, (_SEG_I + 1) % 3], B[:, _SEG_J], B[:, (_SEG_J + 1) % 3])
    qa = jnp.concatenate([A, on_a_tri, sa], axis=1)  # [P, 15, 3]
    qb = jnp.concatenate([on_b_tri, B, sb], axis=1)
    index, _ = _first_best(_dot(qa - qb, qa - qb), jnp.ones(qa.shape[:2], bool), pick_max=False)
    ca, cb = _take(qa, index), _take(qb, index)
    gap = ca - cb
    distance = jnp.where(_dot(gap, normal) < 0.0, _FAR, safe_norm(gap))
    distance = jnp.where(found, 0.0, distance)
    point_a = jnp.where(found[:, None], deep_a, ca)
    direction = jnp.where(found[:, None], deep_b - deep_a, gap)
    return distance, point_a, direction


def _plane_contact(A, normal, height):
    """The floor's contact of cloth triangles A [F, 3, 3]: (distance [F], weights [F, 3]) of the lowest vertex."""
    s = _dot(A, normal[None, None, :]) - height
    lowest = jnp.argmin(s, axis=-1)
    return jnp.maximum(jnp.min(s, axis=-1), 0.0), jax.nn.one_hot(lowest, 3, dtype=A.dtype)


def _ground_square(normal, height, size):
    """Blender's floor: corners [2, 3, 3] of a square of side `size` in the plane n . x = height, centred at the
    origin's foot, on the two world axes other than the normal's largest, split along its (-, -)-(+, +)
    diagonal, counter-clockwise about the normal."""
    e = jnp.eye(3, dtype=normal.dtype)
    order = jnp.array([[1, 2], [0, 2], [0, 1]])[jnp.argmax(jnp.abs(normal))]
    u, w = e[order[0]], e[order[1]]
    u = u - _dot(u, normal) * normal
    w = w - _dot(w, normal) * normal
    centre = height * normal
    h = 0.5 * size
    c = [centre - h * u - h * w, centre + h * u - h * w, centre + h * u + h * w, centre - h * u + h * w]
    tri = jnp.stack([jnp.stack([c[0], c[1], c[2]]), jnp.stack([c[0], c[2], c[3]])])
    facing = _dot(jnp.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), normal) >= 0.0
    return jnp.where(facing[:, None, None], tri, tri[:, ::-1])


def _impulses(tv, faces, weights, normal, distance, mu, valid, collider_tv, mind, T):
    """Impulses [C, 3 (vertex), 3] of contacts (faces [C, 3], weights [C, 3], normal [C, 3], distance [C],
    mu [C], valid [C], collider_tv [C, 3]: the collider's displacement at the contact) on displacements tv."""
    u = collider_tv - jnp.einsum("ck,ckd->cd", weights, tv[faces])
    un = _dot(u, normal)
    d = mind - distance
    approach = un > 0.0
    ut = u - un[:, None] * normal
    ut_len = safe_norm(ut)
    tangent = ut / jnp.maximum(ut_len, 1e-30)[:, None]
    slide = jnp.minimum(mu * un, ut_len)
    stop = un / 1.5
    per_vertex = (jnp.where(approach & (slide > ALMOST_ZERO), slide / 1.5, 0.0)[:, None] * tangent
                  + jnp.where(approach, stop, 0.0)[:, None] * normal
                  + jnp.where(~approach & (d > ALMOST_ZERO), d / (4.5 * T), 0.0)[:, None] * normal)
    impulse = weights[:, :, None] * per_vertex[:, None, :]
    repel = approach & (un < 0.1 * d * T) & (d > ALMOST_ZERO)
    r = jnp.minimum(d / T, 0.1 * d * T - un)
    r = jnp.where(stop > ALMOST_ZERO, jnp.minimum(r, 5.0 * stop), r)
    r = jnp.maximum(stop, r)
    impulse = impulse + jnp.where(repel, r / 1.5, 0.0)[:, None, None] * normal[:, None, :]
    return jnp.where(valid[:, None, None], impulse, 0.0)


def _merge(index, impulse, n):
    """Per particle and axis, the impulse of largest magnitude among its entries (index [E], impulse [E, 3])."""
    high = jnp.maximum(jax.ops.segment_max(impulse, index, num_segments=n), 0.0)
    low = jnp.minimum(jax.ops.segment_min(impulse, index, num_segments=n), 0.0)
    return jnp.where(high >= -low, high, low)


def _check_capacity(count, capacity):
    count = int(np.max(np.asarray(count)))
    if count <= capacity:
        return
    warnings.warn(f"impulse contact: {int(count)} candidate pairs of cloth and collider triangles in a step, more "
                  f"than its capacity {capacity}; the rest were dropped. Raise ImpulseContact(capacity=...).",
                  ContactCapacityWarning, stacklevel=2)


def _planes_and_facets(contact: ImpulseContact, topology, params, dtype):
    """(unbounded planes [(normal [3], height, mu)], triangles met pair by pair [(corners [m, 3, 3], mu [m], owning
    collider [m] or None for the ground)], whether a collider moves) of a scene, posed."""
    floors = []  # (normal, height, mu) of the unbounded planes: the ground, the plane colliders
    parts = []  # (corners [m, 3, 3], mu [m], owner [m] or None): triangles met pair by pair
    if topology.ground:
        normal = params.world.ground_normal / safe_norm(params.world.ground_normal)
        if contact.ground_size > 0.0:
            parts.append((_ground_square(normal, params.world.ground_height, contact.ground_size),
                          jnp.broadcast_to(params.contact.mu, (2,)), None))
        else:
            floors.append((normal, params.world.ground_height, params.contact.mu))
    colliders = topology.colliders
    moving = False
    if colliders is not None and len(colliders.kinds):
        cp = params.colliders
        for i in colliders.indices("plane"):
            q = cp.rotation[i] / safe_norm(cp.rotation[i])
            up = quat_rotate(q[None], jnp.array([[0.0, 1.0, 0.0]], dtype))[0]
            floors.append((up, _dot(up, cp.position[i]), cp.mu[i]))
        facet_faces = collider_faces(colliders)
        if facet_faces.shape[0]:
            owners = collider_owners(colliders)
            parts.append((collider_vertices(colliders, cp)[facet_faces], cp.mu[owners], owners))
            moving = cp.velocity is not None
    return floors, parts, moving


#: Capacities above this are split into buckets of 1/16, 1/4 and all of it (`_bucket_sizes`).
_BUCKETED_FROM = 8192


def _bucket_sizes(capacity: int) -> tuple:
    """The pair counts a step's rounds may run on (static): the capacity, and for a large one also 1/16 and 1/4
    of it, so that a step with few candidates (a cloth above the ball) runs a small program (a `lax.switch`: on
    one scene only the branch taken runs; under `vmap` every branch does, 1.3x the largest)."""
    if capacity <= _BUCKETED_FROM:
        return (capacity,)
    return (max(capacity // 16, 1), max(capacity // 4, 1), capacity)


def _round_contacts(tx, faces, floors, pairs, radius, params, dt, moving):
    """One round's contacts at positions tx [n, 3]: [(faces [C, 3], weights [C, 3], normal [C, 3], distance [C],
    mu [C], valid [C], the collider's displacement [C, 3])], the unbounded planes' and the pairs' (None: none)."""
    found = []
    for normal, height, mu in floors:
        distance, weights = _plane_contact(tx[faces], normal, height)
        count_f = faces.shape[0]
        found.append((faces, weights, jnp.broadcast_to(normal, (count_f, 3)), distance,
                      jnp.broadcast_to(mu, (count_f,)), distance <= radius + ALMOST_ZERO,
                      jnp.zeros((count_f, 3), tx.dtype)))
    if pairs is not None:
        A = tx[pairs["faces"]]
        distance, point_a, direction = triangle_pair_contact(A, pairs["B"], pairs["normal"], pairs["point"])
        length = safe_norm(direction)
        valid = pairs["valid"] & (distance <= radius + ALMOST_ZERO) & (length * length > ALMOST_ZERO)
        normal = direction / jnp.maximum(length, 1e-30)[:, None]
        weights = barycentric(point_a, A[:, 0], A[:, 1], A[:, 2])
        c_tv = jnp.zeros_like(point_a)
        if moving:
            cp = params.colliders
            owner = jnp.maximum(pairs["owner"], 0)  # the ground's (-1): static
            c_tv = dt * (cp.velocity[owner] + jnp.cross(cp.omega[owner], point_a - cp.position[owner]))
            c_tv = jnp.where((pairs["owner"] >= 0)[:, None], c_tv, 0.0)
        found.append((pairs["faces"], weights, normal, jnp.where(valid, distance, radius), pairs["mu"], valid, c_tv))
    return found


def impulse_collide(contact: ImpulseContact, topology, params, x, v, free, dt):
    """The velocities [n, 3] m/s after Blender's collision response (the module docstring).

    Args:
        contact: the static `ImpulseContact` settings.
        topology: the scene's `Topology` (cloth triangles, ground, colliders).
        params: the scene's `Params` (the colliders posed at the step's start).
        x: [n, 3] m, the particles' positions at the step's start.
        v: [n, 3] m/s, the velocities the step reached without contact.
        free: [n, 1] 1 for free particles, 0 for pinned ones (they take no impulse).
        dt: s, the step's length.

    Returns:
        [n, 3] m/s, the velocities after the response.
    """
    faces = jnp.asarray(topology.cloth.triangles)
    n = x.shape[0]
    T = contact.frame_time / dt
    radius = params.particles.radius
    mind = radius * (8.0 / 9.0)
    tv = dt * v
    floors, parts, moving = _planes_and_facets(contact, topology, params, x.dtype)
    have_facets = bool(parts)
    if have_facets:
        corners = jnp.concatenate([c for c, _, _ in parts])  # [Tc, 3, 3]
        facet_mu = jnp.concatenate([m for _, m, _ in parts])
        owner = jnp.asarray(np.concatenate([np.full(len(c), -1, np.int32) if o is None else o for c, _, o in parts]))
        facet_count = int(corners.shape[0])
        facet_normal = jnp.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        facet_normal = facet_normal / jnp.maximum(safe_norm(facet_normal, keepdims=True), 1e-30)
        facet_point = jnp.mean(corners, axis=1)
        capacity = contact.pair_capacity(int(faces.shape[0]), facet_count)
        tx = jax.lax.stop_gradient(x + tv)[faces]
        lo, hi = jnp.min(tx, axis=1) - jax.lax.stop_gradient(radius), jnp.max(tx, axis=1) + jax.lax.stop_gradient(radius)
        c_lo, c_hi = jax.lax.stop_gradient(jnp.min(corners, axis=1)), jax.lax.stop_gradient(jnp.max(corners, axis=1))
        overlap = jnp.all((lo[:, None] <= c_hi[None]) & (hi[:, None] >= c_lo[None]), axis=-1).reshape(-1)
        count = jnp.sum(overlap)
        jax.debug.callback(_check_capacity, count, capacity)

    def respond(tv, size):  # the rounds on at most `size` candidate pairs (static)
        if have_facets:
            (pair,) = jnp.nonzero(overlap, size=size, fill_value=0)
            facet_of = pair % facet_count
            pairs = dict(valid=jnp.arange(size) < count, faces=faces[pair // facet_count], B=corners[facet_of],
                         normal=facet_normal[facet_of], point=facet_point[facet_of], mu=facet_mu[facet_of],
                         owner=owner[facet_of])

        def one_round(_, tv):
            found = _round_contacts(x + tv, faces, floors, pairs if have_facets else None, radius, params, dt,
                                    moving)
            index = jnp.concatenate([f.reshape(-1) for f, *_ in found])
            for _ in range(contact.passes):
                impulse = [_impulses(tv, f, w, nrm, dist, mu, ok, c_tv, mind, T).reshape(-1, 3)
                           for f, w, nrm, dist, mu, ok, c_tv in found]
                tv = tv + free * _merge(index, jnp.concatenate(impulse), n)
            return tv

        return jax.lax.fori_loop(0, contact.rounds, one_round, tv)

    if not (floors or have_facets):
        return v
    sizes = _bucket_sizes(capacity) if have_facets else (0,)
    if len(sizes) == 1:
        tv = respond(tv, sizes[0])
    else:  # the smallest bucket that holds this step's pairs: a step pays for the pairs it has, not the capacity
        which = jnp.sum(count > jnp.asarray(sizes[:-1]))
        tv = jax.lax.switch(which, [functools.partial(respond, size=size) for size in sizes], tv)
    return tv / dt


def contact_pair_rounds(integrator, topology) -> int:
    """The candidate pairs an integrator's Blender collision response tests per step, times its rounds (the
    runtime estimate's, `physics.estimate_cost(contact_pair_rounds=...)`); 0 without one.

    Args:
        integrator: the `Integrator` (its `contact`: an `ImpulseContact` or None).
        topology: the scene's `Topology` (cloth triangles, colliders, ground).

    Returns:
        int, pairs x rounds.
    """
    contact = integrator.contact
    if contact is None:
        return 0
    facets = 2 if topology.ground and contact.ground_size > 0.0 else 0
    if topology.colliders is not None and len(topology.colliders.kinds):
        facets += len(collider_faces(topology.colliders))
    cloth = int(topology.cloth.triangles.shape[0])
    return contact.pair_capacity(cloth, facets) * contact.rounds if cloth and facets else 0
