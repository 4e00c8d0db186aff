"""Soft rasterizer: known images, the sharp limit, depth order, tiling vs dense, gradients, video."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sheets import wavy_sheet as cloth

from gradsim_jax import compilation

from gradsim_jax.render import (
    FaceColors,
    Lights,
    RenderSettings,
    Texture,
    VertexColors,
    camera_from_eye,
    look_at_camera,
    render,
    render_dense,
    render_video,
    render_with_stats,
    silhouette,
    suggest_capacities,
)
from gradsim_jax.render.camera import with_image_size

SIZE = 24

# Most tests call the renderer through jit, as in a loss (a direct call compiles one program too, see
# test_a_direct_call_compiles_one_program_and_equals_the_jitted_render).
jit_render = jax.jit(render)
jit_silhouette = jax.jit(silhouette)
jit_render_with_stats = jax.jit(render_with_stats, static_argnames=("with_color",))
jit_render_dense = jax.jit(render_dense, static_argnames=("with_color",))


def square(half=0.5, z=0.0):
    """Two triangles spanning [-half, half]^2 in the plane z, normal -z (towards a camera at -z)."""
    v = np.array([[-half, -half, z], [half, -half, z], [half, half, z], [-half, half, z]], np.float32)
    f = np.array([[0, 2, 1], [0, 3, 2]], np.int32)
    return v, f


def random_mesh(seed, num_faces=12, spread=0.8):
    rng = np.random.default_rng(seed)
    v = rng.uniform(-spread, spread, (3 * num_faces, 3)).astype(np.float32)
    f = np.arange(3 * num_faces, dtype=np.int32).reshape(num_faces, 3)
    return v, f


def front_camera(size=SIZE, distance=2.5, **kw):
    return camera_from_eye(jnp.array([0.0, 0.0, -distance]), width=size, height=size, **kw)


# ------------------------------------------------------------------------------------------------
# Known images.
# ------------------------------------------------------------------------------------------------


def test_centered_square_covers_expected_pixels():
    size = 32
    # Screen half-extent 0.5: half / (distance tan(30 deg)) = 0.5.
    distance = 2.5
    half = 0.5 * distance * np.tan(np.deg2rad(30.0))
    v, f = square(half)
    image = jit_render(front_camera(size, distance), v, f, settings=RenderSettings())
    assert image.shape == (size, size, 4)
    covered = np.asarray(image[..., 3]) > 0.5
    assert covered.sum() == 16 * 16
    assert covered[8:24, 8:24].all()
    # Away from the diagonal shared by the two triangles (where SoftRas's product gives alpha < 1).
    np.testing.assert_allclose(image[9, 22], [1, 1, 1, 1], atol=1e-4)
    np.testing.assert_allclose(image[0, 0], [0, 0, 0, 0], atol=1e-6)


def test_fill_back_shows_a_face_seen_from_behind():
    v, f = square(0.4)
    facing = v, f
    away = v, f[:, ::-1].copy()
    cam = front_camera()
    cull = RenderSettings(fill_back=False)
    for verts, faces in (facing, away):
        assert float(jit_silhouette(cam, verts, faces).max()) > 0.99
    assert float(jit_silhouette(cam, *facing, settings=cull).max()) > 0.99
    assert float(jit_silhouette(cam, *away, settings=cull).max()) == 0.0
    # The normal of `facing` is -z, towards the camera at -z.
    normal = np.cross(v[f[0, 1]] - v[f[0, 0]], v[f[0, 2]] - v[f[0, 0]])
    assert normal[2] < 0


def test_faces_behind_the_camera_or_beyond_far_are_dropped():
    v, f = square(0.4, z=-3.0)  # behind the eye at z = -2.5
    assert float(jit_silhouette(front_camera(), v, f).max()) == 0.0
    v, f = square(0.4, z=200.0)
    assert float(jit_silhouette(front_camera(), v, f).max()) == 0.0


def test_nearer_face_dominates_color():
    near_v, _ = square(0.5, z=-0.3)
    far_v, _ = square(1.5, z=0.3)
    f = np.array([[0, 2, 1], [0, 3, 2], [4, 6, 5], [4, 7, 6]], np.int32)
    red, blue = [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]
    v = np.concatenate([near_v, far_v])
    for order in (slice(None), slice(None, None, -1)):
        colors = np.array([red, red, blue, blue], np.float32)
        faces, colors = f[order], colors[order]
        image = jit_render(front_camera(), v, faces, FaceColors(colors), settings=RenderSettings(gamma=1e-4))
        center = np.asarray(image[SIZE // 2, SIZE // 2])
        np.testing.assert_allclose(center[:3], red, atol=1e-3)
        # Beyond the near square's soft edge only the far one is seen.
        np.testing.assert_allclose(np.asarray(image[1, SIZE // 2, :3]), blue, atol=1e-3)


def test_background_color_and_transparent_alpha():
    v, f = square(0.2)
    image = jit_render(front_camera(), v, f, background=[0.2, 0.4, 0.6])
    np.testing.assert_allclose(image[0, 0], [0.2, 0.4, 0.6, 0.0], atol=1e-6)


def _np_project(eye, at, up, angle, v):
    z = (at - eye) / np.linalg.norm(at - eye)
    x = np.cross(z, up)  # a real camera's right: forward x up (not mirrored)
    x /= np.linalg.norm(x)
    y = np.cross(x, z)  # image up
    cam = (v - eye) @ np.stack([x, y, z]).T
    return cam[:, :2] / (cam[:, 2:3] * np.tan(np.deg2rad(angle))), cam[:, 2]


def _segment_distance(p, a, b):
    e = b - a
    t = np.clip(((p - a) @ e) / max(e @ e, 1e-30), 0.0, 1.0)
    return np.linalg.norm(p - a - t[:, None] * e, axis=-1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sharp_limit_matches_exact_inside_test(seed):
    size = 32
    v, f = random_mesh(seed, num_faces=8)
    eye = np.array([0.3, 0.4, -3.0])
    cam = camera_from_eye(jnp.asarray(eye, jnp.float32), width=size, height=size)
    settings = RenderSettings(sigma=1e-9, tile_size=8, tile_capacity=8)
    alpha = np.asarray(jit_silhouette(cam, v, f, settings=settings))

    xy, _ = _np_project(eye, np.zeros(3), np.array([0.0, 1.0, 0.0]), 30.0, v.astype(np.float64))
    centers = np.stack(np.meshgrid((2 * np.arange(size) + 1 - size) / size, (size - 2 * np.arange(size) - 1) / size), -1)
    p = centers.reshape(-1, 2)
    inside = np.zeros(len(p), bool)
    near_edge = np.zeros(len(p), bool)
    pixel = 2.0 / size
    for tri in xy[f]:
        signs = []
        for k in range(3):
            a, b = tri[k], tri[(k + 1) % 3]
            e = b - a
            signs.append(e[0] * (p[:, 1] - a[1]) - e[1] * (p[:, 0] - a[0]))
            near_edge |= _segment_distance(p, a, b) < pixel
        signs = np.stack(signs)
        inside |= np.all(signs > 0, axis=0) | np.all(signs < 0, axis=0)
    expected = inside.reshape(size, size).astype(np.float32)
    keep = ~near_edge.reshape(size, size)
    assert keep.sum() > size * size // 2
    assert inside.reshape(size, size)[keep].any()
    np.testing.assert_allclose(alpha[keep], expected[keep], atol=1e-6)


def test_lights_direction_is_honoured():
    v, f = square(0.4)  # normal -z, towards the camera
    cam = front_camera()
    albedo = FaceColors(jnp.full((2, 3), 0.8))

    def center(direction):
        lights = Lights(ambient=jnp.asarray(0.25), directional=jnp.asarray(0.5), direction=jnp.asarray(direction))
        return np.asarray(jit_render(cam, v, f, albedo, lights=lights)[SIZE // 2, SIZE // 2, :3])

    np.testing.assert_allclose(center([0.0, 0.0, -1.0]), 0.8 * (0.25 + 0.5), atol=1e-4)
    np.testing.assert_allclose(center([0.0, 1.0, 0.0]), 0.8 * 0.25, atol=1e-4)
    cos60 = 0.5
    np.testing.assert_allclose(center([0.0, np.sqrt(3.0), -1.0]), 0.8 * (0.25 + 0.5 * cos60), atol=1e-4)


def test_vertex_colors_and_texture_agree_with_face_colors_when_constant():
    v, f = cloth()
    cam = front_camera()
    rgb = np.array([0.2, 0.5, 0.9], np.float32)
    by_face = jit_render(cam, v, f, FaceColors(np.tile(rgb, (len(f), 1))))
    by_vertex = jit_render(cam, v, f, VertexColors(np.tile(rgb, (len(v), 1))))
    texture = Texture(np.tile(rgb, (4, 4, 1)), np.random.default_rng(0).uniform(0, 1, (len(v), 2)).astype(np.float32))
    by_texture = jit_render(cam, v, f, texture)
    np.testing.assert_allclose(by_vertex, by_face, atol=1e-5)
    np.testing.assert_allclose(by_texture, by_face, atol=1e-5)


def test_vertex_colors_interpolate():
    v, f = square(1.0)
    colors = np.array([[0, 0, 0], [1, 0, 0], [1, 0, 0], [0, 0, 0]], np.float32)  # red grows with x
    image = np.asarray(jit_render(front_camera(), v, f, VertexColors(colors)))
    row = image[SIZE // 2, :, 0][image[SIZE // 2, :, 3] > 0.5]
    assert len(row) > 10
    # The camera is on -z looking along +z: world +x is on the image's left.
    assert np.all(np.diff(row) < 0)
    assert row[0] > 0.9 and row[-1] < 0.1


def test_supersampling_averages_a_double_size_render():
    v, f = cloth()
    cam = front_camera(16)
    fine = jit_render(with_image_size(cam, 32, 32), v, f, settings=RenderSettings(sigma=RenderSettings().sigma_for(16)))
    image = jit_render(cam, v, f, settings=RenderSettings(supersample=2))
    assert image.shape == (16, 16, 4)
    np.testing.assert_allclose(image, fine.reshape(16, 2, 16, 2, 4).mean((1, 3)), atol=1e-5)


def test_non_square_image():
    v, f = square(0.4)
    cam = camera_from_eye(jnp.array([0.0, 0.0, -2.5]), width=32, height=16)
    image = np.asarray(jit_render(cam, v, f))
    assert image.shape == (16, 32, 4)
    covered = image[..., 3] > 0.5
    rows, cols = np.nonzero(covered)
    # Square pixels: the square covers as many rows as columns, centered.
    assert rows.max() - rows.min() == cols.max() - cols.min()
    assert rows.min() + rows.max() == 15 and cols.min() + cols.max() == 31


# ------------------------------------------------------------------------------------------------
# Tiling.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings",
    [
        RenderSettings(gamma=1e-3, tile_size=4, tile_capacity=16, pixel_capacity=16),  # one list per tile
        # Lists per pixel, 2 tiles per chunk: the loop over chunks, skipping empty ones.
        RenderSettings(gamma=1e-3, tile_size=8, tile_capacity=32, pixel_capacity=8, pairs_per_chunk=1024),
    ],
)
def test_tiled_render_equals_dense_reference(settings):
    """Images and their gradients (hand-written VJP vs autodiff of the dense reference)."""
    with jax.enable_x64(True):
        v, f = random_mesh(3, num_faces=10)
        v = jnp.asarray(v, jnp.float64)
        cam = camera_from_eye(jnp.array([0.2, -0.3, -3.0]), width=20, height=18)
        colors = VertexColors(np.random.default_rng(1).uniform(0, 1, (len(v), 3)))
        weights = _weights((18, 20, 4))

        def tiled(verts):
            image, stats = render_with_stats(cam, verts, f, colors, settings=settings, background=[0.1, 0.2, 0.3])
            return jnp.sum(weights * image), (image, stats.overflow)

        def dense(verts):
            image = render_dense(cam, verts, f, colors, settings=settings, background=[0.1, 0.2, 0.3])
            return jnp.sum(weights * image), image

        (_, (image, overflow)), grad = jax.jit(jax.value_and_grad(tiled, has_aux=True))(v)
        (_, dense_image), dense_grad = jax.jit(jax.value_and_grad(dense, has_aux=True))(v)
        assert int(overflow) == 0
        assert image.dtype == jnp.float64
        np.testing.assert_allclose(image, dense_image, atol=1e-9)
        np.testing.assert_allclose(grad, dense_grad, rtol=1e-7, atol=1e-9)
        assert float(jnp.abs(grad).max()) > 0

        # autodiff=True: the same image, and forward mode works: <weights, J t> equals the VJP's <grad, t>
        def forward(verts):
            return render_with_stats(cam, verts, f, colors, settings=settings, background=[0.1, 0.2, 0.3],
                                     autodiff=True)[0]

        t = jnp.asarray(np.random.default_rng(4).normal(size=v.shape))
        same, tangent = jax.jit(lambda x: jax.jvp(forward, (x,), (t,)))(v)
        np.testing.assert_allclose(same, image, atol=1e-12)
        np.testing.assert_allclose(float(jnp.sum(weights * tangent)), float(jnp.sum(grad * t)), rtol=1e-7, atol=1e-9)


def test_overflow_is_reported_and_suggested_capacities_remove_it():
    v, f = random_mesh(4, num_faces=30, spread=0.5)
    cam = front_camera()
    settings = RenderSettings(tile_size=8, tile_capacity=4, pixel_capacity=2)
    _, stats = jit_render_with_stats(cam, v, f, settings=settings)
    assert int(stats.tile_overflow) > 0 and int(stats.pixel_overflow) > 0
    assert int(stats.max_faces_per_tile) > 4
    needed = suggest_capacities(cam, v, f, settings=settings)
    assert needed.tile_capacity >= int(stats.max_faces_per_tile) and needed.tile_capacity % 8 == 0
    image, stats = jit_render_with_stats(cam, v, f, settings=needed)
    assert int(stats.overflow) == 0
    assert int(stats.max_faces_per_pixel) <= needed.pixel_capacity
    np.testing.assert_allclose(image, jit_render_dense(cam, v, f), atol=2e-3)


# ------------------------------------------------------------------------------------------------
# Gradients.
# ------------------------------------------------------------------------------------------------


def _directional_check(value_and_grad, x, seed=0, eps=1e-6, rtol=1e-4, atol=1e-8):
    """Central finite difference of a scalar loss along random directions vs its gradient.

    `value_and_grad` is one jitted program: the differences use its values, so no second program
    (the loss alone) is compiled."""
    _, grad = value_and_grad(x)
    leaves_g, _ = jax.tree_util.tree_flatten(grad)
    leaves_x, treedef = jax.tree_util.tree_flatten(x)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        direction = [jnp.asarray(rng.normal(size=np.shape(leaf))) for leaf in leaves_x]
        plus = treedef.unflatten([a + eps * d for a, d in zip(leaves_x, direction)])
        minus = treedef.unflatten([a - eps * d for a, d in zip(leaves_x, direction)])
        fd = (value_and_grad(plus)[0] - value_and_grad(minus)[0]) / (2 * eps)
        analytic = sum(jnp.sum(g * d) for g, d in zip(leaves_g, direction))
        assert np.isfinite(float(analytic))
        np.testing.assert_allclose(float(analytic), float(fd), rtol=rtol, atol=atol)


def _weights(shape, seed=5):
    return jnp.asarray(np.random.default_rng(seed).uniform(-1, 1, shape))


def test_gradients_match_dense_autodiff_and_finite_differences():
    """One loss touching vertices, face and vertex colors, background, lights and every camera float:
    the hand-written VJP of the tiled renderer must equal autodiff of the dense reference and finite
    differences."""
    with jax.enable_x64(True):
        v, f = cloth()
        rng = np.random.default_rng(2)
        settings = RenderSettings(gamma=1e-2, tile_size=4, tile_capacity=32)
        weights = _weights((3, SIZE, SIZE, 4))
        params = {
            "vertices": jnp.asarray(v, jnp.float64),
            "face_rgb": jnp.asarray(rng.uniform(0, 1, (len(f), 3))),
            "vertex_rgb": jnp.asarray(rng.uniform(0, 1, (len(v), 3))),
            "background": jnp.asarray([0.1, 0.5, 0.9]),
            "light_direction": jnp.asarray([0.3, 1.0, -0.5]),
            # distance, elevation, azimuth, view angle, near, far
            "camera": jnp.asarray([2.2, 15.0, 20.0, 28.0, 0.5, 10.0]),
        }

        def loss(renderer, p):
            c = p["camera"]
            cam = look_at_camera(c[0], c[1], c[2], view_angle=c[3], width=SIZE, height=SIZE)
            cam = dataclasses.replace(cam, near=c[4], far=c[5])
            lights = Lights(jnp.asarray(0.4), jnp.asarray(0.6), p["light_direction"])
            verts = p["vertices"]
            by_face = renderer(
                cam, verts, f, FaceColors(p["face_rgb"]), lights=lights, background=p["background"], settings=settings
            )
            by_vertex = renderer(cam, verts, f, VertexColors(p["vertex_rgb"]), settings=settings)
            alpha = renderer(cam, verts, f, settings=settings, with_color=False)
            return jnp.sum(weights[0] * by_face) + jnp.sum(weights[1] * by_vertex) + jnp.sum(weights[2, ..., 0] * alpha)

        overflow = []

        def tiled(*a, **k):
            image, stats = render_with_stats(*a, **k)
            overflow.append(stats.overflow)
            return image

        def tiled_loss(p):
            overflow.clear()
            return loss(tiled, p), sum(overflow)

        tiled_value_and_grad = jax.jit(jax.value_and_grad(tiled_loss, has_aux=True))
        (_, dropped), g_tiled = tiled_value_and_grad(params)
        assert int(dropped) == 0  # the tiled renders are exact
        g_dense = jax.jit(jax.grad(lambda p: loss(render_dense, p)))(params)
        for name in params:
            np.testing.assert_allclose(g_tiled[name], g_dense[name], rtol=1e-7, atol=1e-9, err_msg=name)
            assert float(jnp.abs(g_tiled[name]).max()) > 0, name

        def value_and_grad(p):
            (value, _), grad = tiled_value_and_grad(p)
            return value, grad

        _directional_check(value_and_grad, params)


def test_texture_finite_differences():
    with jax.enable_x64(True):
        v, f = cloth()
        v = jnp.asarray(v, jnp.float64)
        # Jittered so that no vertex sits on a texel center, where bilinear lookup has a kink.
        uv = (v[:, :2] - v[:, :2].min(0)) / np.ptp(np.asarray(v[:, :2]), 0)
        uv = jnp.asarray(0.05 + 0.9 * uv + np.random.default_rng(3).uniform(-0.02, 0.02, uv.shape))
        texture = jnp.asarray(np.random.default_rng(4).uniform(0, 1, (5, 7, 3)))
        settings = RenderSettings(gamma=1e-2, tile_size=4, tile_capacity=32)
        weights = _weights((SIZE, SIZE, 4))
        cam = look_at_camera(2.2, 15.0, 20.0, width=SIZE, height=SIZE, dtype=jnp.float64)

        def loss(p):
            return jnp.sum(weights * render(cam, p[0], f, Texture(p[1], p[2]), settings=settings))

        # Through the library's own compile path (the options every fit compiles with): XLA's CPU backend with
        # its fusion emitters off got this gradient 17 % wrong (`compilation.WRONG_GRADIENT_OPTIONS`).
        _directional_check(compilation.jit(jax.value_and_grad(loss)), (v, texture, uv))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_gradients_finite_for_degenerate_geometry(dtype):
    with jax.enable_x64(dtype == jnp.float64):
        size = 16
        cam = front_camera(size)
        # A normal face, a zero-area face (repeated vertex), a collinear face, an edge-on face (its plane
        # contains the eye), a face behind the camera, one straddling the near plane, and a face whose edge
        # passes through the pixel centers of column 8 (screen x = 1/16).
        pixel_x = 1.0 / size * 2.5 * np.tan(np.deg2rad(30.0))
        v = np.array(
            [
                [-0.3, -0.3, 0.0], [0.3, -0.3, 0.0], [0.0, 0.3, 0.0],
                [0.1, 0.1, 0.0], [0.1, 0.1, 0.0], [0.4, 0.2, 0.0],
                [-0.4, 0.0, 0.0], [0.0, 0.0, 0.0], [0.4, 0.0, 0.0],
                [0.0, -0.4, -1.0], [0.0, -0.4, 1.0], [0.0, 0.4, 0.5],
                [0.1, 0.1, -4.0], [0.3, 0.1, -4.0], [0.2, 0.3, -4.0],
                [0.1, 0.1, -2.0], [0.3, 0.1, -3.0], [0.2, 0.3, 0.0],
                [pixel_x, -0.5, 0.0], [pixel_x, 0.5, 0.0], [0.5, 0.0, 0.0],
            ],
            dtype,
        )
        f = np.arange(len(v), dtype=np.int32).reshape(-1, 3)
        rgb = jnp.asarray(np.random.default_rng(0).uniform(0, 1, (len(f), 3)), dtype)
        lights = Lights(jnp.asarray(0.5, dtype), jnp.asarray(0.5, dtype), jnp.asarray([0.0, 0.0, -1.0], dtype))
        # Default blur, and (float32 only, the harder case) an almost sharp one.
        sharp = RenderSettings(sigma=1e-12, gamma=1e-6, tile_size=4, tile_capacity=8, pixel_capacity=4)
        blurred = RenderSettings(tile_size=4, tile_capacity=8, pixel_capacity=4)
        for settings in [blurred] + [sharp] * (dtype == jnp.float32):

            def loss(verts, rgb):
                image = render(cam, verts, f, FaceColors(rgb), lights=lights, settings=settings)
                return jnp.sum(image * jnp.arange(1, 5, dtype=dtype))

            value, grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(jnp.asarray(v), rgb)
            assert np.isfinite(float(value))
            for g in grads:
                assert g.dtype == dtype
                assert np.all(np.isfinite(np.asarray(g)))
            assert float(jnp.abs(grads[0]).max()) > 0


# ------------------------------------------------------------------------------------------------
# jit, vmap and video.
# ------------------------------------------------------------------------------------------------


def test_render_video_equals_loop_and_vmap():
    v, f = cloth()
    cam = front_camera(16)
    frames = jnp.stack([jnp.asarray(v) + jnp.array([0.05 * t, 0.0, 0.02 * t]) for t in range(4)])
    colors = FaceColors(jnp.asarray(np.random.default_rng(0).uniform(0, 1, (len(f), 3)), jnp.float32))
    video = jax.jit(lambda fr: render_video(cam, fr, f, colors))(frames)
    loop = jnp.stack([jit_render(cam, frame, f, colors) for frame in frames])
    batched = jax.jit(jax.vmap(lambda fr: jit_render(cam, fr, f, colors)))(frames)
    assert video.shape == (4, 16, 16, 4)
    # float32 depth rounding, amplified by 1/gamma in the color softmax, differs between programs.
    np.testing.assert_allclose(video, loop, atol=2e-3)
    np.testing.assert_allclose(batched, loop, atol=2e-3)
    np.testing.assert_allclose(video[..., 3], loop[..., 3], atol=1e-5)


def test_video_gradient_and_no_recompilation_for_new_vertices():
    v, f = cloth()
    cam = front_camera(16)
    frames = jnp.stack([jnp.asarray(v) * (1.0 + 0.05 * t) for t in range(3)])
    target = jax.jit(lambda fr: render_video(cam, fr, f))(frames * 1.02)
    traces = []

    @jax.jit
    def loss_and_grad(fr):
        traces.append(1)
        return jax.value_and_grad(lambda x: jnp.mean((render_video(cam, x, f) - target) ** 2))(fr)

    value, grad = loss_and_grad(frames)
    value2, grad2 = loss_and_grad(frames + 0.01)
    assert len(traces) == 1
    assert np.isfinite(float(value)) and float(value) > 0
    assert np.all(np.isfinite(np.asarray(grad))) and float(jnp.abs(grad).max()) > 0
    assert float(value2) != float(value)


def test_bad_inputs_are_rejected_before_compiling():
    v, f = square()
    cam = front_camera()
    with pytest.raises(ValueError, match=r"faces\[0\] = \[0, 1, 7\] has an index out of range \[0, 4\)"):
        render(cam, v, np.array([[0, 1, 7]], np.int32))
    with pytest.raises(ValueError, match=r"vertices\[1, 0\] = nan is not finite"):
        render(cam, np.where(np.arange(4)[:, None] == 1, np.nan, v), f)
    with pytest.raises(ValueError, match=r"\[N, 3\]"):
        render(cam, v[:, :2], f)
    with pytest.raises(TypeError):
        render(cam, v, f.astype(np.float32))
    with pytest.raises(ValueError, match="FaceColors"):
        render(cam, v, f, FaceColors(np.ones((3, 3), np.float32)))
    with pytest.raises(ValueError):
        RenderSettings(supersample=3)


def test_a_direct_call_compiles_one_program_and_equals_the_jitted_render():
    # Called outside jit, the renderers run as one compiled program, not op by op (about 200 programs).
    v, f = cloth(5, 3)
    cam = front_camera(20)
    colors = FaceColors(jnp.asarray(np.random.default_rng(0).uniform(0, 1, (f.shape[0], 3)), jnp.float32))
    settings = RenderSettings(coverage="box", tile_size=4, pairs_per_chunk=512)  # several chunks: a loop
    compiles = []

    def listener(event, duration, **kwargs):
        if event.endswith("backend_compile_duration"):
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        image = render(cam, v, f, colors, settings=settings)
        dense = render_dense(cam, v, f, colors, settings=settings)
        counted = len(compiles)
        again = render(cam, v * 1.01, f, colors, settings=settings)
        assert len(compiles) == counted  # the same shapes: no new program
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert counted <= 12, counted
    jitted = jax.jit(render, static_argnames=("settings",))(cam, v, f, colors, settings=settings)
    np.testing.assert_allclose(np.asarray(image), np.asarray(jitted), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(image), np.asarray(dense), rtol=0, atol=1e-5)
    assert float(jnp.abs(again - image).max()) > 0


def test_empty_mesh_renders_background():
    cam = front_camera(8)
    image = jit_render(cam, np.zeros((0, 3), np.float32), np.zeros((0, 3), np.int32), background=[1.0, 0.0, 0.0])
    np.testing.assert_allclose(image[..., 0], 1.0)
    np.testing.assert_allclose(image[..., 3], 0.0)
