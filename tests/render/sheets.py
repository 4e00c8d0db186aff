"""Meshes the render tests share."""

import numpy as np


def wavy_sheet(nx=6, ny=4, cell=0.25, dtype=np.float32):
    """A wavy sheet in the z = 0.1 sin(3 x) surface: nx x ny cells of `cell` m, two triangles each, many faces
    meeting at shared edges, no overlap seen from the front.

    Args:
        nx: cells along x.
        ny: cells along y.
        cell: m, a cell's side.
        dtype: the vertices' dtype.

    Returns:
        (vertices [(nx + 1) (ny + 1), 3] m, faces [2 nx ny, 3] int32).
    """
    xs = np.arange(nx + 1) * cell - nx * cell / 2
    ys = np.arange(ny + 1) * cell - ny * cell / 2
    x, y = np.meshgrid(xs, ys)
    v = np.stack([x.ravel(), y.ravel(), 0.1 * np.sin(3 * x.ravel())], 1).astype(dtype)
    faces = []
    for j in range(ny):
        for i in range(nx):
            a = j * (nx + 1) + i
            faces += [[a, a + 1, a + nx + 2], [a, a + nx + 2, a + nx + 1]]
    return v, np.array(faces, np.int32)
