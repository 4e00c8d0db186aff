"""Checked rendering: inside `jit` an out-of-range face index or a non-finite vertex is reported by index.

Without the checks, an out-of-range index silently renders a finite (wrong) image and one NaN vertex
turns the whole image NaN.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradsim_jax as gs
from gradsim_jax.physics import TracedCheckError, raise_if_error
from gradsim_jax.render import FaceColors, default_lights
from gradsim_jax.render.checks import checked_render, checked_render_video, validate_render_inputs

CAMERA = gs.look_at_camera(1.5, 0.0, 0.0, width=16, height=16)


@pytest.fixture(scope="module")
def mesh():
    top, _, st = gs.cloth_grid(2, 2, 0.2, 0.2, pos=(-0.2, -0.2, 0.0)).build()
    return st.particles.x, top.cloth.triangles


_render = jax.jit(lambda v, f: gs.render(CAMERA, v, f))
_checked = jax.jit(lambda v, f: checked_render(CAMERA, v, f))


def test_out_of_range_face_is_named(mesh):
    vertices, faces = mesh
    bad = faces.at[5, 2].set(9)  # 9 vertices: 9 is one past the end
    assert np.isfinite(np.asarray(_render(vertices, bad))).all()  # the silent failure
    err, image = _checked(vertices, bad)
    assert err.get().startswith("faces[5] = [4, 7, 9] has an index out of range [0, 9)")
    with pytest.raises(TracedCheckError, match=r"render: faces\[5\]"):
        raise_if_error(err, "render")
    bad = faces.at[0, 0].set(-1)
    assert _checked(vertices, bad)[0].get().startswith("faces[0] = [-1, 1, 3] has an index out of range")


def test_nan_vertex_is_named(mesh):
    vertices, faces = mesh
    bad = vertices.at[4, 1].set(jnp.nan)
    colors = FaceColors(jnp.full((faces.shape[0], 3), 0.5))
    lit = jax.jit(lambda v: gs.render(CAMERA, v, faces, colors, lights=default_lights()))
    assert np.isnan(np.asarray(lit(bad))).any()  # the silent failure: NaN pixels, no word of which vertex
    err, _ = jax.jit(lambda v: checked_render(CAMERA, v, faces, colors, lights=default_lights()))(bad)
    assert err.get().startswith("vertices[4, 1] = nan is not finite")


def test_good_mesh_renders_as_render(mesh):
    vertices, faces = mesh
    err, image = _checked(vertices, faces)
    assert err.get() is None
    np.testing.assert_array_equal(image, _render(vertices, faces))


def test_colors_background_and_video_are_checked(mesh):
    vertices, faces = mesh
    colors = FaceColors(jnp.ones((faces.shape[0], 3)).at[2, 0].set(jnp.inf))
    err = jax.jit(validate_render_inputs)(vertices, faces, colors, jnp.asarray([0.0, jnp.nan, 0.0]))
    assert err.get().startswith("colors.rgb[2, 0] = inf is not finite")
    err = jax.jit(validate_render_inputs)(vertices, faces, None, jnp.asarray([0.0, jnp.nan, 0.0]))
    assert err.get().startswith("background[1] = nan is not finite")
    frames = jnp.stack([vertices, vertices.at[3, 0].set(jnp.nan)])
    err, video = jax.jit(lambda x: checked_render_video(CAMERA, x, faces))(frames)
    assert video.shape == (2, 16, 16, 4)
    assert err.get().startswith("frames[1, 3, 0] = nan is not finite")


def test_gradient_through_checked_render(mesh):
    vertices, faces = mesh

    def loss(v):
        err, image = checked_render(CAMERA, v, faces)
        return jnp.sum(image[..., 3]), err

    (_, err), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(vertices)
    assert err.get() is None and np.isfinite(np.asarray(grad)).all()
