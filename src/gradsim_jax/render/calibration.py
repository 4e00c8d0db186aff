"""Camera calibrations from OpenCV: read the files `cv2.calibrateCamera` users keep, undistort frames.

A `Calibration` holds OpenCV's camera matrix K [3, 3] (pixels, top-left pixel centre at (0, 0)), its
distortion coefficients (k1, k2, p1, p2[, k3[, k4, k5, k6[, s1..s4[, tx, ty]]]]), the image size they were
measured at, and optionally a pose (rvec, tvec or a 4x4 world-to-camera matrix).

Files: OpenCV's own YAML/XML/JSON layout as `cv2.FileStorage` writes it (matrices as
`!!opencv-matrix` / `{"type_id": "opencv-matrix", "rows", "cols", "data"}`), or plain JSON with nested
lists. Accepted key names (the spellings in common use): camera matrix `camera_matrix`, `cameraMatrix`,
`K`, `mtx`, `intrinsic_matrix`; distortion `distortion_coefficients`, `dist_coeffs`, `distCoeffs`,
`dist`, `D`; size `image_width` and `image_height`, or `image_size` / `imageSize` as [width, height];
pose `rvec` and `tvec`, or `world_to_camera` / `extrinsics` (4x4).

The renderer is a distortion-free pinhole camera, so distortion is removed from the target frames before a
fit (`undistorter`, through OpenCV's undistortion maps with K kept as the camera matrix of the undistorted
frames).
OpenCV (`opencv-python-headless`) is imported only when a calibration is used.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, Optional

import numpy as np

_MATRIX_KEYS = ("camera_matrix", "cameraMatrix", "K", "mtx", "intrinsic_matrix")
_DIST_KEYS = ("distortion_coefficients", "dist_coeffs", "distCoeffs", "dist", "D")
_POSE_KEYS = ("world_to_camera", "extrinsics")
_DIST_COUNTS = (4, 5, 8, 12, 14)


class CalibrationError(ValueError):
    """A calibration file or value is unusable: the message names the file and the key."""


@dataclasses.dataclass(frozen=True)
class Calibration:
    """OpenCV intrinsics: K [3, 3], distortion [k] (k in 4, 5, 8, 12, 14; zeros for none), image size
    (width, height) in pixels or None, and an optional pose: rvec/tvec [3] or world_to_camera [4, 4];
    world_up: the axis ("y" or "z") that is up in the pose's world when the source says so (a Blender camera:
    "z"), else None (the scene's own)."""

    camera_matrix: np.ndarray
    distortion: np.ndarray
    image_size: Optional[tuple[int, int]] = None
    rvec: Optional[np.ndarray] = None
    tvec: Optional[np.ndarray] = None
    world_to_camera: Optional[np.ndarray] = None
    world_up: Optional[str] = None

    @property
    def fx(self) -> float:
        return float(self.camera_matrix[0, 0])

    @property
    def fy(self) -> float:
        return float(self.camera_matrix[1, 1])

    @property
    def cx(self) -> float:
        return float(self.camera_matrix[0, 2])

    @property
    def cy(self) -> float:
        return float(self.camera_matrix[1, 2])

    @property
    def distorted(self) -> bool:
        return bool(np.any(self.distortion != 0.0))

    def scaled(self, width: int, height: int) -> "Calibration":
        """The calibration of the same camera whose frames were resampled to width x height.

        fx, the skew and cx scale by width / W, fy and cy by height / H (pixel centres kept: c' = (c + 1/2)
        s - 1/2); without a known image size only the size is set.

        Args:
            width: pixels, the resampled frames' width.
            height: pixels, the resampled frames' height.

        Returns:
            The scaled `Calibration` (distortion and pose unchanged).
        """
        if self.image_size is None or tuple(self.image_size) == (width, height):
            return dataclasses.replace(self, image_size=(int(width), int(height)))
        sx, sy = width / self.image_size[0], height / self.image_size[1]
        k = self.camera_matrix.copy()
        k[0, 0], k[1, 1] = k[0, 0] * sx, k[1, 1] * sy
        k[0, 1] *= sx
        k[0, 2], k[1, 2] = (k[0, 2] + 0.5) * sx - 0.5, (k[1, 2] + 0.5) * sy - 0.5
        return dataclasses.replace(self, camera_matrix=k, image_size=(int(width), int(height)))


def make_calibration(fx, fy, cx, cy, distortion=(), image_size=None, *, source: str = "calibration") -> Calibration:
    """A Calibration from numbers, validated (positive focal lengths, a known number of coefficients).

    Args:
        fx: pixels, the focal length along the columns (> 0).
        fy: pixels, the focal length along the rows (> 0).
        cx: pixels, the principal point's column (top-left pixel centre at 0).
        cy: pixels, the principal point's row.
        distortion: OpenCV's coefficients (k1, k2, p1, p2[, k3, ...]), 4, 5, 8, 12 or 14 of them; empty: none.
        image_size: (width, height) pixels the calibration was measured at, or None.
        source: what error messages call the calibration.

    Returns:
        The `Calibration` (no pose); CalibrationError for a bad value.
    """
    k = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], np.float64)
    return _validated(k, np.asarray(distortion, np.float64).reshape(-1), image_size, None, None, None, source)


