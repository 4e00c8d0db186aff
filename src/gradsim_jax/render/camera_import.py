"""Cameras as other tools describe them, read into a `Calibration` (OpenCV axes, pixels): a Blender camera and a
COLMAP reconstruction. (OpenCV's own calibration files are read by `render.calibration.read_calibration`.)

**Blender** (`read_blender_camera`): a JSON file of the camera's own numbers, unconverted, as this snippet in
Blender's Python console writes it::

    import bpy, json
    s, c = bpy.context.scene, bpy.context.scene.camera
    json.dump({"lens_mm": c.data.lens, "sensor_width_mm": c.data.sensor_width,
               "sensor_height_mm": c.data.sensor_height, "sensor_fit": c.data.sensor_fit,
               "resolution": [s.render.resolution_x * s.render.resolution_percentage // 100,
                              s.render.resolution_y * s.render.resolution_percentage // 100],
               "shift_x": c.data.shift_x, "shift_y": c.data.shift_y,
               "clip_start": c.data.clip_start, "clip_end": c.data.clip_end,
               "matrix_world": [list(r) for r in c.matrix_world]}, open("camera.json", "w"))

Blender's world is Z-up and its camera looks along its local -Z with +Y up; OpenCV's camera looks along +Z with +Y
down, so the world-to-camera pose is diag(1, -1, -1) inv(matrix_world) (scale removed). The focal length in pixels
is lens / sensor * size, where the sensor's width spans the image's width (sensor_fit HORIZONTAL), its height the
image's height (VERTICAL), or its width the larger side (AUTO, Blender's default). The shift moves the view by a
fraction of that same side: cx = (W - 1) / 2 - shift_x S, cy = (H - 1) / 2 + shift_y S (pixel centres at whole
numbers, top-left at 0). Also accepted: `lens`, `sensor_width`, `sensor_height`, `resolution_x`/`resolution_y`.
The calibration carries `world_up = "z"`; a y-up scene converts the pose (`scenefile.world`).

**COLMAP** (`read_colmap_camera`): a sparse model folder (cameras.txt + images.txt, or cameras.bin + images.bin),
and the name of one registered image. COLMAP's camera axes are OpenCV's and its pose is world-to-camera (a unit
quaternion qw, qx, qy, qz and t); its pixel centres sit at half-integers (top-left at 0.5), ours at whole numbers,
so cx and cy move by -1/2. Models: SIMPLE_PINHOLE, PINHOLE, SIMPLE_RADIAL, RADIAL, OPENCV, FULL_OPENCV (their
distortion in OpenCV's order); other models are refused by name. A reconstruction's scale and up axis are its
own: align it to metres and to the scene's up axis first (COLMAP's model_aligner), or the fitted physics is in
its units.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import numpy as np

from gradsim_jax.physics.quaternion import quat_to_matrix
from gradsim_jax.render.calibration import Calibration, CalibrationError, check_rotation, make_calibration

#: OpenCV's camera axes in Blender's camera frame: x kept, y and z flipped.
BLENDER_TO_OPENCV = np.diag([1.0, -1.0, -1.0])

_BLENDER_KEYS = {"lens": ("lens_mm", "lens"), "sensor_width": ("sensor_width_mm", "sensor_width"),
                 "sensor_height": ("sensor_height_mm", "sensor_height")}


def _blender_value(raw: dict, name: str, path) -> float:
    for key in _BLENDER_KEYS[name]:
        if key in raw:
            return float(raw[key])
    raise CalibrationError(f"{path}: a Blender camera needs {' or '.join(_BLENDER_KEYS[name])}")


def _blender_resolution(raw: dict, path) -> tuple[int, int]:
    if "resolution" in raw:
        width, height = raw["resolution"]
    elif "resolution_x" in raw and "resolution_y" in raw:
        width, height = raw["resolution_x"], raw["resolution_y"]
    else:
        raise CalibrationError(f"{path}: a Blender camera needs resolution [width, height] (pixels)")
    width, height = int(width), int(height)
    if min(width, height) < 1:
        raise CalibrationError(f"{path}: resolution must be positive, got {[width, height]}")
    return width, height


def blender_intrinsics(lens: float, sensor_width: float, sensor_height: float, sensor_fit: str, width: int,
                       height: int, shift_x: float = 0.0, shift_y: float = 0.0, *, source: str = "Blender camera"):
    """The pinhole intrinsics of a Blender camera (square pixels).

    Args:
        lens: mm, the focal length.
        sensor_width: mm, the sensor's width.
        sensor_height: mm, the sensor's height (used by sensor_fit VERTICAL only).
        sensor_fit: "AUTO" (the width spans the image's larger side), "HORIZONTAL" or "VERTICAL".
        width: pixels, the rendered image's width.
        height: pixels, the rendered image's height.
        shift_x: Blender's lens shift, a fraction of the fitted side (positive: the view moves right).
        shift_y: Blender's lens shift, a fraction of the fitted side (positive: the view moves up).
        source: what error messages call the camera.

    Returns:
        (f, cx, cy): pixels, the focal length and the principal point (top-left pixel centre at 0).
    """
    fit = str(sensor_fit).upper()
    if not (lens > 0 and sensor_width > 0):
        raise CalibrationError(f"{source}: lens and sensor_width must be positive, got {lens}, {sensor_width}")
    if fit == "AUTO":
        side, sensor = max(width, height), sensor_width
    elif fit == "HORIZONTAL":
        side, sensor = width, sensor_width
    elif fit == "VERTICAL":
        if not sensor_height > 0:
            raise CalibrationError(f"{source}: sensor_fit VERTICAL needs a positive sensor_height")
        side, sensor = height, sensor_height
    else:
        raise CalibrationError(f"{source}: sensor_fit must be AUTO, HORIZONTAL or VERTICAL, got {sensor_fit!r}")
    f = lens / sensor * side
    return f, (width - 1) / 2.0 - shift_x * side, (height - 1) / 2.0 + shift_y * side


def blender_world_to_camera(matrix_world, source: str = "Blender camera") -> np.ndarray:
    """OpenCV's world-to-camera matrix [4, 4] of a Blender camera placed by `matrix_world` (its scale removed).

    Args:
        matrix_world: [4, 4] the camera object's matrix_world (camera to Blender's Z-up world).
        source: what error messages call the camera.

    Returns:
        [4, 4] float64, [R | t] taking Blender world points (m) to OpenCV camera coordinates (x right, y down,
        z forward).
    """
    m = np.asarray(matrix_world, np.float64)
    if m.shape != (4, 4) or not np.all(np.isfinite(m)):
        raise CalibrationError(f"{source}: matrix_world must be a finite 4 x 4 matrix")
    scale = np.linalg.norm(m[:3, :3], axis=0)
    if not np.all(scale > 0):
        raise CalibrationError(f"{source}: matrix_world has a zero scale")
    rot = m[:3, :3] / scale  # camera -> world
    check_rotation(rot, f"{source}: matrix_world")
    out = np.eye(4)
    out[:3, :3] = BLENDER_TO_OPENCV @ rot.T
    out[:3, 3] = -out[:3, :3] @ m[:3, 3]
    return out


def read_blender_camera(path) -> Calibration:
    """A Blender camera's JSON file (module docstring) as a `Calibration` with its pose, world_up "z".

    Args:
        path: the JSON file.

    Returns:
        The `Calibration`: intrinsics at `resolution`, no distortion, world_to_camera in Blender's world.
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CalibrationError(f"{path}: cannot read the Blender camera's JSON: {e}") from e
    if not isinstance(raw, dict):
        raise CalibrationError(f"{path}: expected a JSON object (lens_mm, sensor_width_mm, resolution, ...)")
    if "matrix_world" not in raw:
        raise CalibrationError(f"{path}: a Blender camera needs matrix_world (4 x 4, camera to world)")
    width, height = _blender_resolution(raw, path)
    for key in ("pixel_aspect_x", "pixel_aspect_y"):
        if float(raw.get(key, 1.0)) != 1.0:
            raise CalibrationError(f"{path}: {key} = {raw[key]}: only square pixels are supported")
    f, cx, cy = blender_intrinsics(_blender_value(raw, "lens", path), _blender_value(raw, "sensor_width", path),
                                   float(raw.get("sensor_height_mm", raw.get("sensor_height", 0.0))),
                                   raw.get("sensor_fit", "AUTO"), width, height, float(raw.get("shift_x", 0.0)),
                                   float(raw.get("shift_y", 0.0)), source=str(path))
    cal = make_calibration(f, f, cx, cy, (), (width, height), source=str(path))
    return dataclasses.replace(cal, world_to_camera=blender_world_to_camera(raw["matrix_world"], str(path)),
                               world_up="z")


