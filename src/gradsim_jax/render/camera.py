"""Pinhole cameras for the soft rasterizer: pose, intrinsics and perspective projection.

One camera model, in OpenCV's terms, so that a calibrated real camera and a synthetic look-at camera are
the same object:
- Pose: a world point X maps to camera coordinates X_c = R X + t (`rotation` R [3, 3], a proper rotation,
  and `translation` t [3]), with OpenCV's axes: x to the image's right, y down the image, z forward (the
  viewing direction). The eye (camera centre) is -R^T t.
- Intrinsics: pixel coordinates u = fx X_c / Z_c + cx (column), v = fy Y_c / Z_c + cy (row), with the
  centre of the top-left pixel at (0, 0) (OpenCV's convention). No lens distortion here: distorted target
  frames are undistorted before a fit (`gradsim_jax.render.calibration`).
- Handedness: what a real camera shows. A camera on +z looking at the origin with +y up sees world +x on
  the right of the image and +y at the top (as PyTorch3D, OpenGL, Blender do). gradSim's SoftRas took
  x = up x forward, which mirrors the image left-right; this module does not.
- Look-at cameras (`look_at_camera`, `camera_from_eye`) keep SoftRas's parameters: `look_at_camera(d,
  elevation, azimuth)` (degrees) puts the eye at d (cos el sin az, sin el, -cos el cos az) from `at`;
  the camera's right is normalize(forward x up), its up is right x forward; `view_angle` is the half-angle
  of the vertical field of view (30 degrees by default), so fy = fx = H / (2 tan(view_angle)), and the
  principal point is the image centre ((W - 1) / 2, (H - 1) / 2).
- Screen coordinates, used by the rasterizer: pixels scaled by 2 / H about the image centre,
  x_s = (2u + 1 - W) / H, y_s = (H - 2v - 1) / H (y up), so pixels are square and screen distances
  isotropic (for W = H this is NDC, and for a look-at camera x_s = x / (z tan(view_angle))).
- `near`, `far` (scene units along the view axis) bound the depth range; the renderer drops faces that
  are not entirely between them and maps depth to z_hat = (far - z) / (far - near).

`Camera` is a frozen dataclass registered as a pytree: rotation, translation, focal, principal, near and
far are float data, so every camera quantity can be differentiated or fitted (build the camera inside the
traced function from distance/elevation/azimuth, from rvec/tvec, or from fx/fy/cx/cy); width and height
are static ints (the image shape).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.mathutil import safe_normalize

Array = Any

# OpenCV camera axes (x right, y down, z forward) -> the renderer's (x right, y up, z forward).
_Y_UP = np.array([1.0, -1.0, 1.0])


@dataclasses.dataclass(frozen=True)
class Camera:
    """A pinhole camera (OpenCV conventions; see the module docstring).

    Attributes:
      rotation: [3, 3] world-to-camera rotation R (rows: the camera's right, down, forward axes in world).
      translation: [3] t, so that camera coordinates are R X + t (world units).
      focal: [2] (fx, fy) in pixels.
      principal: [2] (cx, cy) in pixels; the top-left pixel's centre is (0, 0).
      near, far: depth range along the view axis (scalars, world units), 0 < near < far.
      width, height: image size in pixels (static).
    """

    rotation: Array
    translation: Array
    focal: Array
    principal: Array
    near: Array
    far: Array
    width: int = 64
    height: int = 64

    @property
    def aspect(self) -> float:
        return self.width / self.height

    @property
    def eye(self):
        """[3] the camera centre in world coordinates, -R^T t."""
        return -(self.rotation.T @ self.translation)

    @property
    def intrinsic_matrix(self):
        """[3, 3] K = [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] (OpenCV's camera matrix)."""
        fx, fy = self.focal[0], self.focal[1]
        cx, cy = self.principal[0], self.principal[1]
        zero, one = jnp.zeros_like(fx), jnp.ones_like(fx)
        return jnp.stack([jnp.stack([fx, zero, cx]), jnp.stack([zero, fy, cy]), jnp.stack([zero, zero, one])])

    @classmethod
    def from_intrinsics(
        cls,
        fx,
        fy,
        cx,
        cy,
        width: int,
        height: int,
        *,
        world_to_camera=None,
        rvec=None,
        tvec=None,
        eye=None,
        at=(0.0, 0.0, 0.0),
        up=(0.0, 1.0, 0.0),
        near=0.1,
        far=100.0,
        dtype=None,
    ) -> "Camera":
        """A calibrated camera: intrinsics in pixels and exactly one pose.

        Pose, one of: `world_to_camera` [4, 4] (or [3, 4]) matrix [R | t] (OpenCV extrinsics);
        `rvec`, `tvec` (OpenCV's Rodrigues vector and translation, as `cv2.solvePnP` or
        `cv2.calibrateCamera` return them); `eye` with `at` and `up` (a look-at pose).
        Every float may be a traced value (differentiable).

        Args:
            fx: pixels, the focal length along the image's columns.
            fy: pixels, the focal length along the image's rows.
            cx: pixels, the principal point's column (the top-left pixel's centre is 0).
            cy: pixels, the principal point's row.
            width: image width in pixels (static int).
            height: image height in pixels (static int).
            world_to_camera: [4, 4] or [3, 4] matrix [R | t] (OpenCV extrinsics, world units), or None.
            rvec: [3] rad, OpenCV's Rodrigues vector (axis times angle), with `tvec`; or None.
            tvec: [3] world units, OpenCV's translation, with `rvec`; or None.
            eye: [3] world units, the camera centre of a look-at pose, or None.
            at: [3] world units, the point the look-at camera looks at (with `eye`).
            up: [3], the look-at camera's approximate up direction (with `eye`).
            near: world units, the near end of the depth range (0 < near < far).
            far: world units, the far end of the depth range.
            dtype: the camera's float dtype (None: that of the first float array among fx, rvec, eye,
                world_to_camera, else float32).
        """
        given = [world_to_camera is not None, rvec is not None or tvec is not None, eye is not None]
        if sum(given) != 1:
            raise ValueError("Camera.from_intrinsics needs exactly one pose: world_to_camera, rvec and tvec, "
                             "or eye (with at and up)")
        if dtype is None:
            dtype = _float_dtype(fx, rvec, eye, world_to_camera)
        if world_to_camera is not None:
            m = jnp.asarray(world_to_camera, dtype)
            if m.shape not in ((4, 4), (3, 4)):
                raise ValueError(f"world_to_camera must be a [4, 4] or [3, 4] matrix, got shape {m.shape}")
            rotation, translation = m[:3, :3], m[:3, 3]
        elif eye is not None:
            rotation, translation = look_at_pose(jnp.asarray(eye, dtype), jnp.asarray(at, dtype),
                                                 jnp.asarray(up, dtype))
        else:
            if rvec is None or tvec is None:
                raise ValueError("give both rvec and tvec")
            rotation = rotation_from_rvec(jnp.asarray(rvec, dtype).reshape(3))
            translation = jnp.asarray(tvec, dtype).reshape(3)
        return _make(rotation, translation, jnp.stack([jnp.asarray(fx, dtype), jnp.asarray(fy, dtype)]),
                     jnp.stack([jnp.asarray(cx, dtype), jnp.asarray(cy, dtype)]), near, far, width, height, dtype)


jax.tree_util.register_dataclass(
    Camera,
    data_fields=["rotation", "translation", "focal", "principal", "near", "far"],
    meta_fields=["width", "height"],
)


def _float_dtype(*values):
    for v in values:
        if v is not None and hasattr(v, "dtype") and jnp.issubdtype(v.dtype, jnp.floating):
            return jax.dtypes.canonicalize_dtype(v.dtype)  # float64 only where x64 is on
    return jnp.float32


def _check_image_size(width: int, height: int) -> None:
    if not (isinstance(width, (int, np.integer)) and isinstance(height, (int, np.integer))):
        raise TypeError(f"width and height must be Python ints, got {width!r}, {height!r}")
    if width < 1 or height < 1:
        raise ValueError(f"image size must be positive, got width={width}, height={height}")


def _make(rotation, translation, focal, principal, near, far, width, height, dtype) -> Camera:
    _check_image_size(width, height)
    if not isinstance(near, jax.core.Tracer) and not isinstance(far, jax.core.Tracer):
        # In the camera's own dtype (1e-300 is 0 in float32, 1e300 is inf): depth is (far - z) / (far - near).
        stored_near, stored_far = (float(np.asarray(v, np.dtype(dtype))) for v in (near, far))
        if not 0.0 < stored_near < stored_far < np.inf:
            raise ValueError(f"the depth range needs 0 < near < far < inf (in {jnp.dtype(dtype).name}), got "
                             f"near={near}, far={far}")
    values = {"rotation": rotation, "translation": translation, "focal lengths": focal, "principal point": principal}
    for name, value in values.items():
        if not isinstance(value, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(value, np.dtype(dtype)))):
            raise ValueError(f"the camera's {name} {np.asarray(value).tolist()} is not finite in "
                             f"{jnp.dtype(dtype).name} (a field of view too small, or a pose too far away?)")
    return Camera(
        rotation=jnp.asarray(rotation, dtype),
        translation=jnp.asarray(translation, dtype),
        focal=jnp.asarray(focal, dtype),
        principal=jnp.asarray(principal, dtype),
        near=jnp.asarray(near, dtype),
        far=jnp.asarray(far, dtype),
        width=int(width),
        height=int(height),
    )


def skew(v):
    """[3, 3] matrix of the cross product with v: skew(v) @ w = v x w.

    Args:
        v: [3] the vector.
    """
    zero = jnp.zeros_like(v[0])
    return jnp.stack([
        jnp.stack([zero, -v[2], v[1]]),
        jnp.stack([v[2], zero, -v[0]]),
        jnp.stack([-v[1], v[0], zero]),
    ])


def rotation_from_rvec(rvec):
    """Rotation matrix [3, 3] of a Rodrigues vector [3] (axis times angle in radians), as `cv2.Rodrigues`.

    R = I + (sin t / t) K + ((1 - cos t) / t^2) K^2 with K = skew(rvec), t = |rvec|; the coefficients use
    their Taylor series near t = 0 (double where), so values and gradients are finite at rvec = 0.

    Args:
        rvec: [3] rad, the rotation's axis times its angle.
    """
    theta2 = jnp.sum(rvec * rvec)
    small = theta2 < 1e-4
    safe2 = jnp.where(small, 1.0, theta2)
    theta = jnp.sqrt(safe2)
    a = jnp.where(small, 1.0 - theta2 / 6.0 + theta2 * theta2 / 120.0, jnp.sin(theta) / theta)
    b = jnp.where(small, 0.5 - theta2 / 24.0 + theta2 * theta2 / 720.0, (1.0 - jnp.cos(theta)) / safe2)
    k = skew(rvec)
    return jnp.eye(3, dtype=rvec.dtype) + a * k + b * (k @ k)


def rvec_from_rotation(rotation) -> np.ndarray:
    """Host-side inverse of `rotation_from_rvec` (the rotation's axis times its angle in [0, pi]), float64.

    Args:
        rotation: [3, 3] a proper rotation matrix.
    """
    r = np.asarray(rotation, np.float64)
    cos = np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.arccos(cos))
    vee = 0.5 * np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])  # sin(angle) * axis
    if angle < 1e-6:
        return vee
    if np.pi - angle > 1e-4:
        return vee * (angle / np.sin(angle))
    # Near pi, sin(angle) vanishes: the axis comes from R + I = 2 a a^T (its largest column).
    b = (r + np.eye(3)) / 2.0
    col = int(np.argmax(np.diag(b)))
    axis = b[:, col] / np.sqrt(max(b[col, col], 1e-300))
    if np.dot(axis, vee) < 0:
        axis = -axis
    return axis / np.linalg.norm(axis) * angle


