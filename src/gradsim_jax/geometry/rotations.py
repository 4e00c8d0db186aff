"""Host-side rotations of scene builders: unit quaternions (w, x, y, z) from an axis and an angle, and
points rotated by them."""

from __future__ import annotations

import numpy as np


def quat_from_axis_angle(axis, angle) -> np.ndarray:
    """Unit quaternion (w, x, y, z) rotating by `angle` rad about `axis`.

    Args:
        axis: [3], the rotation axis (any nonzero length; normalised here).
        angle: rad, the rotation angle (right-handed about `axis`).

    Returns:
        [4] float64, the unit quaternion (w, x, y, z).
    """
    axis = np.asarray(axis, np.float64)
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2.0)], np.sin(angle / 2.0) * axis])


def quat_rotate(q, p) -> np.ndarray:
    """Rotate points p [..., 3] by the unit quaternion q = (w, x, y, z).

    Args:
        q: [4], the unit quaternion (w, x, y, z).
        p: [..., 3], the points (any length unit; the result is in the same unit).

    Returns:
        [..., 3] float64, the rotated points.
    """
    w, u = q[0], np.asarray(q[1:], np.float64)
    p = np.asarray(p, np.float64)
    return p + 2.0 * w * np.cross(u, p) + 2.0 * np.cross(u, np.cross(u, p))
