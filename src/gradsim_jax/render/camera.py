"""Pinhole cameras for the soft rasterizer: look-at pose and perspective projection.

Conventions (SoftRas, Liu et al. 2019, "Soft Rasterizer: A Differentiable Renderer for Image-based 3D
Reasoning", and gradSim, which uses it):
- World: y up. A camera looks from `eye` towards `at`; its axes are z = normalize(at - eye),
  x = normalize(up x z), y = z x x (x right, y up, z forward into the scene).
- `look_at_camera(distance, elevation, azimuth)` (degrees) puts the eye at
  d (cos el sin az, sin el, -cos el cos az) relative to `at`: azimuth 0, elevation 0 looks along +z.
- Perspective: a camera-space point (x, y, z) lands at the screen point
  (x / (z tan(view_angle)), y / (z tan(view_angle))). `view_angle` is the half-angle of the vertical
  field of view (SoftRas's `viewing_angle`, 30 degrees by default). The screen spans y in [-1, 1] and
  x in [-W/H, W/H], so pixels are square and screen distances are isotropic (for W = H this is NDC).
- Pixel (row r, column c) has its center at x = (2c + 1 - W) / H, y = (H - 2r - 1) / H: row 0 is the
  top of the image. For a square image these are SoftRas's (2i + 1 - W) / W.
- `near`, `far` (scene units along the view axis) bound the depth range; the renderer drops faces that
  are not entirely between them and maps depth to z_hat = (far - z) / (far - near).

`Camera` is a frozen dataclass registered as a pytree: eye, at, up, view_angle, near and far are float
data (a camera can be a fitted parameter); width and height are static ints (the image shape).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_normalize

Array = Any


@dataclasses.dataclass(frozen=True)
class Camera:
    """A look-at pinhole camera.

    Attributes:
      eye: [3] camera position (world units).
      at: [3] point the camera looks at.
      up: [3] approximate up direction (need not be orthogonal to the view direction).
      view_angle: half-angle of the vertical field of view, degrees (scalar).
      near, far: depth range along the view axis (scalars, world units), 0 < near < far.
      width, height: image size in pixels (static).
    """

    eye: Array
    at: Array
    up: Array
    view_angle: Array
    near: Array
    far: Array
    width: int = 64
    height: int = 64

    @property
    def aspect(self) -> float:
        return self.width / self.height


jax.tree_util.register_dataclass(
    Camera,
    data_fields=["eye", "at", "up", "view_angle", "near", "far"],
    meta_fields=["width", "height"],
)


def _check_image_size(width: int, height: int) -> None:
    if not (isinstance(width, (int, np.integer)) and isinstance(height, (int, np.integer))):
        raise TypeError(f"width and height must be Python ints, got {width!r}, {height!r}")
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got width={width}, height={height}")


def camera_from_eye(
    eye,
    at=(0.0, 0.0, 0.0),
    up=(0.0, 1.0, 0.0),
    *,
    view_angle=30.0,
    near=1.0,
    far=100.0,
    width: int = 64,
    height: int = 64,
    dtype=None,
) -> Camera:
    """Camera at `eye` looking at `at` with approximate `up`; all floats become arrays of `dtype`.

    `dtype` defaults to the dtype of `eye` when it is a float array, else float32.
    """
    _check_image_size(width, height)
    if dtype is None:
        dtype = eye.dtype if hasattr(eye, "dtype") and jnp.issubdtype(eye.dtype, jnp.floating) else jnp.float32

    def as_float(v):
        return jnp.asarray(v, dtype=dtype)

    return Camera(
        eye=as_float(eye),
        at=as_float(at),
        up=as_float(up),
        view_angle=as_float(view_angle),
        near=as_float(near),
        far=as_float(far),
        width=int(width),
        height=int(height),
    )


def eye_from_spherical(distance, elevation, azimuth):
    """Eye offset d (cos el sin az, sin el, -cos el cos az) for angles in degrees; differentiable."""
    el = jnp.deg2rad(elevation)
    az = jnp.deg2rad(azimuth)
    return distance * jnp.stack([jnp.cos(el) * jnp.sin(az), jnp.sin(el), -jnp.cos(el) * jnp.cos(az)])


def look_at_camera(
    distance,
    elevation,
    azimuth,
    *,
    at=(0.0, 0.0, 0.0),
    up=(0.0, 1.0, 0.0),
    view_angle=30.0,
    near=1.0,
    far=100.0,
    width: int = 64,
    height: int = 64,
    dtype=None,
) -> Camera:
    """Camera `distance` away from `at` at `elevation` and `azimuth` (degrees), SoftRas convention.

    The angles may be traced values: gradients flow from the image back to distance/elevation/azimuth.
    """
    if dtype is None:
        d = jnp.asarray(distance)
        dtype = d.dtype if jnp.issubdtype(d.dtype, jnp.floating) else jnp.float32
    at = jnp.asarray(at, dtype=dtype)
    eye = at + eye_from_spherical(
        jnp.asarray(distance, dtype), jnp.asarray(elevation, dtype), jnp.asarray(azimuth, dtype)
    )
    return camera_from_eye(
        eye, at, up, view_angle=view_angle, near=near, far=far, width=width, height=height, dtype=dtype
    )


def camera_axes(camera: Camera):
    """Rotation [3, 3] whose rows are the camera's x (right), y (up), z (forward) axes in world space."""
    z = safe_normalize(camera.at - camera.eye)
    x = safe_normalize(jnp.cross(camera.up, z))
    y = jnp.cross(z, x)
    return jnp.stack([x, y, z])


def world_to_camera(camera: Camera, points):
    """Camera-space coordinates [..., 3] of world points [..., 3] (z is the depth along the view axis)."""
    return (points - camera.eye) @ camera_axes(camera).T


def screen_scale(camera: Camera):
    """1 / tan(view_angle): screen = camera xy * screen_scale / z."""
    return 1.0 / jnp.tan(jnp.deg2rad(camera.view_angle))


def project(camera: Camera, points):
    """Screen coordinates [..., 2] and depth z [...] of world points [..., 3].

    Points at or behind the near plane get screen coordinates from a guarded depth (finite, with finite
    gradients) but are meaningless; callers mask them with `z > camera.near`.
    """
    cam = world_to_camera(camera, points)
    z = cam[..., 2]
    in_front = z > camera.near
    safe_z = jnp.where(in_front, z, jnp.ones_like(z))
    xy = cam[..., :2] * (screen_scale(camera) / safe_z)[..., None]
    return jnp.where(in_front[..., None], xy, jnp.zeros_like(xy)), z


def pixel_centers(width: int, height: int, dtype=np.float32) -> np.ndarray:
    """Screen coordinates [height, width, 2] (x, y) of pixel centers; row 0 is the top of the image."""
    cols = (2.0 * np.arange(width) + 1.0 - width) / height
    rows = (height - 2.0 * np.arange(height) - 1.0) / height
    xx, yy = np.meshgrid(cols, rows)
    return np.stack([xx, yy], axis=-1).astype(dtype)


def screen_to_pixel(camera: Camera, xy):
    """Continuous pixel coordinates (column, row) [..., 2] of screen points; pixel centers are integers."""
    col = (xy[..., 0] * camera.height + camera.width - 1.0) * 0.5
    row = (camera.height - 1.0 - xy[..., 1] * camera.height) * 0.5
    return jnp.stack([col, row], axis=-1)


def with_image_size(camera: Camera, width: int, height: int) -> Camera:
    """The same camera rendering a `width` x `height` image."""
    _check_image_size(width, height)
    return dataclasses.replace(camera, width=int(width), height=int(height))