def _validated(k, dist, image_size, rvec, tvec, pose, source) -> Calibration:
    k = np.asarray(k, np.float64)
    if k.shape != (3, 3) or not np.all(np.isfinite(k)):
        raise CalibrationError(f"{source}: the camera matrix must be a finite 3 x 3 matrix, got {k.tolist()}")
    if not (k[0, 0] > 0 and k[1, 1] > 0):
        raise CalibrationError(f"{source}: focal lengths fx, fy must be positive, got {k[0, 0]}, {k[1, 1]}")
    if dist.size == 0:
        dist = np.zeros(5)
    if dist.size not in _DIST_COUNTS or not np.all(np.isfinite(dist)):
        raise CalibrationError(f"{source}: distortion needs {', '.join(map(str, _DIST_COUNTS))} finite coefficients "
                               f"(k1, k2, p1, p2[, k3, ...]), got {dist.tolist()}")
    if image_size is not None:
        image_size = tuple(int(round(float(s))) for s in np.asarray(image_size).reshape(-1))
        if len(image_size) != 2 or min(image_size) < 1:
            raise CalibrationError(f"{source}: image size must be [width, height] > 0, got {list(image_size)}")
    if (rvec is None) != (tvec is None):
        raise CalibrationError(f"{source}: give both rvec and tvec")
    if pose is not None:
        pose = np.asarray(pose, np.float64)
        if pose.shape == (3, 4):
            pose = np.vstack([pose, [0.0, 0.0, 0.0, 1.0]])
        if pose.shape != (4, 4):
            raise CalibrationError(f"{source}: world_to_camera must be 4 x 4, got shape {pose.shape}")
        check_rotation(pose[:3, :3], source)
    for name, v in (("rvec", rvec), ("tvec", tvec)):
        if v is not None and np.asarray(v).size != 3:
            raise CalibrationError(f"{source}: {name} must have 3 numbers")
    return Calibration(k, dist, image_size,
                       None if rvec is None else np.asarray(rvec, np.float64).reshape(3),
                       None if tvec is None else np.asarray(tvec, np.float64).reshape(3), pose)


def check_rotation(r, source: str = "pose") -> None:
    """CalibrationError unless r [3, 3] is a proper rotation (orthonormal, determinant +1) to 1e-4.

    Args:
        r: [3, 3] the matrix to check.
        source: what the error message calls the pose (e.g. the file).
    """
    r = np.asarray(r, np.float64)
    if not np.all(np.isfinite(r)) or np.abs(r @ r.T - np.eye(3)).max() > 1e-4 or np.linalg.det(r) < 0:
        raise CalibrationError(f"{source}: the rotation part of the pose is not a proper rotation "
                               f"(orthonormal with determinant +1): {np.round(r, 6).tolist()}")


def _from_json_value(value):
    if isinstance(value, dict) and "data" in value:
        data = np.asarray(value["data"], np.float64)
        rows, cols = int(value.get("rows", data.size)), int(value.get("cols", 1))
        return data.reshape(rows, cols)
    return np.asarray(value, np.float64)


def _read_json(path: Path) -> dict:
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, and UnicodeDecodeError for binary files
        raise CalibrationError(f"{path}: cannot read JSON: {e}") from e
    if not isinstance(raw, dict):
        raise CalibrationError(f"{path}: expected a JSON object with a camera matrix")
    out = {}
    for key, value in raw.items():
        try:
            out[key] = _from_json_value(value)
        except (TypeError, ValueError):
            continue  # names, dates, comments: not numbers
    return out