#: COLMAP's camera models: (model id, parameter count, how the parameters map to OpenCV's fx, fy, cx, cy and
#: distortion k1, k2, p1, p2[, k3, k4, k5, k6]).
COLMAP_MODELS = {
    "SIMPLE_PINHOLE": (0, 3, lambda p: (p[0], p[0], p[1], p[2], ())),
    "PINHOLE": (1, 4, lambda p: (p[0], p[1], p[2], p[3], ())),
    "SIMPLE_RADIAL": (2, 4, lambda p: (p[0], p[0], p[1], p[2], (p[3], 0.0, 0.0, 0.0))),
    "RADIAL": (3, 5, lambda p: (p[0], p[0], p[1], p[2], (p[3], p[4], 0.0, 0.0))),
    "OPENCV": (4, 8, lambda p: (p[0], p[1], p[2], p[3], tuple(p[4:8]))),
    "FULL_OPENCV": (6, 12, lambda p: (p[0], p[1], p[2], p[3], tuple(p[4:12]))),
}
_COLMAP_BY_ID = {v[0]: k for k, v in COLMAP_MODELS.items()}
#: COLMAP's other model ids, named in the message that refuses them.
_COLMAP_OTHER = {5: "OPENCV_FISHEYE", 7: "FOV", 8: "SIMPLE_RADIAL_FISHEYE", 9: "RADIAL_FISHEYE",
                 10: "THIN_PRISM_FISHEYE"}
