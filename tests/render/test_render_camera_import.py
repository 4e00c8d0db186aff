"""Cameras from other tools: a Blender camera's JSON and a COLMAP model (text and binary), checked against the
projections each tool defines, written out here from its documentation; and refusals that name the problem."""

import json
import struct

import numpy as np
import pytest

from gradsim_jax.render.calibration import CalibrationError
from gradsim_jax.render.camera import Camera, project_pixels
from gradsim_jax.render.camera_import import blender_intrinsics, read_blender_camera, read_colmap_camera

# float64 camera maths on float32 output: pixels of a few hundred, relative error ~1e-6.
PIX_TOL = 1e-3


def rotation(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def blender_pixels(points, matrix_world, lens, sensor, width, height, shift=(0.0, 0.0)):
    """Blender's view: camera coordinates (x right, y up, looking down -z) onto a sensor whose width spans the
    image's larger side (sensor_fit AUTO), shifted by a fraction of that side; pixel centres at whole numbers."""
    side = max(width, height)
    local = (np.linalg.inv(matrix_world) @ np.c_[points, np.ones(len(points))].T).T[:, :3]
    u = local[:, 0] / -local[:, 2] * lens / sensor  # image-plane units of the fitted side
    v = local[:, 1] / -local[:, 2] * lens / sensor
    col = width / 2 + (u - shift[0]) * side - 0.5
    row = height / 2 - (v - shift[1]) * side - 0.5
    return np.c_[col, row]


def camera_of(cal, width, height):
    return Camera.from_intrinsics(cal.fx, cal.fy, cal.cx, cal.cy, width, height, world_to_camera=cal.world_to_camera)


@pytest.mark.parametrize("size,shift", [((160, 120), (0.0, 0.0)), ((120, 160), (0.05, -0.08)),
                                        ((200, 100), (-0.1, 0.03))])
def test_blender_camera_projects_as_blender_does(tmp_path, size, shift):
    m = np.eye(4)
    m[:3, :3] = rotation([0.3, -0.5, 0.8], 1.1) @ np.diag([1.5, 1.5, 1.5])  # a scaled camera object
    m[:3, 3] = [1.2, -2.5, 1.4]
    points = m[:3, 3] + (m[:3, :3] / 1.5) @ np.array([[0.1, 0.05, -2.0], [-0.3, 0.2, -3.0], [0.0, 0.0, -1.5]]).T
    points = points.T
    (tmp_path / "camera.json").write_text(json.dumps({
        "lens_mm": 35.0, "sensor_width_mm": 36.0, "sensor_height_mm": 24.0, "sensor_fit": "AUTO",
        "resolution": list(size), "shift_x": shift[0], "shift_y": shift[1], "matrix_world": m.tolist()}))
    cal = read_blender_camera(tmp_path / "camera.json")
    assert cal.world_up == "z" and cal.image_size == size
    got = np.asarray(project_pixels(camera_of(cal, *size), points)[0])
    np.testing.assert_allclose(got, blender_pixels(points, m, 35.0, 36.0, *size, shift), atol=PIX_TOL)


def test_blender_sensor_fits():
    assert blender_intrinsics(50.0, 36.0, 24.0, "HORIZONTAL", 100, 200)[0] == pytest.approx(50 / 36 * 100)
    assert blender_intrinsics(50.0, 36.0, 24.0, "VERTICAL", 100, 200)[0] == pytest.approx(50 / 24 * 200)
    assert blender_intrinsics(50.0, 36.0, 24.0, "AUTO", 100, 200)[0] == pytest.approx(50 / 36 * 200)
    with pytest.raises(CalibrationError, match="sensor_fit"):
        blender_intrinsics(50.0, 36.0, 24.0, "DIAGONAL", 100, 200)


def test_blender_camera_refusals(tmp_path):
    path = tmp_path / "camera.json"
    path.write_text(json.dumps({"lens_mm": 35.0, "sensor_width_mm": 36.0, "resolution": [64, 48]}))
    with pytest.raises(CalibrationError, match="matrix_world"):
        read_blender_camera(path)
    path.write_text(json.dumps({"lens_mm": 35.0, "sensor_width_mm": 36.0, "resolution": [64, 48],
                                "pixel_aspect_x": 2.0, "matrix_world": np.eye(4).tolist()}))
    with pytest.raises(CalibrationError, match="square pixels"):
        read_blender_camera(path)


QUAT = np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2])
T = np.array([0.2, -0.1, 2.5])


