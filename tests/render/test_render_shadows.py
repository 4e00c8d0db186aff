"""Planar shadows (`render.shadows`): points go down the light's direction onto the ground plane; a square lit
from straight above shadows the floor under it; the shadow darkens the picture by its strength; gradients reach
the casting vertices."""

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.render import RenderSettings, look_at_camera
from gradsim_jax.render.shadows import project_to_ground, shadow_coverage, shadowed_background

UP = jnp.asarray([0.0, 1.0, 0.0])


def square(height=0.5, size=0.4):
    h = size / 2
    x = jnp.asarray([[-h, height, -h], [h, height, -h], [-h, height, h], [h, height, h]])
    return x, jnp.asarray([[0, 2, 1], [1, 2, 3]])


def test_points_go_down_the_light_onto_the_plane():
    p = jnp.asarray([[0.3, 1.0, -0.2], [0.0, 0.25, 0.0]])
    np.testing.assert_allclose(project_to_ground(p, UP, UP, 0.0), [[0.3, 0.0, -0.2], [0.0, 0.0, 0.0]], atol=1e-7)
    # A light 45 degrees over the horizon along +x: the shadow falls one height away along -x.
    np.testing.assert_allclose(project_to_ground(p, jnp.asarray([1.0, 1.0, 0.0]), UP, 0.0),
                               [[-0.7, 0.0, -0.2], [-0.25, 0.0, 0.0]], atol=1e-6)
    # A raised, tilted plane: the projections lie on it.
    n, h = jnp.asarray([0.2, 1.0, 0.1]), 0.1
    q = project_to_ground(p, jnp.asarray([0.3, 1.0, 0.5]), n, h)
    np.testing.assert_allclose(q @ (n / jnp.linalg.norm(n)), [h, h], atol=1e-6)


def test_a_square_lit_from_above_shadows_the_floor_under_it():
    camera = look_at_camera(2.0, 89.0, 0.0, width=48, height=48, near=0.1)
    settings = RenderSettings(coverage="box")
    x, faces = square()
    cover = np.asarray(shadow_coverage(camera, x, faces, UP, UP, 0.0, settings))
    on_floor = np.asarray(shadow_coverage(camera, x.at[:, 1].set(0.0), faces, UP, UP, 0.0, settings))
    np.testing.assert_allclose(cover, on_floor, atol=1e-6)  # the shadow is the square laid on the floor
    assert 0.02 < cover.mean() < 0.05 and cover.max() == 1.0  # (0.4 m / 2.31 m in view)^2 = 3 %
    picture = np.asarray(shadowed_background(jnp.asarray([0.6, 0.5, 0.4]), jnp.asarray(cover), 0.75))
    np.testing.assert_allclose(picture[cover == 1.0], [[0.15, 0.125, 0.1]] * int((cover == 1.0).sum()), atol=1e-6)
    np.testing.assert_allclose(picture[cover == 0.0], [[0.6, 0.5, 0.4]] * int((cover == 0.0).sum()), atol=1e-6)


def test_the_shadow_moves_with_the_casting_vertices():
    camera = look_at_camera(2.0, 60.0, 20.0, width=48, height=48, near=0.1)
    settings = RenderSettings(coverage="box")
    x, faces = square()
    light = jnp.asarray([0.6, 1.0, 0.2])
    ramp = jnp.linspace(0.0, 1.0, 48)[None, :]  # weights the shadow's left-right position

    @jax.jit
    def score(x):
        return jnp.sum(shadow_coverage(camera, x, faces, light, UP, 0.0, settings, blur=1.0) * ramp)

    g = np.asarray(jax.jit(jax.grad(score))(x))
    assert np.all(np.isfinite(g)) and np.abs(g).max() > 1e-3
    # Raising the square moves its shadow away from the light (along -x): the central difference agrees.
    step = 1e-2
    up = x.at[:, 1].add(step)
    down = x.at[:, 1].add(-step)
    fd = (score(up) - score(down)) / (2 * step)
    np.testing.assert_allclose(g[:, 1].sum(), fd, rtol=0.1)


def test_the_light_is_read_off_a_frames_shadow():
    """A square 0.5 m over the floor lit from 0.6, 1, 0.2: the frame's shadow (the floor darkened where it is)
    gives the light's direction back, to the perspective's shift of the shadow's centre (a few degrees)."""
    from gradsim_jax.render.shadows import light_from_shadow

    camera = look_at_camera(2.2, 50.0, 30.0, width=96, height=96, near=0.1)
    settings = RenderSettings(coverage="box")
    x, faces = square()
    light = np.array([0.6, 1.0, 0.2]) / np.linalg.norm([0.6, 1.0, 0.2])
    background = jnp.asarray([0.5, 0.5, 0.5])
    cover = shadow_coverage(camera, x, faces, jnp.asarray(light), UP, 0.0, settings)
    frame = np.concatenate([np.asarray(shadowed_background(background, cover, 0.6)),
                            np.zeros((96, 96, 1))], axis=-1)  # the square itself kept off the frame's mask
    got = light_from_shadow(camera, frame, background, np.asarray(x), np.asarray(UP), 0.0)
    assert np.degrees(np.arccos(np.clip(got @ light, -1, 1))) < 3.0
    assert light_from_shadow(camera, np.concatenate([np.full((96, 96, 3), 0.5), np.zeros((96, 96, 1))], -1),
                             background, np.asarray(x), np.asarray(UP), 0.0) is None  # no shadow seen
