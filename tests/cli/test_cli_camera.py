"""Cameras in scene files: look-at, intrinsics with a pose, OpenCV calibration files, background pictures,
clear errors; and a camera pose fitted jointly with the mass."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.render.calibration import Calibration, read_calibration, undistorter, write_calibration
from gradsim_jax.render.camera import Camera, pose_vector, project_pixels, rotation_from_rvec
from gradsim_jax.scenefile import SceneFileError, load_scene

from cli_scenes import SMALL_CLOTH

BASE = SMALL_CLOTH + """
[render]
width = 40
height = 30

[simulation]
frames = 4

[fit]
free = ["mass"]
"""


def scene(tmp_path, camera: str, extra: str = ""):
    path = tmp_path / "scene.toml"
    path.write_text(BASE + "\n[camera]\n" + camera + "\n" + extra)
    return load_scene(path)


def test_intrinsics_refer_to_the_calibrated_size_and_scale_to_the_render(tmp_path):
    spec = scene(tmp_path, "fx = 160.0\nfy = 150.0\ncx = 83.1\ncy = 55.2\nimage_size = [160, 120]\n"
                           "eye = [0.5, 0.6, 1.5]")
    cam = spec.camera()
    assert (cam.width, cam.height) == (40, 30)
    np.testing.assert_allclose(cam.focal, [40.0, 37.5], rtol=1e-6)
    np.testing.assert_allclose(cam.principal, [(83.1 + 0.5) / 4 - 0.5, (55.2 + 0.5) / 4 - 0.5], rtol=1e-6)
    np.testing.assert_allclose(cam.eye, [0.5, 0.6, 1.5], atol=1e-6)
    # Without image_size the intrinsics refer to the target's frames (here 320 x 240: scaled by 1/8).
    spec = scene(tmp_path, "fx = 320.0\nfy = 320.0\ncx = 160.0\ncy = 120.0\neye = [0.5, 0.6, 1.5]")
    np.testing.assert_allclose(spec.camera(native_size=(240, 320)).focal, [40.0, 40.0], rtol=1e-6)


@pytest.mark.parametrize("suffix", [".yml", ".json"])
def test_opencv_calibration_file_with_pose(tmp_path, suffix):
    cam = Camera.from_intrinsics(150.0, 140.0, 77.0, 61.0, 160, 120, eye=(0.4, 0.7, 1.6))
    pose = pose_vector(cam)
    cal = Calibration(np.asarray(cam.intrinsic_matrix, np.float64), np.array([-0.1, 0.02, 0.0, 0.0, 0.0]),
                      (160, 120), rvec=pose[:3], tvec=pose[3:])
    write_calibration(tmp_path / f"cal{suffix}", cal)
    back = read_calibration(tmp_path / f"cal{suffix}")
    np.testing.assert_allclose(back.camera_matrix, cal.camera_matrix)
    np.testing.assert_allclose(back.distortion, cal.distortion)
    assert back.image_size == (160, 120)
    spec = scene(tmp_path, f'calibration = "cal{suffix}"')
    render_cam = spec.camera(native_size=(120, 160))
    np.testing.assert_allclose(render_cam.eye, [0.4, 0.7, 1.6], atol=1e-5)
    point = jnp.asarray([[0.1, -0.1, 0.05]])
    uv_native, _ = project_pixels(cam, point)
    uv, _ = project_pixels(render_cam, point)
    np.testing.assert_allclose(uv, (uv_native + 0.5) / 4.0 - 0.5, atol=1e-4)
    assert spec.calibration().distorted and undistorter(spec.calibration()) is not None


def test_plain_json_calibration(tmp_path):
    (tmp_path / "cal.json").write_text(json.dumps(
        {"K": [[100.0, 0, 39.5], [0, 100.0, 29.5], [0, 0, 1]], "dist": [0, 0, 0, 0], "image_size": [80, 60],
         "note": "phone, 2026"}))
    cal = read_calibration(tmp_path / "cal.json")
    assert cal.fx == 100.0 and cal.image_size == (80, 60) and not cal.distorted


def test_undistortion_moves_points_back_to_the_pinhole_position():
    cv2 = pytest.importorskip("cv2")
    k = np.array([[60.0, 0, 31.5], [0, 60.0, 23.5], [0, 0, 1]])
    dist = np.array([-0.5, 0.2, 0.0, 0.0, 0.0])
    cal = Calibration(k, dist, (64, 48))
    # A bright dot where the pinhole model puts a point, distorted by the lens.
    point = np.array([[0.45, 0.3, 1.0]])
    ideal = cv2.projectPoints(point, np.zeros(3), np.zeros(3), k, np.zeros(5))[0][0, 0]
    seen = cv2.projectPoints(point, np.zeros(3), np.zeros(3), k, dist)[0][0, 0]
    v, u = np.mgrid[0:48, 0:64]
    frame = np.exp(-((u - seen[0]) ** 2 + (v - seen[1]) ** 2) / 2.0)[..., None].astype(np.float32)
    fixed = undistorter(cal)(frame)[..., 0]
    row, col = np.unravel_index(np.argmax(fixed), fixed.shape)
    assert abs(col - ideal[0]) <= 1 and abs(row - ideal[1]) <= 1
    assert np.hypot(*(seen - ideal)) > 2  # the lens really moved it


@pytest.mark.parametrize("camera, message", [
    ("distance = 2.0\neye = [1.0, 1.0, 1.0]", "one pose"),
    ("fx = 100.0\nfy = 100.0\ncx = 20.0\ncy = 15.0\nview_angle = 30.0", "view_angle"),
    ("fx = 100.0", "both fx and fy"),
    ("fx = 100.0\nfy = 100.0", "cx and cy"),
    ("rvec = [0.0, 0.0, 0.0]", "both rvec and tvec"),
    ("pose = [[1.0, 0, 0, 0], [0, 2.0, 0, 0], [0, 0, 1.0, 3.0], [0, 0, 0, 1.0]]", "proper rotation"),
    ("fx = -5.0\nfy = 100.0\ncx = 20.0\ncy = 15.0", "positive"),
    ("distortion = [0.1, 0.0, 0.0, 0.0]", "need intrinsics"),
    ("view_angle = 95.0", "view_angle"),
    ('calibration = "nope.yml"', "not found"),
    ("near = 5.0\nfar = 1.0", "near < far"),
])
def test_camera_errors_name_the_key(tmp_path, camera, message):
    with pytest.raises(SceneFileError, match=message):
        scene(tmp_path, camera).camera(native_size=(30, 40))


def test_intrinsics_for_another_aspect_ratio_are_refused(tmp_path):
    spec = scene(tmp_path, "fx = 100.0\nfy = 100.0\ncx = 50.0\ncy = 50.0\nimage_size = [100, 100]\n"
                           "eye = [0.5, 0.5, 1.5]")
    with pytest.raises(SceneFileError, match="aspect ratio"):
        spec.camera(native_size=(60, 100))
    spec.camera(native_size=(50, 50))  # a half-size copy of the calibrated video is fine


def test_background_image_median_and_picture(tmp_path):
    import imageio.v2 as imageio

    spec = scene(tmp_path, "distance = 2.0", '[render]\n'.replace("[render]\n", ""))
    path = tmp_path / "scene.toml"
    path.write_text(path.read_text().replace("height = 30\n", 'height = 30\nbackground_image = "median"\n'))
    spec = load_scene(path)
    frames = np.zeros((5, 30, 40, 4), np.float32)
    frames[..., :3] = 0.25
    frames[1, :10, :10, :3] = 1.0  # an object passing by
    np.testing.assert_allclose(spec.background_image(frames), 0.25)
    with pytest.raises(SceneFileError, match="needs a target"):
        spec.background_image()
    picture = np.zeros((60, 80, 3), np.uint8)
    picture[:, 40:] = 255
    imageio.imwrite(tmp_path / "bg.png", picture)
    path.write_text(path.read_text().replace('"median"', '"bg.png"'))
    image = load_scene(path).background_image()
    assert image.shape == (30, 40, 3)
    np.testing.assert_allclose(image[:, :20], 0.0)
    np.testing.assert_allclose(image[:, 20:], 1.0)


def _rotate_about_axis(rvec, degrees, axis):
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    r = np.asarray(rotation_from_rvec(jnp.asarray(np.radians(degrees) * axis, jnp.float32)), np.float64)
    return r @ np.asarray(rotation_from_rvec(jnp.asarray(rvec, jnp.float32)), np.float64)


@pytest.mark.slow
def test_camera_pose_recovered_jointly_with_mass(tmp_path):
    """A pose 3 degrees and 2 cm off and the mass 30 % off are fitted together from the video."""
    from gradsim_jax.render.camera import rvec_from_rotation

    path = tmp_path / "scene.toml"
    path.write_text(BASE.replace("frames = 4", "frames = 10\nfps = 30.0\nsubsteps = 16")
                    .replace('free = ["mass"]', 'free = ["mass", "camera_pose"]')
                    .replace("width = 40\nheight = 30", "width = 40\nheight = 40")
                    + "\n[push]\nforce = [0.0, 0.5, 0.2]\nparticles = [2, 5, 8]\nframes = 4\n"
                    + "[camera]\nfx = 52.0\nfy = 52.0\ncx = 19.5\ncy = 19.5\neye = [0.6, 0.5, 1.1]\n"
                    + "at = [0.0, -0.15, 0.0]\n")
    spec = load_scene(path)
    exp = spec.experiment()
    true_pose = pose_vector(exp.camera)
    _, target = sysid.simulate_video(exp, {})
    rotation = _rotate_about_axis(true_pose[:3], 3.0, [0.3, 1.0, -0.2])
    true_centre = np.asarray(exp.camera.eye, np.float64)
    centre = true_centre + np.array([0.012, -0.01, 0.0125])  # 2 cm
    start_pose = np.concatenate([rvec_from_rotation(rotation), -rotation @ centre])
    initial = dict(exp.theta, mass=exp.theta["mass"] * 1.3, camera_pose=jnp.asarray(start_pose, jnp.float32))
    config = sysid.FitConfig(free=("mass", "camera_pose"), iterations=30, learning_rate=0.02, polish=10,
                             progress=False)
    result = sysid.identify(exp, target, initial, config)
    err = sysid.pose_error(result.theta["camera_pose"], true_pose)
    start = sysid.pose_error(start_pose, true_pose)
    assert start["rotation_deg"] == pytest.approx(3.0, abs=0.01) and start["centre_m"] == pytest.approx(0.02, 1e-3)
    assert err["rotation_deg"] < 0.05 and err["centre_m"] < 1e-3, err
    assert sysid.relative_error("mass", result.theta["mass"], exp.theta["mass"]) < 0.01
    assert result.convergence.converged
