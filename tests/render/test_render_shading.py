"""Shading helpers: normals, light factors, bilinear texture lookup."""

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.render import Lights, default_lights
from gradsim_jax.render.shading import face_light_factor, face_normals, sample_bilinear


def test_face_normals_right_hand_rule_and_degenerate():
    faces = jnp.array([[[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 0, 0], [1, 1, 1], [2, 2, 2]]], jnp.float32)
    n = face_normals(faces)
    np.testing.assert_allclose(n[0], [0, 0, 1])
    np.testing.assert_allclose(n[1], [0, 0, 0])
    grad = jax.grad(lambda f: jnp.sum(face_normals(f)))(faces)
    assert np.all(np.isfinite(np.asarray(grad)))


def test_light_factor_turns_normals_towards_the_eye():
    face = jnp.array([[[0, 0, 0], [1, 0, 0], [0, 1, 0]]], jnp.float32)  # normal +z
    lights = Lights(jnp.asarray(0.2), jnp.asarray([0.5, 0.6, 0.7]), jnp.asarray([0.0, 0.0, 2.0]))
    from_front = face_light_factor(lights, face, jnp.array([0.0, 0.0, 5.0]))
    from_back = face_light_factor(lights, face, jnp.array([0.0, 0.0, -5.0]))
    np.testing.assert_allclose(from_front[0], [0.7, 0.8, 0.9], rtol=1e-6)
    # Seen from behind, the visible side faces -z, away from the light.
    np.testing.assert_allclose(from_back[0], [0.2, 0.2, 0.2], rtol=1e-6)
    assert face_light_factor(None, face, jnp.zeros(3)).tolist() == [[1.0, 1.0, 1.0]]
    assert float(default_lights().ambient) == 0.5


def test_bilinear_lookup_hits_texel_centers_and_interpolates():
    image = jnp.arange(2 * 3 * 1, dtype=jnp.float32).reshape(2, 3, 1)  # rows top to bottom
    # Texel (row j, col i) center: u = (i + 0.5) / 3, v = 1 - (j + 0.5) / 2.
    assert float(sample_bilinear(image, jnp.array([0.5 / 3, 0.75]))[0]) == 0.0
    assert float(sample_bilinear(image, jnp.array([2.5 / 3, 0.25]))[0]) == 5.0
    np.testing.assert_allclose(sample_bilinear(image, jnp.array([1.0 / 3, 0.5]))[0], 2.0, rtol=1e-6)
    # Outside [0, 1] lookups clamp to the border.
    assert float(sample_bilinear(image, jnp.array([-1.0, 2.0]))[0]) == 0.0
