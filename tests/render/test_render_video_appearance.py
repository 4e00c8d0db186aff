"""The albedo read off a video frame (`render.video_appearance`): a frame rendered from a known smooth per-vertex
albedo under known lights gives that albedo back; vertices off the mask take their seen neighbours' colours; face colours
become vertex colours exactly for parts of one colour."""

import jax.numpy as jnp
import numpy as np

from gradsim_jax.geometry.cloth import cloth_grid
from gradsim_jax.render import Lights, RenderSettings, look_at_camera, render
from gradsim_jax.render.camera import project_pixels
from gradsim_jax.render.shading import VertexColors
from gradsim_jax.render.video_appearance import ALBEDO_MIN, albedo_from_frame, vertex_colors_of_faces


def scene():
    topology, _, state = cloth_grid(12, 12, 0.05, 0.05, pos=(-0.3, 0.0, -0.3), rot=(0.7071068, 0.7071068, 0, 0)).build()
    x = np.asarray(state.particles.x)
    faces = np.asarray(topology.cloth.triangles)
    camera = look_at_camera(1.4, 40.0, 20.0, width=96, height=72)
    lights = Lights(ambient=jnp.asarray(0.35), directional=jnp.asarray(0.7), direction=jnp.asarray([0.3, 1.0, 0.4]))
    # A smooth albedo: linear in the cloth's two axes, inside (0.15, 0.85).
    t = (x - x.min(0)) / (x.max(0) - x.min(0) + 1e-9)
    albedo = np.stack([0.15 + 0.7 * t[:, 0], 0.15 + 0.7 * t[:, 2], 0.5 + 0.0 * t[:, 0]], -1).astype(np.float32)
    return x, faces, camera, lights, albedo


def test_a_rendered_frame_gives_its_albedo_back():
    x, faces, camera, lights, albedo = scene()
    frame = np.asarray(render(camera, jnp.asarray(x), jnp.asarray(faces), VertexColors(jnp.asarray(albedo)),
                              lights=lights, background=jnp.zeros(3), settings=RenderSettings(coverage="box")))
    read = np.ones(len(x), bool)
    got = albedo_from_frame(camera, x, faces, frame, lights, read, np.zeros_like(albedo))
    # Interior vertices: the footprint's Gaussian (half a vertex spacing) averages a linear field exactly but for
    # the shading's per-face steps (~5 % of a value here) and the pixels' sampling: a few hundredths.
    interior = (np.abs(x[:, 0] - x[:, 0].mean()) < 0.2) & (np.abs(x[:, 2] - x[:, 2].mean()) < 0.2)
    np.testing.assert_allclose(got[interior], albedo[interior], atol=0.04)
    # Edge and corner vertices average a one-sided footprint, which reads the field about a cell inwards
    # (0.7 / 12 per cell here): within two cells' change.
    np.testing.assert_allclose(got, albedo, atol=2 * 0.7 / 12)


def test_vertices_off_the_mask_take_their_neighbours_and_base_is_kept():
    x, faces, camera, lights, albedo = scene()
    frame = np.array(render(camera, jnp.asarray(x), jnp.asarray(faces), VertexColors(jnp.asarray(albedo)),
                            lights=lights, background=jnp.zeros(3), settings=RenderSettings(coverage="box")))
    frame[:, : frame.shape[1] // 2, 3] = 0.0  # the mask lost its left half
    read = np.ones(len(x), bool)
    read[:5] = False
    base = np.full_like(albedo, 0.25)
    got = albedo_from_frame(camera, x, faces, frame, lights, read, base)
    np.testing.assert_array_equal(got[:5], base[:5])
    assert np.all((got >= ALBEDO_MIN) & (got <= 1 - ALBEDO_MIN))
    # Vertices well inside the seen half read their own colour; the unseen take their seen neighbours' colours
    # grown outwards: nothing outside the seen values' range, and not one colour for all.
    uv = np.asarray(project_pixels(camera, jnp.asarray(x))[0])
    seen = read & (uv[:, 0] > frame.shape[1] // 2 + 8)
    unseen = read & (uv[:, 0] < frame.shape[1] // 2 - 8)
    np.testing.assert_allclose(got[seen], albedo[seen], atol=2 * 0.7 / 12)
    half = read & (uv[:, 0] > frame.shape[1] // 2)
    lo, hi = albedo[half].min(0) - 2 * 0.7 / 12, albedo[half].max(0) + 2 * 0.7 / 12
    assert np.all((got[unseen] >= lo) & (got[unseen] <= hi))
    assert len(np.unique(np.round(got[unseen], 4), axis=0)) > 3


def test_vertex_colors_of_faces():
    faces = np.array([[0, 1, 2], [1, 2, 3], [4, 5, 6]])
    rgb = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.4]])
    out = vertex_colors_of_faces(faces, rgb, 8)
    np.testing.assert_allclose(out[0], [1, 0, 0])
    np.testing.assert_allclose(out[1], [0.5, 0.5, 0])
    np.testing.assert_allclose(out[4:7], [[0.2, 0.3, 0.4]] * 3, rtol=1e-6)
    np.testing.assert_allclose(out[7], [0.5, 0.5, 0.5])  # in no face
