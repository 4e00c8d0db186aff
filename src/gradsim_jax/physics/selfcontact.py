"""Particle-particle contact (a cloth folding onto itself, two cloths, a cloth on a soft body) through a hashed
uniform grid built inside `jit`, with a fixed capacity per cell and an overflow flag.

Grid: cells of edge `thickness` (two particle radii: the contact distance), each particle's cell hashed into a
table of `table` buckets (a power of two, at least twice the particle count) by the usual spatial hash
(x 73856093 xor y 19349663 xor z 83492791); the particles sorted by bucket (`argsort`). Each particle looks up
its own cell and the 13 neighbouring cells that follow it in (x, y, z) order (each pair of cells from one side
only), takes at most `capacity` particles from each bucket (`searchsorted` finds where it starts) and keeps those
whose own cell is the one looked up (which drops hash collisions), in its own cell only those of higher index:
every pair once. Everything has a fixed shape: [n, 14 x capacity] candidates, whatever the state. A bucket
holding more than `capacity` particles drops the excess: `self_contact_overflow` says when (check a trajectory
with it; `simulate` warns when the initial state overflows), and a larger capacity fixes it. jax-md's cell lists
and NVIDIA Warp's hash grid are the references; this one is rebuilt every step, inside the step.

Force: particles i, j closer than the thickness d0 (centres, |x_i - x_j| < d0) push apart along n = (x_i - x_j)
/ |x_i - x_j| with the penalty model of the ground (PHYSICS.md): ke (d0 - |x_i - x_j|) plus approach damping kd
|min(v_n, 0)|, v_n the relative normal velocity; no friction. The pair's force goes to i and, reversed, to j
(a scatter-add): equal and opposite by construction. Pairs already closer
than the thickness at rest (`Params.cloth.rest_x`: neighbours of a fine mesh) are left out: they are held apart
by the elastic forces, not by contact. The contact is explicit (at the step's start velocities): stable for
dt^2 ke / m + 2 dt kd / m < 4 per pair, as the ground's explicit model.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_norm
from gradsim_jax.typing import Array, pytree_dataclass

_PRIMES = (73856093, 19349663, 83492791)


@dataclasses.dataclass(frozen=True)
class SelfContactTopology:
    """The grid's static sizes: capacity (particles per bucket taken), table (buckets, a power of two)."""

    capacity: int = 8
    table: int = 1024


@pytree_dataclass
class SelfContactParams:
    """thickness (m, the contact distance between particle centres; the grid's cell edge), ke (N/m), kd (N s/m)."""

    thickness: Array
    ke: Array
    kd: Array


def table_size(n: int) -> int:
    """The hash table's bucket count for n particles: a power of two, at least 2 n (and 64).

    Args:
        n: the number of particles.

    Returns:
        int, the bucket count.
    """
    return int(max(64, 1 << int(np.ceil(np.log2(max(2 * n, 1))))))


def _cells(x, thickness):
    return jnp.floor(x / thickness).astype(jnp.int32)


def _hash(cells, table: int):
    h = (cells[..., 0].astype(jnp.uint32) * np.uint32(_PRIMES[0])) ^ \
        (cells[..., 1].astype(jnp.uint32) * np.uint32(_PRIMES[1])) ^ \
        (cells[..., 2].astype(jnp.uint32) * np.uint32(_PRIMES[2]))
    return (h & np.uint32(table - 1)).astype(jnp.int32)


# A particle's own cell and the 13 of its 26 neighbours that come after it in (x, y, z) order: each pair of
# cells is looked at from one side only, and the reaction goes to the other particle (half the candidates).
_OFFSETS = np.array([[a, b, c] for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1) if (a, b, c) >= (0, 0, 0)],
                    np.int32)


def candidates(topology: SelfContactTopology, x, thickness):
    """(candidate indices [n, 14 C] into x, valid [n, 14 C] bool, overflow: bool scalar) of the hashed grid: each
    pair once (in the own cell, the higher index of the two).

    Args:
        topology: the grid's static sizes (capacity C, table).
        x: [n, 3] m, particle positions.
        thickness: () m, the contact distance (the grid's cell edge).

    Returns:
        (j [n, 14 C] int, valid [n, 14 C] bool, overflow () bool: some bucket held more than C particles).
    """
    n = x.shape[0]
    cap = topology.capacity
    cells = _cells(x, thickness)
    buckets = _hash(cells, topology.table)
    order = jnp.argsort(buckets)
    sorted_buckets = buckets[order]
    wanted = cells[:, None, :] + _OFFSETS[None]  # [n, 14, 3]
    wanted_bucket = _hash(wanted, topology.table)  # [n, 14]
    start = jnp.searchsorted(sorted_buckets, wanted_bucket, side="left")
    end = jnp.searchsorted(sorted_buckets, wanted_bucket, side="right")
    slot = start[..., None] + jnp.arange(cap)  # [n, 14, C]
    inside = slot < end[..., None]
    j = order[jnp.minimum(slot, n - 1)]
    same_cell = jnp.all(cells[j] == wanted[:, :, None, :], axis=-1)
    own = np.all(_OFFSETS == 0, axis=1)[None, :, None]  # the own cell: the pair once, from its lower index
    valid = inside & same_cell & jnp.where(own, j > jnp.arange(n)[:, None, None], True)
    overflow = jnp.any(end - start > cap)
    return j.reshape(n, -1), valid.reshape(n, -1), overflow


def self_contact_forces(topology, params, x, v):
    """Contact forces [n, 3] N between the particles at x [n, 3] m moving at v [n, 3] m/s (module docstring).

    Args:
        topology: the scene's Topology; uses `topology.self_contact` (capacity, table).
        params: the scene's Params; uses `params.self_contact` (thickness m, ke N/m, kd N s/m) and
            `params.cloth.rest_x` [n, 3] m (pairs closer at rest are left out).
        x: [n, 3] m, particle positions.
        v: [n, 3] m/s, particle velocities.

    Returns:
        [n, 3] N, the contact force on each particle.
    """
    sc, top = params.self_contact, topology.self_contact
    j, valid, _ = candidates(top, x, sc.thickness)
    rest = params.cloth.rest_x
    apart_at_rest = safe_norm(rest[:, None, :] - rest[j]) >= sc.thickness
    gap = x[:, None, :] - x[j]  # [n, K, 3]
    dist = safe_norm(gap)
    normal = gap / jnp.where(dist > 0.0, dist, 1.0)[..., None]
    touching = valid & apart_at_rest & (dist < sc.thickness)
    vn = jnp.sum((v[:, None, :] - v[j]) * normal, axis=-1)
    push = sc.ke * (sc.thickness - dist) - sc.kd * jnp.minimum(vn, 0.0)
    f = jnp.where(touching, push, 0.0)[..., None] * normal  # on i from j [n, K, 3]
    reaction = jax.ops.segment_sum(f.reshape(-1, 3), j.reshape(-1), num_segments=x.shape[0])
    return jnp.sum(f, axis=1) - reaction


def self_contact_overflow(topology, params, x):
    """Whether some grid bucket holds more than `capacity` particles at x [n, 3] (some pairs were dropped).

    Args:
        topology: the scene's Topology; uses `topology.self_contact` (capacity, table).
        params: the scene's Params; uses `params.self_contact.thickness` (m).
        x: [n, 3] m, particle positions.

    Returns:
        () bool (traced inside jit).
    """
    return candidates(topology.self_contact, x, params.self_contact.thickness)[2]
