"""Camera conventions: look-at pose, projection, pixel centers, differentiability."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gradsim_jax.render import camera_from_eye, look_at_camera, pixel_centers, project, world_to_camera
from gradsim_jax.render.camera import camera_axes, screen_to_pixel


def test_eye_position_follows_softras_convention():
    d, el, az = 2.5, 30.0, 45.0
    cam = look_at_camera(d, el, az)
    el_r, az_r = np.deg2rad(el), np.deg2rad(az)
    expected = d * np.array([np.cos(el_r) * np.sin(az_r), np.sin(el_r), -np.cos(el_r) * np.cos(az_r)])
    np.testing.assert_allclose(cam.eye, expected, rtol=1e-6)


def test_axes_are_orthonormal_and_right_up_forward():
    cam = camera_from_eye(jnp.array([0.0, 0.0, -3.0]))
    axes = np.asarray(camera_axes(cam))
    np.testing.assert_allclose(axes @ axes.T, np.eye(3), atol=1e-6)
    # Looking along +z from -z with +y up, a real camera has world -x on its right.
    np.testing.assert_allclose(axes, np.diag([-1.0, 1.0, 1.0]), atol=1e-6)
    # From +z looking at the origin: +x is on the right, as in PyTorch3D, OpenGL and Blender.
    axes = np.asarray(camera_axes(camera_from_eye(jnp.array([0.0, 0.0, 3.0]))))
    np.testing.assert_allclose(axes, np.diag([1.0, 1.0, -1.0]), atol=1e-6)
    cam = look_at_camera(4.0, 35.0, -60.0)
    axes = np.asarray(camera_axes(cam))
    np.testing.assert_allclose(axes @ axes.T, np.eye(3), atol=1e-6)


def test_projection_of_known_points():
    cam = camera_from_eye(jnp.array([0.0, 0.0, -2.0]), view_angle=45.0, width=32, height=32)
    points = jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 2.0]])
    xy, z = project(cam, points)
    np.testing.assert_allclose(z, [2.0, 2.0, 2.0, 4.0], rtol=1e-6)
    # x_ndc = x / (z tan(angle)), tan(45) = 1; seen from -z, world +x is on the image's left.
    np.testing.assert_allclose(xy, [[0, 0], [-0.5, 0], [0, 0.25], [0, 0]], atol=1e-6)
    cam_xyz = world_to_camera(cam, points)
    np.testing.assert_allclose(cam_xyz[:, 2], z)


def test_points_behind_the_camera_project_finitely():
    cam = camera_from_eye(jnp.array([0.0, 0.0, -2.0]))
    points = jnp.array([[0.3, 0.2, -5.0], [0.0, 0.0, -2.0]])

    def total(p):
        xy, z = project(cam, p)
        return jnp.sum(xy) + jnp.sum(z)

    assert np.all(np.isfinite(jax.grad(total)(points)))


def test_pixel_centers_row_zero_is_top():
    xy = pixel_centers(4, 4)
    np.testing.assert_allclose(xy[0, :, 0], [-0.75, -0.25, 0.25, 0.75])
    np.testing.assert_allclose(xy[:, 0, 1], [0.75, 0.25, -0.25, -0.75])
    # Non-square images keep square pixels: x spans [-W/H, W/H].
    xy = pixel_centers(8, 4)
    np.testing.assert_allclose(xy[0, 0], [-1.75, 0.75])
    cam = look_at_camera(2.0, 0.0, 0.0, width=8, height=4)
    np.testing.assert_allclose(screen_to_pixel(cam, jnp.asarray(xy)), np.stack(np.meshgrid(np.arange(8), np.arange(4)), -1), atol=1e-5)


def test_camera_is_a_pytree_with_static_size():
    cam = look_at_camera(2.0, 10.0, 20.0, width=24, height=16)
    leaves, treedef = jax.tree_util.tree_flatten(cam)
    assert len(leaves) == 6
    assert jax.tree_util.tree_unflatten(treedef, leaves).width == 24
    traces = []

    @jax.jit
    def center_depth(c):
        traces.append(1)
        return project(c, jnp.zeros((1, 3)))[1][0]

    center_depth(cam)
    center_depth(look_at_camera(3.0, 5.0, 0.0, width=24, height=16))
    assert len(traces) == 1


def test_spherical_camera_gradients_match_finite_differences():
    with jax.enable_x64(True):
        point = jnp.array([[0.3, -0.2, 0.4]])

        def screen_x(params):
            cam = look_at_camera(params[0], params[1], params[2], view_angle=params[3])
            xy, z = project(cam, point)
            return xy[0, 0] + 0.3 * xy[0, 1] + 0.1 * z[0]

        screen_x = jax.jit(screen_x)
        params = jnp.array([3.0, 20.0, 30.0, 25.0])
        grad = jax.jit(jax.grad(screen_x))(params)
        eps = 1e-6
        for i in range(4):
            step = jnp.zeros(4).at[i].set(eps)
            fd = (screen_x(params + step) - screen_x(params - step)) / (2 * eps)
            assert grad[i] == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


def test_invalid_image_size_is_rejected():
    with pytest.raises(ValueError):
        look_at_camera(2.0, 0.0, 0.0, width=0, height=8)
    with pytest.raises(TypeError):
        look_at_camera(2.0, 0.0, 0.0, width=8.0, height=8)


# --------------------------------------------------------------------------------------------------
# Calibrated cameras: OpenCV's conventions, checked against a numpy pinhole model and cv2 itself.
# --------------------------------------------------------------------------------------------------

from gradsim_jax.render import Camera, RenderSettings, render  # noqa: E402
from gradsim_jax.render.camera import (  # noqa: E402
    pose_vector, project_pixels, rotation_from_rvec, rvec_from_rotation, with_image_size, with_pose_vector,
)


def _numpy_pinhole(points, rotation, tvec, fx, fy, cx, cy):
    cam = points @ rotation.T + tvec
    return np.stack([fx * cam[:, 0] / cam[:, 2] + cx, fy * cam[:, 1] / cam[:, 2] + cy], -1)


def test_intrinsics_projection_equals_opencv_project_points():
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        for _ in range(5):
            rvec = rng.normal(size=3) * rng.uniform(0.0, 3.0)
            tvec = np.array([0.1, -0.2, 4.0]) + rng.normal(size=3) * 0.3
            fx, fy, cx, cy = 610.0, 580.0, 301.3, 247.9
            cam = Camera.from_intrinsics(fx, fy, cx, cy, 640, 480, rvec=rvec, tvec=tvec, dtype=jnp.float64)
            points = rng.uniform(-1.0, 1.0, size=(20, 3))
            uv, z = project_pixels(cam, jnp.asarray(points))
            k = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]])
            expected, _ = cv2.projectPoints(points, rvec, tvec, k, np.zeros(5))
            np.testing.assert_allclose(np.asarray(uv), expected[:, 0], atol=1e-4)
            np.testing.assert_allclose(np.asarray(rotation_from_rvec(jnp.asarray(rvec))), cv2.Rodrigues(rvec)[0],
                                       atol=1e-12)


def test_pose_forms_agree_and_round_trip():
    with jax.enable_x64(True):
        eye = np.array([0.7, 0.9, 2.5])
        a = Camera.from_intrinsics(100.0, 100.0, 31.5, 23.5, 64, 48, eye=eye, dtype=jnp.float64)
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = np.asarray(a.rotation), np.asarray(a.translation)
        b = Camera.from_intrinsics(100.0, 100.0, 31.5, 23.5, 64, 48, world_to_camera=m)
        pose = pose_vector(a)
        c = Camera.from_intrinsics(100.0, 100.0, 31.5, 23.5, 64, 48, rvec=pose[:3], tvec=pose[3:])
        for cam in (b, c, with_pose_vector(a, pose)):
            np.testing.assert_allclose(np.asarray(cam.rotation), np.asarray(a.rotation), atol=1e-9)
            np.testing.assert_allclose(np.asarray(cam.eye), eye, atol=1e-9)
        # Rotations by ~pi (a camera looking back along -z) survive the round trip.
        flip = np.diag([1.0, -1.0, -1.0])
        np.testing.assert_allclose(np.asarray(rotation_from_rvec(jnp.asarray(rvec_from_rotation(flip)))), flip,
                                   atol=1e-9)
        with pytest.raises(ValueError, match="exactly one pose"):
            Camera.from_intrinsics(100.0, 100.0, 31.5, 23.5, 64, 48)


def test_rodrigues_gradient_is_finite_at_zero_and_matches_finite_differences():
    with jax.enable_x64(True):
        f = jax.jit(lambda r: jnp.sum(rotation_from_rvec(r) * jnp.arange(9.0).reshape(3, 3)))
        for r0 in (jnp.zeros(3), jnp.array([1e-3, -2e-3, 5e-4]), jnp.array([0.4, -1.1, 2.0])):
            g = jax.grad(f)(r0)
            assert np.all(np.isfinite(g))
            eps = 1e-6
            fd = [(f(r0 + eps * e) - f(r0 - eps * e)) / (2 * eps) for e in jnp.eye(3)]
            np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_resized_camera_maps_pixel_centres_consistently():
    cam = Camera.from_intrinsics(90.0, 80.0, 20.2, 13.7, 40, 30, eye=(0.3, 0.2, 2.0))
    points = jnp.array([[0.1, 0.2, 0.0], [-0.3, 0.1, 0.2]])
    uv, _ = project_pixels(cam, points)
    uv2, _ = project_pixels(with_image_size(cam, 80, 60), points)
    np.testing.assert_allclose(uv2, 2.0 * uv + 0.5, atol=1e-4)


def _dot(center, half=0.02):
    c = np.asarray(center, np.float32)
    v = np.array([c + [-half, -half, 0], c + [half, -half, 0], c + [half, half, 0], c + [-half, half, 0]])
    return v.astype(np.float32), np.array([[0, 1, 2], [0, 2, 3]], np.int32)


def test_sharp_render_lands_on_numpy_pinhole_pixels():
    """Non-square image, off-centre principal point, fx != fy: a tiny quad renders at the pixel where a
    plain numpy pinhole projection puts its centre."""
    fx, fy, cx, cy, width, height = 70.0, 64.0, 27.3, 14.6, 48, 32
    eye = np.array([0.4, 0.5, 2.2])
    cam = Camera.from_intrinsics(fx, fy, cx, cy, width, height, eye=eye)
    rot, t = np.asarray(cam.rotation, np.float64), np.asarray(cam.translation, np.float64)
    settings = RenderSettings()
    draw = jax.jit(lambda v, f: render(cam, v, f, settings=settings))
    for center in ([0.0, 0.0, 0.0], [0.35, 0.1, 0.0], [-0.3, -0.2, 0.1], [0.2, 0.3, -0.2]):
        v, f = _dot(center, half=0.01)
        alpha = np.asarray(draw(jnp.asarray(v), jnp.asarray(f)))[..., 3]
        u, w = _numpy_pinhole(np.asarray([center]), rot, t, fx, fy, cx, cy)[0]
        row, col = np.unravel_index(np.argmax(alpha), alpha.shape)
        assert (row, col) == (int(np.round(w)), int(np.round(u))), (center, (row, col), (u, w))


def test_asymmetric_scene_is_not_mirrored():
    """A camera on +z looking at the origin, y up: a quad at world +x shows on the right of the image,
    one at +y at the top; from -z the same quad shows on the left."""
    v, f = _dot([0.5, 0.0, 0.0], half=0.25)
    front = camera_from_eye(jnp.array([0.0, 0.0, 3.0]), width=32, height=32)
    alpha = np.asarray(jax.jit(lambda: render(front, jnp.asarray(v), jnp.asarray(f)))())[..., 3]
    assert alpha[:, 16:].sum() > 5 and alpha[:, :16].sum() < 1e-3
    back = camera_from_eye(jnp.array([0.0, 0.0, -3.0]), width=32, height=32)
    alpha = np.asarray(jax.jit(lambda: render(back, jnp.asarray(v), jnp.asarray(f)))())[..., 3]
    assert alpha[:, :16].sum() > 5 and alpha[:, 16:].sum() < 1e-3
    v, f = _dot([0.0, 0.5, 0.0], half=0.25)
    alpha = np.asarray(jax.jit(lambda: render(front, jnp.asarray(v), jnp.asarray(f)))())[..., 3]
    assert alpha[:16].sum() > 5 and alpha[16:].sum() < 1e-3
