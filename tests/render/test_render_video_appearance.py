"""The albedo read off a video frame (`render.video_appearance`): a frame rendered from a known per-face albedo
under known lights gives that albedo back, face by face; faces off the mask take their seen neighbours'
colours; faces not read keep theirs."""

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry.cloth import cloth_grid
from gradsim_jax.render import FaceColors, Lights, RenderSettings, look_at_camera, render
from gradsim_jax.render.camera import project_pixels
from gradsim_jax.render.video_appearance import ALBEDO_MIN, albedo_from_frame


def scene():
    topology, _, state = cloth_grid(8, 8, 0.075, 0.075, pos=(-0.3, 0.0, -0.3), rot=(0.7071068, 0.7071068, 0, 0)).build()
    x = np.asarray(state.particles.x)
    faces = np.asarray(topology.cloth.triangles)
    camera = look_at_camera(1.2, 50.0, 20.0, width=128, height=96, near=0.1)
    lights = Lights(ambient=jnp.asarray(0.35), directional=jnp.asarray(0.7), direction=jnp.asarray([0.3, 1.0, 0.4]))
    # A checkerboard of two-cell squares, as a fabric's print might be: every face lies in one square.
    centre = x[faces].mean(axis=1)
    cell = np.floor((centre[:, [0, 2]] - x.min(0)[[0, 2]]) / 0.15).astype(int)
    albedo = np.where(((cell[:, 0] + cell[:, 1]) % 2 == 0)[:, None], [0.8, 0.2, 0.2], [0.85, 0.85, 0.8])
    return x, faces, camera, lights, albedo.astype(np.float32)


def frame_of(x, faces, camera, lights, albedo):
    return np.array(render(camera, jnp.asarray(x), jnp.asarray(faces), FaceColors(jnp.asarray(albedo)), lights=lights,
                           background=jnp.zeros(3), settings=RenderSettings(coverage="box")))


def test_a_rendered_frame_gives_its_albedo_back():
    x, faces, camera, lights, albedo = scene()
    frame = frame_of(x, faces, camera, lights, albedo)
    got = albedo_from_frame(camera, x, faces, frame, lights, np.ones(len(faces), bool), np.zeros_like(albedo))
    # Pixels wholly inside one face have its colour exactly (to float32 and the light factor's arithmetic); the
    # renderer mixes the colours of faces within about a pixel of an edge, and the read keeps 3/4 px off the edges,
    # so the few thin triangles that keep their rim pixels read a mix: at most a quarter of the two colours'
    # difference (0.65), and on average a hundredth.
    np.testing.assert_allclose(got, albedo, atol=0.65 / 4)
    assert np.mean(np.abs(got - albedo)) < 0.01


def test_faces_off_the_mask_take_their_neighbours_and_base_is_kept():
    x, faces, camera, lights, albedo = scene()
    frame = frame_of(x, faces, camera, lights, albedo)
    frame[:, : frame.shape[1] // 2, 3] = 0.0  # the mask lost its left half
    read = np.ones(len(faces), bool)
    read[:4] = False
    base = np.full_like(albedo, 0.25)
    got = albedo_from_frame(camera, x, faces, frame, lights, read, base)
    np.testing.assert_array_equal(got[:4], base[:4])
    assert np.all((got >= ALBEDO_MIN) & (got <= 1 - ALBEDO_MIN))
    uv = np.asarray(project_pixels(camera, jnp.asarray(x))[0])[faces].mean(axis=1)
    seen = read & (uv[:, 0] > frame.shape[1] // 2 + 6)
    unseen = read & (uv[:, 0] < frame.shape[1] // 2 - 6)
    np.testing.assert_allclose(got[seen], albedo[seen], atol=0.65 / 4)
    # The unseen faces carry colours grown from the seen ones: within the two colours' range, not one colour.
    assert np.all((got[unseen] >= albedo.min(0) - 0.65 / 4) & (got[unseen] <= albedo.max(0) + 0.65 / 4))
    assert len(np.unique(np.round(got[unseen], 4), axis=0)) > 3
