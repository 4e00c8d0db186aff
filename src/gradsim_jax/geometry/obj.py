"""Wavefront OBJ mesh files read on the host: vertices and triangles as numpy arrays.

Only `v` and `f` lines matter; texture coordinates, normals, groups and materials are skipped, and a
polygon is fanned into triangles from its first vertex. Indices in the file start at 1 (negative ones count
back from the last vertex read so far); the arrays returned start at 0. Every refusal is a `MeshFileError`
naming the file, and the line where there is one.
"""

from __future__ import annotations

import math

import numpy as np


class MeshFileError(ValueError):
    """A mesh file cannot be read: the message names the file (and `file:line` for a bad line)."""


def read_obj(path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices [n, 3] (float64) and triangles [t, 3] (int32, 0-based) of an OBJ file.

    Args:
        path: path of the OBJ file (str or path-like).

    Returns:
        (vertices [n, 3] float64 in the file's length unit, triangles [t, 3] int32 0-based vertex indices).

    Raises:
        MeshFileError: the file has a bad line, no vertices or no faces, or a face names a missing vertex.
    """
    vertices, faces, face_lines = [], [], []
    # Bytes that are not UTF-8 become U+FFFD: harmless in a comment, a line error in a number.
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                if parts[0] == "v":
                    if len(parts) < 4:
                        raise ValueError("a vertex needs 3 coordinates")
                    xyz = [float(v) for v in parts[1:4]]
                    if not all(math.isfinite(c) for c in xyz):
                        raise ValueError("coordinates must be finite")
                    vertices.append(xyz)
                elif parts[0] == "f":
                    if len(parts) < 4:
                        raise ValueError("a face needs at least 3 vertices")
                    idx = [int(p.split("/")[0]) for p in parts[1:]]
                    if 0 in idx:
                        raise ValueError("vertex indices start at 1 (negative ones count back from the last vertex)")
                    idx = [i - 1 if i > 0 else len(vertices) + i for i in idx]
                    if min(idx) < 0:
                        raise ValueError(f"a negative index reaches before the first vertex ({len(vertices)} so far)")
                    faces.extend([idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1))
                    face_lines.extend([(number, line)] * (len(idx) - 2))
            except ValueError as e:
                raise MeshFileError(f"{path}:{number}: cannot read OBJ line {line.strip()!r}: {e}") from e
    if not vertices or not faces:
        raise MeshFileError(f"{path}: the OBJ file has no vertices or no faces")
    for face, (number, line) in zip(faces, face_lines):
        if max(face) >= len(vertices):
            raise MeshFileError(f"{path}:{number}: OBJ face {line.strip()!r} names vertex {max(face) + 1}, but the "
                                f"file has {len(vertices)} vertices")
    return np.asarray(vertices, np.float64), np.asarray(faces, np.int32)


__all__ = ["MeshFileError", "read_obj"]