def _read_opencv(path: Path) -> dict:
    import cv2

    try:
        fs = cv2.FileStorage(str(path), cv2.FILE_STORAGE_READ)
    except (cv2.error, SystemError) as e:  # SystemError: cv2's binding on a file that is not YAML/XML/JSON
        raise CalibrationError(f"{path}: OpenCV cannot read it as a YAML/XML/JSON calibration file") from e
    if not fs.isOpened():
        raise CalibrationError(f"{path}: OpenCV cannot read it as YAML/XML/JSON calibration")
    out = {}
    keys = (*_MATRIX_KEYS, *_DIST_KEYS, *_POSE_KEYS, "rvec", "tvec", "image_width", "image_height", "image_size",
            "imageSize")
    try:
        for key in keys:
            node = fs.getNode(key)
            if node.empty():
                continue
            if node.isReal() or node.isInt():
                out[key] = np.asarray(node.real())
            elif node.isSeq():
                out[key] = np.asarray([node.at(i).real() for i in range(node.size())])
            else:
                mat = node.mat()
                if mat is not None:
                    out[key] = np.asarray(mat, np.float64)
    finally:
        fs.release()
    return out


def read_calibration(path) -> Calibration:
    """Read a calibration file (see the module docstring); CalibrationError names the file and the key.

    Args:
        path: the file: .json (OpenCV's or plain nested lists), or OpenCV's YAML / XML.

    Returns:
        The validated `Calibration`.
    """
    path = Path(path)
    if not path.is_file():
        raise CalibrationError(f"{path}: calibration file not found")
    values = _read_json(path) if path.suffix.lower() == ".json" else _read_opencv(path)

    def first(keys):
        return next((values[k] for k in keys if k in values), None)

    k = first(_MATRIX_KEYS)
    if k is None:
        raise CalibrationError(f"{path}: no camera matrix (looked for {', '.join(_MATRIX_KEYS)})")
    dist = first(_DIST_KEYS)
    size = None
    if "image_width" in values and "image_height" in values:
        size = (values["image_width"], values["image_height"])
    elif first(("image_size", "imageSize")) is not None:
        size = first(("image_size", "imageSize"))
    return _validated(k, np.zeros(0) if dist is None else np.asarray(dist, np.float64).reshape(-1), size,
                      values.get("rvec"), values.get("tvec"), first(_POSE_KEYS), str(path))


def write_calibration(path, calibration: Calibration) -> Path:
    """Write a calibration in OpenCV's YAML (or JSON for a .json path) layout, through cv2.FileStorage.

    Args:
        path: the file to write (its folder is created).
        calibration: the `Calibration`.

    Returns:
        The path, as a `Path`.
    """
    import cv2

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fs = cv2.FileStorage(str(path), cv2.FILE_STORAGE_WRITE)
    try:
        if calibration.image_size is not None:
            fs.write("image_width", int(calibration.image_size[0]))
            fs.write("image_height", int(calibration.image_size[1]))
        fs.write("camera_matrix", np.asarray(calibration.camera_matrix, np.float64))
        fs.write("distortion_coefficients", np.asarray(calibration.distortion, np.float64).reshape(1, -1))
        if calibration.rvec is not None:
            fs.write("rvec", calibration.rvec.reshape(3, 1))
            fs.write("tvec", calibration.tvec.reshape(3, 1))
        if calibration.world_to_camera is not None:
            fs.write("world_to_camera", calibration.world_to_camera)
    finally:
        fs.release()
    return path


def undistorter(calibration: Calibration) -> Optional[Callable[[np.ndarray], np.ndarray]]:
    """A function that removes lens distortion from one frame [H, W, C] (float32) of the video, or None
    when the calibration has no distortion.

    The calibration's K is scaled to the frame's own size first (a video may be a resampled copy of the
    calibrated one); the undistorted frames have that same K (`cv2.undistort` keeps it).

    Args:
        calibration: the `Calibration` (its distortion and K).

    Returns:
        frame [H, W, C] or [H, W] -> the undistorted frame, float32, same shape; or None without distortion.
    """
    if not calibration.distorted:
        return None
    import cv2

    maps = {}

    def undistort(frame: np.ndarray) -> np.ndarray:
        frame = np.ascontiguousarray(frame, np.float32)
        height, width = frame.shape[:2]
        if (height, width) not in maps:
            cal = calibration.scaled(width, height)
            maps[height, width] = cv2.initUndistortRectifyMap(
                cal.camera_matrix, cal.distortion, None, cal.camera_matrix, (width, height), cv2.CV_32FC1)
        map_x, map_y = maps[height, width]
        planes = frame[..., None] if frame.ndim == 2 else frame
        out = np.stack([cv2.remap(np.ascontiguousarray(planes[..., c]), map_x, map_y, cv2.INTER_LINEAR,
                                  borderMode=cv2.BORDER_REPLICATE) for c in range(planes.shape[-1])], axis=-1)
        return out[..., 0] if frame.ndim == 2 else out

    return undistort
