"""The unit meshes colliders are drawn with and met by Blender's collision response: an icosphere, a capsule's
hemispheres and band, and Blender's UV sphere (`physics.colliders` scales, rotates and places them)."""

from __future__ import annotations

import numpy as np

#: Triangles of a capsule's mesh: its hemispheres and cylinder CAPSULE_SEGMENTS around and CAPSULE_RINGS bands each.
CAPSULE_SEGMENTS, CAPSULE_RINGS = 16, 4


def icosphere(subdivisions: int = 2):
    """(unit vertices [m, 3], faces [f, 3]) of an icosphere, counter-clockwise seen from outside.

    Args:
        subdivisions: how many times each face is split into four (2: 320 faces).

    Returns:
        (vertices [m, 3] float64 on the unit sphere, faces [f, 3] int32).
    """
    t = (1.0 + 5.0 ** 0.5) / 2.0
    v = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t],
         [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    f = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2], [10, 7, 6],
         [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10],
         [8, 6, 7], [9, 8, 1]]
    vertices = [np.array(p, np.float64) / np.linalg.norm(p) for p in v]
    faces = f
    for _ in range(subdivisions):
        middle: dict = {}

        def mid(a, b):
            key = (min(a, b), max(a, b))
            if key not in middle:
                p = vertices[a] + vertices[b]
                vertices.append(p / np.linalg.norm(p))
                middle[key] = len(vertices) - 1
            return middle[key]

        faces = [g for a, b, c in faces for g in ([a, mid(a, b), mid(c, a)], [b, mid(b, c), mid(a, b)],
                                                  [c, mid(c, a), mid(b, c)], [mid(a, b), mid(b, c), mid(c, a)])]
    return np.array(vertices), np.array(faces, np.int32)


def capsule_template():
    """(unit-sphere vertices [m, 3], the side each belongs to [m] (+1 upper, -1 lower hemisphere), faces): a UV
    sphere cut at the equator into two hemispheres, each with its own equator ring, and the band between the
    rings (the cylinder: its height is 2 half heights once the hemispheres are moved apart)."""
    rows = []  # (polar angle, side) from the north pole down
    for k in range(CAPSULE_RINGS + 1):
        rows.append((0.5 * np.pi * k / CAPSULE_RINGS, 1.0))
    for k in range(CAPSULE_RINGS + 1):
        rows.append((0.5 * np.pi * (1.0 + k / CAPSULE_RINGS), -1.0))
    s = CAPSULE_SEGMENTS
    phi = 2.0 * np.pi * np.arange(s) / s
    vertices, sides = [], []
    for theta, side in rows:
        ring = np.stack([np.sin(theta) * np.cos(phi), np.full(s, np.cos(theta)), np.sin(theta) * np.sin(phi)], 1)
        vertices.append(ring)
        sides.append(np.full(s, side))
    vertices, sides = np.concatenate(vertices), np.concatenate(sides)
    faces = []
    for r in range(len(rows) - 1):
        for j in range(s):
            a, b = r * s + j, r * s + (j + 1) % s
            c, d = a + s, b + s
            if r != 0:  # the pole rows are one point repeated: skip the zero-area triangles there
                faces.append([a, b, c])
            if r != len(rows) - 2:
                faces.append([b, d, c])
    return vertices, sides, np.array(faces, np.int32)


def uv_sphere(segments: int, rings: int):
    """(unit vertices [m, 3], faces [f, 3]) of a UV sphere as Blender builds one: poles on the z axis (+z first),
    `rings` bands of `segments` quads (each split along its diagonal from the upper-left corner), fans at the
    poles, the first meridian along +x; counter-clockwise seen from outside.

    Args:
        segments: quads around (Blender's default 32).
        rings: bands from pole to pole (Blender's default 16).

    Returns:
        (vertices [2 + segments (rings - 1), 3] float64, faces [2 segments (rings - 1), 3] int32).
    """
    theta = np.pi * np.arange(1, rings) / rings
    phi = 2.0 * np.pi * np.arange(segments) / segments
    ring = np.stack([np.sin(theta)[:, None] * np.cos(phi), np.sin(theta)[:, None] * np.sin(phi),
                     np.broadcast_to(np.cos(theta)[:, None], (rings - 1, segments))], -1).reshape(-1, 3)
    vertices = np.concatenate([[[0.0, 0.0, 1.0]], ring, [[0.0, 0.0, -1.0]]])
    last = len(vertices) - 1

    def at(j, k):  # ring j (1 .. rings - 1), meridian k
        return 1 + (j - 1) * segments + k % segments

    faces = []
    for k in range(segments):
        faces.append((0, at(1, k), at(1, k + 1)))
        faces.append((last, at(rings - 1, k + 1), at(rings - 1, k)))
    for j in range(1, rings - 1):
        for k in range(segments):
            q = (at(j, k), at(j + 1, k), at(j + 1, k + 1), at(j, k + 1))
            faces.append((q[0], q[1], q[2]))
            faces.append((q[0], q[2], q[3]))
    faces = np.array(faces, np.int32)
    corner = vertices[faces]
    outward = np.sum(np.cross(corner[:, 1] - corner[:, 0], corner[:, 2] - corner[:, 0]) * corner.mean(1), -1) > 0
    return vertices, np.where(outward[:, None], faces, faces[:, ::-1]).astype(np.int32)