def look_at_pose(eye, at, up):
    """(R [3, 3], t [3]) of a camera at `eye` looking at `at`, image up along `up` as far as possible.

    Args:
        eye: [3] world units, the camera centre.
        at: [3] world units, the point looked at.
        up: [3], the approximate up direction of the image (not parallel to at - eye).
    """
    forward = safe_normalize(at - eye)
    right = safe_normalize(jnp.cross(forward, up))
    down = jnp.cross(forward, right)
    rotation = jnp.stack([right, down, forward])
    return rotation, -(rotation @ eye)


def _check_look_at(eye, at, up) -> None:
    """ValueError (concrete values only) when eye, at or up is not finite, eye is at `at`, or up is zero or
    parallel to the view direction: the look-at pose would be NaN or have zero rows (no image orientation)."""
    if any(isinstance(v, jax.core.Tracer) for v in (eye, at, up)):
        return
    values = {name: np.asarray(v, np.float64) for name, v in (("eye", eye), ("at", at), ("up", up))}
    for name, v in values.items():
        if v.shape != (3,) or not np.all(np.isfinite(v)):
            raise ValueError(f"camera {name} must be 3 finite numbers, got {np.asarray(v).tolist()}")
    forward = values["at"] - values["eye"]
    if not np.linalg.norm(forward) > 0:
        raise ValueError(f"camera eye and at coincide ({values['eye'].tolist()}): no view direction")
    up = values["up"]
    if not np.linalg.norm(np.cross(forward, up)) > 1e-6 * np.linalg.norm(forward) * np.linalg.norm(up):
        raise ValueError(f"camera up {up.tolist()} is zero or parallel to the view direction "
                         f"{forward.tolist()} (eye to at): the image's orientation is undefined; choose "
                         "another up or move the eye")


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
    """Camera at `eye` looking at `at` with approximate `up`, vertical half field of view `view_angle`
    (degrees), principal point at the image centre; all floats become arrays of `dtype` (default: the
    dtype of `eye` when it is a float array, else float32).

    Args:
        eye: [3] world units, the camera centre.
        at: [3] world units, the point looked at.
        up: [3], the approximate up direction of the image.
        view_angle: degrees, half the vertical field of view.
        near: world units, the near end of the depth range.
        far: world units, the far end of the depth range.
        width: image width in pixels.
        height: image height in pixels.
        dtype: the camera's float dtype (None: as above).
    """
    _check_image_size(width, height)
    if dtype is None:
        dtype = _float_dtype(eye)
    _check_look_at(eye, at, up)
    rotation, translation = look_at_pose(jnp.asarray(eye, dtype), jnp.asarray(at, dtype), jnp.asarray(up, dtype))
    f = height / (2.0 * jnp.tan(jnp.deg2rad(jnp.asarray(view_angle, dtype))))
    principal = jnp.asarray([(width - 1) / 2.0, (height - 1) / 2.0], dtype)
    return _make(rotation, translation, jnp.stack([f, f]), principal, near, far, width, height, dtype)


