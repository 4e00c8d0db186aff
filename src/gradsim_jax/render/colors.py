"""Host-side albedo patterns: per-face colours computed once with numpy from a mesh's rest positions.

`checker_colors` paints a hue gradient times a checkerboard, so that motion inside a silhouette is visible
to a camera (a uniformly coloured cloth shows only its outline). The result feeds `FaceColors`.
"""

from __future__ import annotations

import numpy as np

# Sector of the hue circle -> which of (value, t, p, q) is red, green, blue: colorsys.hsv_to_rgb's table.
_HSV_SECTORS = np.array([[0, 1, 2], [3, 0, 2], [2, 0, 1], [2, 3, 0], [1, 2, 0], [0, 2, 3]])


def hsv_to_rgb(hue, saturation: float, value) -> np.ndarray:
    """`colorsys.hsv_to_rgb` over arrays: hue [...] in [0, 1), value [...] -> RGB [..., 3] (float64).

    Saturation is one positive number (colorsys's grey shortcut at 0 is not needed here).

    Args:
        hue: [...] in [0, 1).
        saturation: in (0, 1].
        value: [...] (broadcast against hue), the brightness in [0, 1].

    Returns:
        [..., 3] RGB, float64.
    """
    h6 = np.asarray(hue, np.float64) * 6.0
    value = np.broadcast_to(np.asarray(value, np.float64), h6.shape)
    sector = np.floor(h6).astype(int)
    frac = h6 - sector
    p = value * (1.0 - saturation)
    q = value * (1.0 - saturation * frac)
    t = value * (1.0 - saturation * (1.0 - frac))
    channels = np.stack([value, t, p, q], axis=-1)
    return np.take_along_axis(channels, _HSV_SECTORS[sector % 6], axis=-1)


def checker_colors(triangles, x) -> np.ndarray:
    """Per-face RGB [F, 3] (float32) for `triangles` [F, 3] over positions `x` [n, 3]: hue from the face
    centroid's position along the mesh's two longest extents, an 8 x 8 checkerboard in brightness.

    Args:
        triangles: [F, 3] int, vertex indices of each face.
        x: [n, 3] m, the rest positions of the vertices.

    Returns:
        [F, 3] RGB in [0, 1], float32.
    """
    tris = np.asarray(triangles)
    if tris.shape[0] == 0:
        return np.zeros((0, 3), np.float32)
    x = np.asarray(x, np.float64)
    centroid = x[tris].mean(axis=1)
    lo, hi = centroid.min(0), centroid.max(0)
    t = (centroid - lo) / np.maximum(hi - lo, 1e-9)
    ext = np.argsort(-(hi - lo))[:2]
    u = np.floor(t[:, ext[0]] * 7.999).astype(int)
    v = np.floor(t[:, ext[1]] * 7.999).astype(int)
    parity = ((u + v) % 2).astype(float)
    hue = 0.85 * (0.6 * t[:, ext[0]] + 0.4 * t[:, ext[1]])
    return hsv_to_rgb(hue, 0.75, 1.0 - 0.45 * parity).astype(np.float32)


__all__ = ["checker_colors", "hsv_to_rgb"]