def quat_matrix(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def write_colmap_text(folder, model="PINHOLE", params=(300.0, 310.0, 160.0, 120.0)):
    folder.mkdir(exist_ok=True)
    (folder / "cameras.txt").write_text("# Camera list\n" f"1 {model} 320 240 {' '.join(map(str, params))}\n")
    (folder / "images.txt").write_text(
        "# Image list\n"
        f"1 {' '.join(map(str, QUAT))} {' '.join(map(str, T))} 1 frame_0001.png\n"
        "10.0 20.0 -1\n"
        f"2 1 0 0 0 0 0 0 1 frame_0002.png\n"
        "\n")


def write_colmap_binary(folder, params=(300.0, 310.0, 160.0, 120.0)):
    folder.mkdir(exist_ok=True)
    cams = struct.pack("<Q", 1) + struct.pack("<iiQQ", 1, 1, 320, 240) + struct.pack("<4d", *params)
    (folder / "cameras.bin").write_bytes(cams)
    imgs = struct.pack("<Q", 2)
    imgs += struct.pack("<i7di", 1, *QUAT, *T, 1) + b"frame_0001.png\0" + struct.pack("<Q", 1)
    imgs += struct.pack("<ddq", 10.0, 20.0, -1)
    imgs += struct.pack("<i7di", 2, 1, 0, 0, 0, 0, 0, 0, 1) + b"frame_0002.png\0" + struct.pack("<Q", 0)
    (folder / "images.bin").write_bytes(imgs)


def colmap_pixels(points, fx, fy, cx, cy):
    """COLMAP: x_cam = R x + t, pixel = (fx x / z + cx, fy y / z + cy) with the top-left pixel's centre at 0.5."""
    cam = points @ quat_matrix(QUAT).T + T
    return np.c_[fx * cam[:, 0] / cam[:, 2] + cx - 0.5, fy * cam[:, 1] / cam[:, 2] + cy - 0.5]


@pytest.mark.parametrize("form", ["text", "binary"])
def test_colmap_camera_projects_as_colmap_does(tmp_path, form):
    (write_colmap_text if form == "text" else write_colmap_binary)(tmp_path / "sparse")
    cal = read_colmap_camera(tmp_path / "sparse", "frame_0001.png")
    assert cal.image_size == (320, 240) and not cal.distorted
    points = np.array([[0.1, 0.2, 0.3], [-0.4, 0.1, -0.2], [0.0, -0.3, 0.5]])
    got = np.asarray(project_pixels(camera_of(cal, 320, 240), points)[0])
    np.testing.assert_allclose(got, colmap_pixels(points, 300.0, 310.0, 160.0, 120.0), atol=PIX_TOL)
    first = read_colmap_camera(tmp_path / "sparse")  # the first name in sorted order
    np.testing.assert_allclose(first.world_to_camera, cal.world_to_camera)


def test_colmap_distortion_and_refusals(tmp_path):
    write_colmap_text(tmp_path / "a", "OPENCV", (300.0, 300.0, 160.0, 120.0, -0.1, 0.02, 0.001, -0.002))
    np.testing.assert_allclose(read_colmap_camera(tmp_path / "a").distortion, [-0.1, 0.02, 0.001, -0.002])
    write_colmap_text(tmp_path / "b", "SIMPLE_RADIAL", (300.0, 160.0, 120.0, -0.05))
    cal = read_colmap_camera(tmp_path / "b")
    assert cal.fx == cal.fy == 300.0
    np.testing.assert_allclose(cal.distortion, [-0.05, 0.0, 0.0, 0.0])
    write_colmap_text(tmp_path / "c", "OPENCV_FISHEYE", (300.0, 300.0, 160.0, 120.0, 0.0, 0.0, 0.0, 0.0))
    with pytest.raises(CalibrationError, match="OPENCV_FISHEYE.*supported"):
        read_colmap_camera(tmp_path / "c")
    with pytest.raises(CalibrationError, match="no registered image 'nope.png'"):
        read_colmap_camera(tmp_path / "a", "nope.png")
    with pytest.raises(CalibrationError, match="not a COLMAP model folder"):
        read_colmap_camera(tmp_path)