def eye_from_spherical(distance, elevation, azimuth):
    """Eye offset d (cos el sin az, sin el, -cos el cos az) for angles in degrees; differentiable.

    Args:
        distance: world units, d.
        elevation: degrees, el.
        azimuth: degrees, az.
    """
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
    """Camera `distance` away from `at` at `elevation` and `azimuth` (degrees), SoftRas's angles.

    Azimuth 0, elevation 0 puts the eye on -z looking along +z. The angles may be traced values: gradients
    flow from the image back to distance/elevation/azimuth.

    Args:
        distance: world units, from `at` to the eye.
        elevation: degrees, the eye's angle above the x-z plane through `at`.
        azimuth: degrees, the eye's angle about y (`eye_from_spherical`).
        at: [3] world units, the point looked at.
        up: [3], the approximate up direction of the image.
        view_angle: degrees, half the vertical field of view.
        near: world units, the near end of the depth range.
        far: world units, the far end of the depth range.
        width: image width in pixels.
        height: image height in pixels.
        dtype: the camera's float dtype (None: that of `distance` when float, else float32).
    """
    if dtype is None:
        dtype = _float_dtype(jnp.asarray(distance))
    at = jnp.asarray(at, dtype=dtype)
    eye = at + eye_from_spherical(
        jnp.asarray(distance, dtype), jnp.asarray(elevation, dtype), jnp.asarray(azimuth, dtype)
    )
    return camera_from_eye(
        eye, at, up, view_angle=view_angle, near=near, far=far, width=width, height=height, dtype=dtype
    )


