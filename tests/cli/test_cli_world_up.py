"""[scene] up and ground_normal, and cameras from Blender in scene files: a z-up world is the y-up world turned by
the axes' rotation (x, y, z) -> (x, -z, y), so the same cloth, camera and light give the same motion (turned)
and the same video; a Blender camera's Z-up pose lands in either."""

import json

import numpy as np
import pytest

from gradsim_jax import sysid
from gradsim_jax.render.camera_import import BLENDER_TO_OPENCV
from gradsim_jax.scenefile import SceneFileError, load_scene

TURN = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])  # y-up world -> z-up world
Q_TURN = np.array([np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0])  # the same turn, a quaternion about +x


def quat_mul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def cloth_file(up, pos, rot, camera, extra=""):
    return f"""
[scene]
up = "{up}"
grid = [3, 3]
cell = [0.1, 0.1]
pos = {list(map(float, pos))}
rot = {list(map(float, rot))}
fix = ["left"]
ground = true
ground_height = -0.05
particle_radius = 0.01

[camera]
{camera}

[render]
width = 24
height = 20
color = [0.8, 0.5, 0.3]

[simulation]
frames = 8
substeps = 16

[fit]
free = ["mass"]
{extra}"""


def load(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return load_scene(path)


def test_a_z_up_world_is_the_y_up_world_turned(tmp_path):
    pos_y, rot_y = np.array([-0.15, 0.0, -0.15]), np.array([np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0])
    camera = "distance = 1.4\nelevation = 30.0\nazimuth = 20.0"
    y = load(tmp_path, "y.toml", cloth_file("y", pos_y, rot_y, camera))
    z = load(tmp_path, "z.toml", cloth_file("z", TURN @ pos_y, quat_mul(Q_TURN, rot_y), camera))
    ey, ez = y.experiment(), z.experiment()
    np.testing.assert_allclose(ez.params.world.gravity, [0.0, 0.0, -9.81], atol=1e-6)
    np.testing.assert_allclose(ez.params.world.ground_normal, [0.0, 0.0, 1.0], atol=1e-6)
    xy = sysid.simulate_vertices(ey, y.initial_theta(ey))
    xz = sysid.simulate_vertices(ez, z.initial_theta(ez))
    # The cloth falls onto the ground (its lowest particle ends near ground_height + radius) ...
    assert abs(xy[-1, :, 1].min() + 0.04) < 0.01
    # ... the same way in both worlds: float32 sums in another order, positions ~0.3 m, 6 x 8 steps.
    np.testing.assert_allclose(xz, xy @ TURN.T, atol=2e-5)
    # The camera and the light turn with the world: the same pictures (a uniform colour: the default
    # checkerboard's hues follow the world's axes).
    _, video_y = sysid.simulate_video(ey, y.initial_theta(ey))
    _, video_z = sysid.simulate_video(ez, z.initial_theta(ez))
    np.testing.assert_allclose(video_z, video_y, atol=2e-3)


def test_ground_normal_and_checks(tmp_path):
    camera = "distance = 1.4"
    spec = load(tmp_path, "n.toml", cloth_file("y", [-0.15, 0.0, -0.15], [1, 0, 0, 0], camera)
                .replace('ground_height = -0.05', 'ground_height = -0.25\nground_normal = [0.0, 2.0, 0.0]'))
    np.testing.assert_allclose(spec.experiment().params.world.ground_normal, [0.0, 2.0, 0.0])
    with pytest.raises(SceneFileError, match=r"\[scene\] up must be one of 'y', 'z', got 'x'"):
        load(tmp_path, "x.toml", cloth_file("x", [0, 0, 0], [1, 0, 0, 0], camera)).experiment()
    with pytest.raises(SceneFileError, match="ground_normal must be a finite nonzero vector"):
        load(tmp_path, "0.toml", cloth_file("y", [0, 0, 0], [1, 0, 0, 0], camera)
             .replace('ground_height = -0.05', 'ground_normal = [0.0, 0.0, 0.0]')).experiment()


def blender_json(tmp_path, eye_z, look_dir_z):
    """A Blender camera at eye_z (Blender's Z-up world) looking along look_dir_z with world +Z up in the image."""
    forward = np.asarray(look_dir_z, float) / np.linalg.norm(look_dir_z)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    m = np.eye(4)
    m[:3, :3] = np.c_[right, up, -forward]  # the camera's local x, y, -z in the world
    m[:3, 3] = eye_z
    (tmp_path / "camera.json").write_text(json.dumps({
        "lens_mm": 40.0, "sensor_width_mm": 36.0, "sensor_fit": "AUTO", "resolution": [120, 100],
        "matrix_world": m.tolist()}))
    return m


@pytest.mark.parametrize("up", ["y", "z"])
def test_a_blender_camera_in_either_world(tmp_path, up):
    eye_z, look_z = np.array([0.4, -1.5, 0.6]), np.array([-0.2, 1.0, -0.35])
    m = blender_json(tmp_path, eye_z, look_z)
    turn = np.eye(3) if up == "z" else TURN.T  # Blender's (z-up) world -> the file's
    spec = load(tmp_path, f"b{up}.toml", cloth_file(up, [0, 0, 0], [1, 0, 0, 0], 'blender = "camera.json"'))
    cam = spec.camera()
    np.testing.assert_allclose(cam.eye, turn @ eye_z, atol=1e-5)
    # The camera's optical axis (OpenCV +z) is Blender's -z, turned into the file's world.
    np.testing.assert_allclose(np.asarray(cam.rotation)[2], turn @ (-m[:3, 2]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(cam.rotation), BLENDER_TO_OPENCV @ m[:3, :3].T @ turn.T, atol=1e-5)
    # 40 mm on a 36 mm sensor spanning the 120 px side, scaled to the 24 px render.
    np.testing.assert_allclose(cam.focal, [40 / 36 * 24, 40 / 36 * 24], rtol=1e-5)


def test_one_camera_file(tmp_path):
    blender_json(tmp_path, [0.0, -2.0, 0.5], [0.0, 1.0, -0.2])
    with pytest.raises(SceneFileError, match="give the intrinsics once: blender or fx"):
        load(tmp_path, "two.toml", cloth_file("z", [0, 0, 0], [1, 0, 0, 0],
                                              'blender = "camera.json"\nfx = 100.0\nfy = 100.0')).camera()
    with pytest.raises(SceneFileError, match="colmap_image names an image of a COLMAP model: give colmap too"):
        load(tmp_path, "c.toml", cloth_file("z", [0, 0, 0], [1, 0, 0, 0], 'colmap_image = "a.png"')).camera()