_COLMAP_COUNTS = {0: 3, 1: 4, 2: 4, 3: 5, 4: 8, 5: 8, 6: 12, 7: 5, 8: 4, 9: 5, 10: 12}


def _colmap_text(folder: Path):
    cameras, images = {}, {}
    for line in (folder / "cameras.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            f = line.split()
            cameras[int(f[0])] = (f[1], int(f[2]), int(f[3]), [float(x) for x in f[4:]])
    lines = [ln for ln in (folder / "images.txt").read_text().splitlines() if not ln.startswith("#")]
    for line in lines[0::2]:  # each image: its pose line, then its 2-D points' line
        f = line.split()
        if len(f) >= 10:
            images[" ".join(f[9:])] = ([float(x) for x in f[1:5]], [float(x) for x in f[5:8]], int(f[8]))
    return cameras, images


def _colmap_binary(folder: Path):
    cameras, images = {}, {}
    data = (folder / "cameras.bin").read_bytes()
    (count,), at = struct.unpack_from("<Q", data, 0), 8
    for _ in range(count):
        cam_id, model_id, width, height = struct.unpack_from("<iiQQ", data, at)
        at += 24
        n = _COLMAP_COUNTS.get(model_id, 0)
        params = struct.unpack_from(f"<{n}d", data, at)
        at += 8 * n
        cameras[cam_id] = (_COLMAP_BY_ID.get(model_id, _COLMAP_OTHER.get(model_id, f"model {model_id}")), width,
                           height, list(params))
    data = (folder / "images.bin").read_bytes()
    (count,), at = struct.unpack_from("<Q", data, 0), 8
    for _ in range(count):
        values = struct.unpack_from("<i7di", data, at)
        at += struct.calcsize("<i7di")
        end = data.index(b"\0", at)
        name = data[at:end].decode()
        (points,) = struct.unpack_from("<Q", data, end + 1)
        at = end + 1 + 8 + points * 24
        images[name] = (list(values[1:5]), list(values[5:8]), values[8])
    return cameras, images


def read_colmap_camera(folder, image=None) -> Calibration:
    """One registered image's camera of a COLMAP sparse model as a `Calibration` with its pose.

    Args:
        folder: the model's folder (cameras.txt and images.txt, or cameras.bin and images.bin).
        image: the registered image's name as COLMAP lists it; None: the first name in sorted order.

    Returns:
        The `Calibration`: intrinsics at the camera's size (principal point moved by -1/2 px to our pixel
        centres), its distortion in OpenCV's order, world_to_camera from the image's pose.
    """
    folder = Path(folder)
    try:
        if (folder / "cameras.txt").is_file() and (folder / "images.txt").is_file():
            cameras, images = _colmap_text(folder)
        elif (folder / "cameras.bin").is_file() and (folder / "images.bin").is_file():
            cameras, images = _colmap_binary(folder)
        else:
            raise CalibrationError(f"{folder}: not a COLMAP model folder (cameras.txt + images.txt, or cameras.bin "
                                   "+ images.bin)")
    except (ValueError, IndexError, struct.error, UnicodeDecodeError) as e:
        raise CalibrationError(f"{folder}: cannot read the COLMAP model: {e}") from e
    if not images:
        raise CalibrationError(f"{folder}: the COLMAP model has no registered image")
    name = sorted(images)[0] if image is None else image
    if name not in images:
        raise CalibrationError(f"{folder}: no registered image {name!r} (it has {', '.join(sorted(images)[:5])}"
                               f"{', ...' if len(images) > 5 else ''})")
    q, t, cam_id = images[name]
    if cam_id not in cameras:
        raise CalibrationError(f"{folder}: image {name!r} names camera {cam_id}, which cameras lists not")
    model, width, height, params = cameras[cam_id]
    if model not in COLMAP_MODELS:
        raise CalibrationError(f"{folder}: camera {cam_id} is a {model} camera; supported: "
                               f"{', '.join(COLMAP_MODELS)} (undistort the images with COLMAP first)")
    if len(params) != COLMAP_MODELS[model][1]:
        raise CalibrationError(f"{folder}: a {model} camera has {COLMAP_MODELS[model][1]} parameters, "
                               f"camera {cam_id} has {len(params)}")
    fx, fy, cx, cy, dist = COLMAP_MODELS[model][2](params)
    cal = make_calibration(fx, fy, cx - 0.5, cy - 0.5, dist, (width, height), source=f"{folder}: camera {cam_id}")
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = np.asarray(quat_to_matrix(np.asarray(q) / np.linalg.norm(q)), np.float64), t
    return dataclasses.replace(cal, world_to_camera=pose)
