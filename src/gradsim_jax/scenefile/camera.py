"""[camera]: a look-at camera (distance, elevation, azimuth or an eye), or a calibrated one (fx, fy, cx, cy,
distortion, or an OpenCV calibration file) with an optional pose, at the [render] size."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from gradsim_jax.scenefile.render import read_render
from gradsim_jax.scenefile.schema import SceneFileError
from gradsim_jax.scenefile.world import UP_ROTATIONS, world_up, world_vector


@dataclasses.dataclass(frozen=True)
class CameraIntrinsics:
    """The intrinsics keys of [camera] (checked by `read_calibration`).

    Attributes:
        fx: focal length, pixels, or None.
        fy: vertical focal length, pixels, or None.
        cx: principal point column, pixels (top-left pixel centre = 0), or None.
        cy: principal point row, pixels, or None.
        image_size: [width, height] pixels the intrinsics refer to, or None.
        distortion: OpenCV distortion coefficients k1, k2, p1, p2[, k3...], or None.
        calibration: the OpenCV calibration file as written (relative to the scene file), or None.
        view_angle: half vertical field of view of a look-at camera, degrees, or None.
        blender: a Blender camera's JSON file as written, or None.
        colmap: a COLMAP sparse model folder as written, or None.
        colmap_image: the COLMAP model's registered image to take the camera of, or None (the first).
    """

    fx: Optional[float]
    fy: Optional[float]
    cx: Optional[float]
    cy: Optional[float]
    image_size: Optional[list]
    distortion: Optional[list]
    calibration: Optional[str]
    view_angle: Optional[float]
    blender: Optional[str] = None
    colmap: Optional[str] = None
    colmap_image: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class CameraPlacement:
    """The pose and depth keys of [camera] (checked by `read_camera`).

    Attributes:
        distance: look-at distance from `at`, m, or None.
        elevation: look-at elevation, degrees, or None.
        azimuth: look-at azimuth, degrees, or None.
        at: [3] look-at point, m.
        up: [3] world direction shown upwards.
        eye: [3] camera centre, m, or None.
        pose: 4 x 4 world-to-camera matrix (OpenCV axes), or None.
        rvec: [3] OpenCV Rodrigues rotation of the pose, or None.
        tvec: [3] OpenCV translation of the pose, m, or None.
        near: nearest depth rendered, m, or None.
        far: farthest depth rendered, m, or None.
    """

    distance: Optional[float]
    elevation: Optional[float]
    azimuth: Optional[float]
    at: list
    up: list
    eye: Optional[list]
    pose: Optional[list]
    rvec: Optional[list]
    tvec: Optional[list]
    near: Optional[float]
    far: Optional[float]


def read_camera_keys(spec) -> tuple[CameraIntrinsics, CameraPlacement]:
    """[camera] read (the one reader of the section): its intrinsics and its placement.

    Args:
        spec: the validated scene file (`SceneSpec`).

    Returns:
        (`CameraIntrinsics`, `CameraPlacement`).
    """
    cam = spec.sections.camera
    intrinsics = CameraIntrinsics(fx=cam.fx, fy=cam.fy, cx=cam.cx, cy=cam.cy, image_size=cam.image_size,
                                  distortion=cam.distortion, calibration=cam.calibration, view_angle=cam.view_angle,
                                  blender=cam.blender, colmap=cam.colmap, colmap_image=cam.colmap_image)
    up = list(world_vector(spec, (0.0, 1.0, 0.0))) if cam.up is None else cam.up
    placement = CameraPlacement(distance=cam.distance, elevation=cam.elevation, azimuth=cam.azimuth, at=cam.at,
                                up=up, eye=cam.eye, pose=cam.pose, rvec=cam.rvec, tvec=cam.tvec, near=cam.near,
                                far=cam.far)
    return intrinsics, placement


def calibration_file(spec):
    """[camera] calibration, the OpenCV calibration file a fit reads, or None.

    Args:
        spec: the validated scene file (`SceneSpec`); the path is relative to its folder.

    Returns:
        The file's Path, or None when calibration is not set.
    """
    name = read_camera_keys(spec)[0].calibration
    return name and spec.resolve(name)


def read_calibration(spec):
    """The intrinsics of [camera] (fx, fy, cx, cy, distortion, image_size, or a calibration file) as a
    `Calibration`, or None for a look-at camera described by its field of view.

    Args:
        spec: the validated scene file (`SceneSpec`); a calibration file's path is relative to its folder.

    Returns:
        The `render.calibration.Calibration` (fx, fy, cx, cy in pixels), or None.

    Raises:
        SceneFileError: naming the file and [camera], for intrinsics given twice or incompletely, or a bad
            calibration file.
    """
    from gradsim_jax.render.calibration import CalibrationError, make_calibration

    cam, path = read_camera_keys(spec)[0], spec.path
    numbers = {k: v for k, v in (("fx", cam.fx), ("fy", cam.fy), ("cx", cam.cx), ("cy", cam.cy)) if v is not None}
    files = {k: v for k, v in (("calibration", cam.calibration), ("blender", cam.blender), ("colmap", cam.colmap))
             if v is not None}
    if cam.colmap_image is not None and cam.colmap is None:
        raise SceneFileError(f"{path}: [camera] colmap_image names an image of a COLMAP model: give colmap too")
    try:
        if files:
            if len(files) + bool(numbers) > 1:
                raise SceneFileError(f"{path}: [camera] give the intrinsics once: "
                                     f"{' or '.join([*files, *numbers])}")
            cal = camera_file(spec, files)
            if cam.distortion is not None:
                cal = dataclasses.replace(cal, distortion=make_calibration(
                    cal.fx, cal.fy, cal.cx, cal.cy, cam.distortion, source=f"{path}: [camera]").distortion)
        elif numbers:
            if "fx" not in numbers or "fy" not in numbers:
                raise SceneFileError(f"{path}: [camera] a calibrated camera needs both fx and fy (pixels)")
            width, height = cam.image_size or (None, None)
            cx = numbers.get("cx", None if width is None else (width - 1) / 2.0)
            cy = numbers.get("cy", None if height is None else (height - 1) / 2.0)
            if cx is None or cy is None:
                raise SceneFileError(f"{path}: [camera] give cx and cy, or image_size for a centred "
                                     "principal point")
            cal = make_calibration(numbers["fx"], numbers["fy"], cx, cy, cam.distortion or (), None,
                                   source=f"{path}: [camera]")
        elif cam.distortion is not None or cam.image_size is not None:
            raise SceneFileError(f"{path}: [camera] distortion and image_size need intrinsics "
                                 "(fx, fy, cx, cy or a calibration file)")
        else:
            return None
    except CalibrationError as e:
        reason = str(e) if str(e).startswith(str(path)) else f"{path}: [camera] calibration: {e}"
        raise SceneFileError(reason) from None
    if cam.image_size is not None:
        cal = dataclasses.replace(cal, image_size=tuple(cam.image_size))
    if cam.view_angle is not None:
        raise SceneFileError(f"{path}: [camera] view_angle describes a look-at camera; a calibrated camera "
                             "has fx and fy instead")
    return cal


def read_camera(spec, native_size=None):
    """The render camera of [camera] at the [render] size.

    Args:
        spec: the validated scene file (`SceneSpec`).
        native_size: (height, width) pixels of the target's frames, which the intrinsics refer to unless
            image_size (or the calibration file) says otherwise; None: the [render] size.

    Returns:
        The `render.Camera`.

    Raises:
        SceneFileError: naming the file and the key, for a bad [camera] or [render] size value.
    """
    try:
        return _camera(spec, native_size)
    except SceneFileError:
        raise
    except ValueError as e:  # the camera code's own checks (up parallel to the view, depth range)
        raise SceneFileError(f"{spec.path}: [camera] {str(e).removeprefix('camera ')}") from None


def camera_file(spec, files: dict):
    """The calibration of [camera]'s one camera file: OpenCV's (calibration), Blender's (blender) or a COLMAP
    model's (colmap, colmap_image), its pose turned into the file's world ([scene] up) when the source names
    its own up axis.

    Args:
        spec: the validated scene file (`SceneSpec`); paths are relative to its folder.
        files: {key: path as written}, exactly one of "calibration", "blender", "colmap".

    Returns:
        The `render.calibration.Calibration`.
    """
    from gradsim_jax.render.calibration import read_calibration
    from gradsim_jax.render.camera_import import read_blender_camera, read_colmap_camera

    (key, name), = files.items()
    if key == "blender":
        cal = read_blender_camera(spec.resolve(name))
    elif key == "colmap":
        cal = read_colmap_camera(spec.resolve(name), read_camera_keys(spec)[0].colmap_image)
    else:
        cal = read_calibration(spec.resolve(name))
    up = world_up(spec)
    if cal.world_up is not None and cal.world_up != up and cal.world_to_camera is not None:
        turn = np.eye(4)
        turn[:3, :3] = UP_ROTATIONS[cal.world_up] @ UP_ROTATIONS[up].T  # the file's world -> the source's
        cal = dataclasses.replace(cal, world_to_camera=cal.world_to_camera @ turn, world_up=up)
    return cal


def _camera(spec, native_size=None):
    from gradsim_jax.render import Camera, camera_from_eye, look_at_camera
    from gradsim_jax.render.calibration import CalibrationError, check_rotation

    (intrinsics, cam), ren, path = read_camera_keys(spec), read_render(spec), spec.path
    width, height = ren.width, ren.height
    if not (width > 0 and height > 0):
        raise SceneFileError(f"{path}: [render] width and height must be positive")
    cal = spec.calibration()
    spherical = any(v is not None for v in (cam.distance, cam.elevation, cam.azimuth))
    forms = {"distance/elevation/azimuth": spherical, "eye": cam.eye is not None,
             "pose": cam.pose is not None, "rvec/tvec": cam.rvec is not None or cam.tvec is not None}
    if cal is not None and (cal.rvec is not None or cal.world_to_camera is not None):
        forms["the calibration file's pose"] = True
    given = [k for k, on in forms.items() if on]
    if len(given) > 1:
        raise SceneFileError(f"{path}: [camera] give one pose, not {' and '.join(given)}")
    if forms["rvec/tvec"] and (cam.rvec is None or cam.tvec is None):
        raise SceneFileError(f"{path}: [camera] give both rvec and tvec")
    distance = cam.distance if cam.distance is not None else 2.0
    if not distance > 0:
        raise SceneFileError(f"{path}: [camera] distance must be positive, got {distance}")
    look_at = not given or spherical
    near = cam.near if cam.near is not None else (min(1.0, 0.1 * distance) if look_at else 0.05)
    far = cam.far if cam.far is not None else (100.0 * distance if look_at else 100.0)
    if not 0 < near < far:
        raise SceneFileError(f"{path}: [camera] needs 0 < near < far, got near={near}, far={far}")
    elevation = cam.elevation if cam.elevation is not None else 20.0
    azimuth = cam.azimuth if cam.azimuth is not None else 0.0
    at, up = tuple(cam.at), tuple(cam.up)
    pose = {}
    try:
        if cam.pose is not None:
            m = np.asarray(cam.pose, np.float64)
            check_rotation(m[:3, :3], f"{path}: [camera] pose")
            pose = {"world_to_camera": m}
        elif cam.rvec is not None:
            pose = {"rvec": cam.rvec, "tvec": cam.tvec}
        elif cal is not None and cal.world_to_camera is not None:
            pose = {"world_to_camera": cal.world_to_camera}
        elif cal is not None and cal.rvec is not None:
            pose = {"rvec": cal.rvec, "tvec": cal.tvec}
    except CalibrationError as e:
        raise SceneFileError(str(e)) from None
    eye = cam.eye
    if look_at:
        from gradsim_jax.render.camera import eye_from_spherical

        eye = tuple(np.asarray(at) + np.asarray(world_vector(spec, eye_from_spherical(distance, elevation,
                                                                                      azimuth))))
    if eye is not None and np.linalg.norm(np.subtract(eye, at)) == 0:
        raise SceneFileError(f"{path}: [camera] eye and at coincide")
    if cal is None:
        view_angle = intrinsics.view_angle if intrinsics.view_angle is not None else 30.0
        if not 0.0 < view_angle < 90.0:
            raise SceneFileError(f"{path}: [camera] view_angle must be in (0, 90) degrees, got {view_angle}")
        if look_at and not cam.eye and world_up(spec) == "y":
            return look_at_camera(distance, elevation, azimuth, at=at, up=up, view_angle=view_angle, near=near,
                                  far=far, width=width, height=height)
        if eye is not None:
            return camera_from_eye(eye, at, up, view_angle=view_angle, near=near, far=far, width=width,
                                   height=height)
        f = height / (2.0 * np.tan(np.deg2rad(view_angle)))
        return Camera.from_intrinsics(f, f, (width - 1) / 2.0, (height - 1) / 2.0, width, height, near=near,
                                      far=far, **pose)
    size = cal.image_size
    if size is None:
        size = (native_size[1], native_size[0]) if native_size is not None else (width, height)
    elif native_size is not None and tuple(size) != (native_size[1], native_size[0]):
        sx, sy = native_size[1] / size[0], native_size[0] / size[1]
        if abs(sx / sy - 1.0) > 0.01:
            raise SceneFileError(
                f"{path}: [camera] the intrinsics are for {size[0]} x {size[1]} px but the target's frames "
                f"are {native_size[1]} x {native_size[0]} px, another aspect ratio: set image_size to the "
                "size the camera was calibrated at, for this video")
    scaled = dataclasses.replace(cal, image_size=tuple(size)).scaled(width, height)
    if eye is not None:
        pose = {"eye": eye, "at": at, "up": up}
    return Camera.from_intrinsics(scaled.fx, scaled.fy, scaled.cx, scaled.cy, width, height, near=near,
                                  far=far, **pose)
