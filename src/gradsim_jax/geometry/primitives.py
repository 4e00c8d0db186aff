"""Closed triangle meshes of primitive solids (`geometry.rigid`'s conventions): box, icosphere, superquadric,
cylinder, capsule and cone, each centred on its centre of mass with its axis of symmetry along y, float64
vertices (m) and int32 faces, outward-oriented.
"""

from __future__ import annotations

import math
import numbers

import numpy as np


def positive_length(name: str, value) -> float:
    """A positive, finite real number as a float (a length, a density, a mass), or a ValueError naming it.

    Args:
      name: what the message calls the value.
      value: the number given.

    Returns:
      float(value).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


def _count(name: str, value, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not minimum <= int(value) <= maximum:
        raise ValueError(f"{name} must be in [{minimum}, {maximum}], got {value}")
    return int(value)


def _revolve(radii, heights, segments: int) -> tuple[np.ndarray, np.ndarray]:
    """Surface of revolution about y from a profile running from a top pole to a bottom pole.

    `radii`/`heights` [k]: the profile, first and last points on the axis (radius 0), the others rings of
    `segments` vertices. Faces wind outward (counter-clockwise from outside).
    """
    radii, heights = np.asarray(radii, np.float64), np.asarray(heights, np.float64)
    ring_r, ring_y = radii[1:-1], heights[1:-1]
    rings = ring_r.size
    phi = 2.0 * np.pi * np.arange(segments) / segments
    ring_xyz = np.stack([ring_r[:, None] * np.cos(phi), np.broadcast_to(ring_y[:, None], (rings, segments)),
                         ring_r[:, None] * np.sin(phi)], axis=-1).reshape(-1, 3)
    vertices = np.concatenate([[[0.0, heights[0], 0.0]], ring_xyz, [[0.0, heights[-1], 0.0]]])
    top, bottom = 0, vertices.shape[0] - 1
    j = np.arange(segments)
    jn = (j + 1) % segments

    def ring(k, jj):
        return 1 + k * segments + jj

    top_fan = np.stack([np.full(segments, top), ring(0, jn), ring(0, j)], axis=1)
    bottom_fan = np.stack([np.full(segments, bottom), ring(rings - 1, j), ring(rings - 1, jn)], axis=1)
    k = np.arange(rings - 1)[:, None]
    a, b, c, d = ring(k, j), ring(k, jn), ring(k + 1, jn), ring(k + 1, j)
    bands = np.concatenate([np.stack([a, b, c], -1), np.stack([a, c, d], -1)], axis=1).reshape(-1, 3)
    faces = np.concatenate([top_fan, bands, bottom_fan]).astype(np.int32)
    return vertices, faces


def box_mesh(hx: float, hy: float, hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Box of half extents (hx, hy, hz) m centred at the origin: 8 vertices float64, 12 faces int32.

    Args:
      hx: m, half extent along x.
      hy: m, half extent along y.
      hz: m, half extent along z.

    Returns:
      (vertices [n, 3] float64 m, faces [f, 3] int32, outward).
    """
    h = np.array([positive_length("hx", hx), positive_length("hy", hy), positive_length("hz", hz)])
    corner = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64)
    # Corner index = 4 [x>0] + 2 [y>0] + [z>0]; each quad listed counter-clockwise from outside.
    quads = np.array([[0, 1, 3, 2], [4, 6, 7, 5],   # -x, +x
                      [0, 4, 5, 1], [2, 3, 7, 6],   # -y, +y
                      [0, 2, 6, 4], [1, 5, 7, 3]])  # -z, +z
    faces = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]]).astype(np.int32)
    return corner * h, faces


