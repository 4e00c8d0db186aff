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
    # Looking along +z from -z: right is +x, up is +y.
    np.testing.assert_allclose(axes, np.eye(3), atol=1e-6)
    cam = look_at_camera(4.0, 35.0, -60.0)
    axes = np.asarray(camera_axes(cam))
    np.testing.assert_allclose(axes @ axes.T, np.eye(3), atol=1e-6)


def test_projection_of_known_points():
    cam = camera_from_eye(jnp.array([0.0, 0.0, -2.0]), view_angle=45.0, width=32, height=32)
    points = jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 2.0]])
    xy, z = project(cam, points)
    np.testing.assert_allclose(z, [2.0, 2.0, 2.0, 4.0], rtol=1e-6)
    # x_ndc = x / (z tan(angle)), tan(45) = 1.
    np.testing.assert_allclose(xy, [[0, 0], [0.5, 0], [0, 0.25], [0, 0]], atol=1e-6)
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