def camera_axes(camera: Camera):
    """Rotation [3, 3] whose rows are the camera's right, up and forward axes in world space.

    Args:
        camera: the `Camera`.
    """
    return camera.rotation * jnp.asarray(_Y_UP, camera.rotation.dtype)[:, None]


def world_to_camera(camera: Camera, points):
    """Camera-space coordinates [..., 3] of world points [..., 3]: (right, up, forward); z is the depth.

    Args:
        camera: the `Camera`.
        points: [..., 3] world points (world units).
    """
    cv = points @ camera.rotation.T + camera.translation
    return cv * jnp.asarray(_Y_UP, cv.dtype)


def project_pixels(camera: Camera, points):
    """OpenCV pixel coordinates (u, v) [..., 2] and depth z [...] of world points [..., 3].

    Points at or behind the near plane get coordinates from a guarded depth (finite, with finite
    gradients) but are meaningless; callers mask them with `z > camera.near`.

    Args:
        camera: the `Camera`.
        points: [..., 3] world points (world units).
    """
    cv = points @ camera.rotation.T + camera.translation
    z = cv[..., 2]
    in_front = z > camera.near
    safe_z = jnp.where(in_front, z, jnp.ones_like(z))
    uv = cv[..., :2] / safe_z[..., None] * camera.focal + camera.principal
    return jnp.where(in_front[..., None], uv, jnp.zeros_like(uv)), z