def _icosahedron() -> tuple[np.ndarray, np.ndarray]:
    """Unit-circumradius icosahedron; faces found as the 20 triples of mutually adjacent vertices."""
    g = (1.0 + math.sqrt(5.0)) / 2.0
    base = []
    for s1 in (-1.0, 1.0):
        for s2 in (-1.0, 1.0):
            base += [[0.0, s1, s2 * g], [s1, s2 * g, 0.0], [s2 * g, 0.0, s1]]
    v = np.array(base)
    dist = np.linalg.norm(v[:, None] - v[None], axis=-1)
    adjacent = np.isclose(dist, 2.0)  # the edge length for these coordinates
    i, j, k = np.array([(i, j, k) for i in range(12) for j in range(i + 1, 12) for k in range(j + 1, 12)]).T
    keep = adjacent[i, j] & adjacent[j, k] & adjacent[i, k]
    faces = np.stack([i[keep], j[keep], k[keep]], axis=1)
    normal = np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])
    inward = np.sum(normal * v[faces].sum(axis=1), axis=1) < 0
    faces[inward] = faces[inward][:, [0, 2, 1]]
    return v / np.linalg.norm(v, axis=1, keepdims=True), faces


def sphere_mesh(radius: float, subdivisions: int = 3, *, fit: str = "volume") -> tuple[np.ndarray, np.ndarray]:
    """Icosphere standing for the ball of radius `radius` m: an icosahedron whose faces are split in four
    `subdivisions` times, new vertices pushed onto the sphere. 10 4^s + 2 vertices, 20 4^s faces (s <= 9).

    Args:
      radius: m, the ball's radius.
      subdivisions: s, times each face is split in four.
      fit: "volume" (default): the vertices are scaled (by 1.0015 at s = 3) so that the polyhedron's volume is
        the ball's, 4/3 pi r^3. Its mass is then the ball's exactly, and its inertia too up to O(h^4), because
        a ball minimizes I/m at a fixed volume (measured: 2e-7 relative at s = 4). A body built from it weighs
        what a sphere of that radius weighs. "vertices": the vertices lie on the sphere (inscribed), whose volume
        is short by O(h^2): 1.2 % at s = 3, 2.3e-4 in the inertia at s = 6.

    Returns:
      (vertices [n, 3] float64 m, faces [f, 3] int32, outward).
    """
    radius = positive_length("radius", radius)
    subdivisions = _count("subdivisions", subdivisions, 0, 9)
    if fit not in ("volume", "vertices"):
        raise ValueError(f"sphere_mesh: fit must be 'volume' or 'vertices', got {fit!r}")
    v, f = _icosahedron()
    for _ in range(subdivisions):
        edges = np.sort(f[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
        unique, inverse = np.unique(edges, axis=0, return_inverse=True)
        mid = v[unique].mean(axis=1)
        v = np.concatenate([v, mid / np.linalg.norm(mid, axis=1, keepdims=True)])
        m = (inverse.reshape(-1) + (v.shape[0] - unique.shape[0])).reshape(-1, 3)  # midpoints ab, bc, ca
        a, b, c = f.T
        ab, bc, ca = m.T
        f = np.concatenate([np.stack(t, axis=1) for t in ((a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca))])
    if fit == "volume":  # unit-sphere polyhedron: volume = sum of the origin's tetrahedra
        volume = np.einsum("ij,ij->i", v[f[:, 0]], np.cross(v[f[:, 1]], v[f[:, 2]])).sum() / 6.0
        v = v * (4.0 / 3.0 * np.pi / volume) ** (1.0 / 3.0)
    return v * radius, f.astype(np.int32)


def superquadric_mesh(semi_axes=(1.0, 1.0, 1.0), exponent: float = 0.5, subdivisions: int = 3
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Superquadric |x/a|^(2/e) + |y/b|^(2/e) + |z/c|^(2/e) = 1 as a closed triangle mesh:
    the unit icosphere of `subdivisions` (`sphere_mesh`, outward faces) with each vertex moved along its
    direction onto the surface. The surface is star-shaped about its centre, so the mesh stays closed and
    keeps its faces' orientation; its vertices lie on the surface exactly.

    Args:
      semi_axes: (a, b, c) m.
      exponent: e, 1 an ellipsoid, below 1 towards a box, above 1 towards an octahedron, in [0.1, 4].
      subdivisions: of the icosphere (`sphere_mesh`).

    Returns:
      (vertices [n, 3] float64 m, faces [f, 3] int32, outward).
    """
    axes = [positive_length(f"semi_axes[{k}]", a) for k, a in enumerate(semi_axes)] if len(semi_axes) == 3 else None
    if axes is None:
        raise ValueError(f"superquadric_mesh: semi_axes must be three lengths (a, b, c), got {semi_axes!r}")
    exponent = positive_length("exponent", exponent)
    if not 0.1 <= exponent <= 4.0:
        raise ValueError(f"superquadric_mesh: exponent must be in [0.1, 4], got {exponent}")
    v, f = sphere_mesh(1.0, subdivisions, fit="vertices")
    p = 2.0 / exponent
    # Radius along unit direction d: (sum_k |d_k / a_k|^p)^(-1/p); scaled by the largest term first so that
    # large p does not underflow.
    terms = np.abs(v / np.asarray(axes))
    top = terms.max(axis=1, keepdims=True)
    radius = 1.0 / (top[:, 0] * np.sum((terms / top) ** p, axis=1) ** (1.0 / p))
    return v * radius[:, None], f


def cylinder_mesh(radius: float, height: float, segments: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Cylinder (a regular `segments`-gon prism inscribed in it) of axis y, from y = -height/2 to height/2;
    caps fanned from a centre vertex. Vertices on the circle of `radius` m.

    Args:
      radius: m.
      height: m.
      segments: sides of the polygon.

    Returns:
      (vertices [n, 3] float64 m, faces [f, 3] int32, outward).
    """
    r, h = positive_length("radius", radius), positive_length("height", height)
    segments = _count("segments", segments, 3, 1 << 20)
    return _revolve([0.0, r, r, 0.0], [h / 2, h / 2, -h / 2, -h / 2], segments)


def capsule_mesh(radius: float, height: float, segments: int = 32, rings: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Capsule of axis y: a cylinder capped by two hemispheres. Total length height + 2 radius.

    Args:
      radius: m, of the cylinder and the hemispheres.
      height: m, of the cylindrical part only (>= 0; 0 gives a UV sphere).
      segments: around the axis.
      rings: latitude bands of each hemisphere.

    Returns:
      (vertices [n, 3] float64 m, faces [f, 3] int32, outward).
    """
    r = positive_length("radius", radius)
    if isinstance(height, bool) or not isinstance(height, numbers.Real) or not (
            math.isfinite(float(height)) and float(height) >= 0):
        raise ValueError(f"height must be a finite number >= 0, got {height!r}")
    h = float(height)
    segments = _count("segments", segments, 3, 1 << 20)
    rings = _count("rings", rings, 1, 1 << 16)
    theta = 0.5 * np.pi * np.arange(rings + 1) / rings  # from the pole (0) to the equator (pi/2)
    cap_r, cap_y = r * np.sin(theta), h / 2 + r * np.cos(theta)
    equator = 1 if h == 0 else 0  # with no cylinder the two equators coincide: keep one
    radii = np.concatenate([cap_r, cap_r[::-1][equator:]])
    heights = np.concatenate([cap_y, -cap_y[::-1][equator:]])
    return _revolve(radii, heights, segments)


def cone_mesh(radius: float, height: float, segments: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Cone (a regular `segments`-gon pyramid inscribed in it) of axis y. Base at y = -height/4 and apex at
    y = 3 height/4, so that the centre of mass is at the origin like every other primitive here (a pyramid's
    centroid lies a quarter of its height above the base, for any base polygon, so this holds exactly for the
    tessellation too).

    Args:
      radius: m, of the base.
      height: m.
      segments: sides of the base polygon.

    Returns:
      (vertices [n, 3] float64 m, faces [f, 3] int32, outward).
    """
    r, h = positive_length("radius", radius), positive_length("height", height)
    segments = _count("segments", segments, 3, 1 << 20)
    return _revolve([0.0, r, 0.0], [0.75 * h, -0.25 * h, -0.25 * h], segments)