def pixel_to_screen(camera: Camera, uv):
    """Screen coordinates [..., 2] (x right, y up, pixels scaled by 2 / H) of pixel coordinates (u, v).

    Args:
        camera: the `Camera` (only its width and height are read).
        uv: [..., 2] pixels, (column, row) with pixel centres at integers.
    """
    x = (2.0 * uv[..., 0] + 1.0 - camera.width) / camera.height
    y = (camera.height - 2.0 * uv[..., 1] - 1.0) / camera.height
    return jnp.stack([x, y], axis=-1)


def screen_to_pixel(camera: Camera, xy):
    """Continuous pixel coordinates (column, row) [..., 2] of screen points; pixel centers are integers.

    Args:
        camera: the `Camera` (only its width and height are read).
        xy: [..., 2] screen coordinates (x right, y up, pixels scaled by 2 / H).
    """
    col = (xy[..., 0] * camera.height + camera.width - 1.0) * 0.5
    row = (camera.height - 1.0 - xy[..., 1] * camera.height) * 0.5
    return jnp.stack([col, row], axis=-1)


def project(camera: Camera, points):
    """Screen coordinates [..., 2] (see the module docstring) and depth z [...] of world points [..., 3].

    Points at or behind the near plane are mapped to 0 (finite, with finite gradients); callers mask them
    with `z > camera.near`.

    Args:
        camera: the `Camera`.
        points: [..., 3] world points (world units).
    """
    uv, z = project_pixels(camera, points)
    xy = pixel_to_screen(camera, uv)
    return jnp.where((z > camera.near)[..., None], xy, jnp.zeros_like(xy)), z


def pixel_centers(width: int, height: int, dtype=np.float32) -> np.ndarray:
    """Screen coordinates [height, width, 2] (x, y) of pixel centers; row 0 is the top of the image.

    Args:
        width: image width in pixels.
        height: image height in pixels.
        dtype: the numpy dtype of the result.
    """
    cols = (2.0 * np.arange(width) + 1.0 - width) / height
    rows = (height - 2.0 * np.arange(height) - 1.0) / height
    xx, yy = np.meshgrid(cols, rows)
    return np.stack([xx, yy], axis=-1).astype(dtype)


def with_image_size(camera: Camera, width: int, height: int) -> Camera:
    """The same camera rendering a `width` x `height` image of the same view (the image resampled).

    The intrinsics scale with the image: fx' = fx W' / W, and a pixel coordinate u maps to
    (u + 1/2) W' / W - 1/2 (pixel centres are integers), and likewise for y.

    Args:
        camera: the `Camera`.
        width: the new image width W' in pixels.
        height: the new image height H' in pixels.
    """
    _check_image_size(width, height)
    scale = jnp.asarray([width / camera.width, height / camera.height], camera.focal.dtype)
    return dataclasses.replace(
        camera, focal=camera.focal * scale, principal=(camera.principal + 0.5) * scale - 0.5,
        width=int(width), height=int(height),
    )


def pose_vector(camera: Camera) -> np.ndarray:
    """Host-side: the camera's pose as six numbers (rvec, tvec) in OpenCV's convention, float64.

    Args:
        camera: the `Camera` (concrete values).
    """
    return np.concatenate([rvec_from_rotation(camera.rotation), np.asarray(camera.translation, np.float64)])


def with_pose_vector(camera: Camera, pose) -> Camera:
    """The camera with its pose replaced by six numbers (rvec [3], tvec [3]); differentiable.

    Args:
        camera: the `Camera`.
        pose: [6], rvec [3] rad then tvec [3] world units (as `pose_vector` returns).
    """
    pose = jnp.asarray(pose, camera.rotation.dtype)
    return dataclasses.replace(camera, rotation=rotation_from_rvec(pose[:3]), translation=pose[3:6])
