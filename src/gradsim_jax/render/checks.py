"""Checks of the renderer's traced inputs (inside `jit`, `grad`, `vmap`) through `jax.experimental.checkify`.

`render` checks concrete inputs on the host; inside a compiled function an out-of-range face index renders
a finite but wrong image and one NaN vertex spreads NaN over the image. The checks here name the first
bad entry: "faces[5] = [4, 7, 9] has an index out of range [0, 9)", "vertices[4, 1] = nan is not finite".
The functions mirror `gradsim_jax.physics.checks`: `render_checks` (inside checkify),
`validate_render_inputs` (an Error value), `checked_render` / `checked_render_video` (Error, output).
Check the Error on the host with `gradsim_jax.physics.checks.raise_if_error`.

The renderer runs outside the checkify transformation: it compiles as without checks, and the gradient
of a `checkify.checkify`d function that holds both checks and the rasterizer's custom VJP fails in JAX
0.10 (the backward pass receives mismatched residuals).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.experimental import checkify

from gradsim_jax.physics.checks import check_indices, check_values
from gradsim_jax.render.rasterize import render, render_video
from gradsim_jax.render.shading import FaceColors, Texture, VertexColors


def render_checks(vertices, faces, colors=None, background=None, *, vertices_name: str = "vertices") -> None:
    """Add checkify checks: faces in [0, N), vertices finite, colours and background in [0, 1]. Call inside a
    `checkify.checkify`d function.

    Args:
        vertices: [..., N, 3] (the last two axes index vertex and coordinate), world units.
        faces: [F, 3] int, vertex indices of each triangle.
        colors: a `FaceColors`, `VertexColors`, `Texture`, an RGB array in [0, 1], or None.
        background: RGB in [0, 1] ([3] or per pixel), or None.
        vertices_name: what the messages call the vertices (e.g. "frames").
    """
    vertices = jnp.asarray(vertices)
    check_indices("faces", faces, vertices.shape[-2], distinct=False)
    check_values(vertices_name, vertices)
    if isinstance(colors, (FaceColors, VertexColors)):
        check_values("colors.rgb", colors.rgb, unit=True)
    elif isinstance(colors, Texture):
        check_values("colors.image", colors.image, unit=True)
        check_values("colors.uv", colors.uv)
    elif colors is not None:
        check_values("colors", colors, unit=True)
    if background is not None:
        check_values("background", background, unit=True)


def validate_render_inputs(vertices, faces, colors=None, background=None) -> checkify.Error:
    """`render_checks` as a value (a `checkify.Error`); traceable, no checkify needed around it.

    Args:
        vertices: [..., N, 3] world units, as `render_checks`.
        faces: [F, 3] int, vertex indices of each triangle.
        colors: as `render_checks`.
        background: as `render_checks`.

    Returns:
        The `checkify.Error` (check it with `physics.checks.raise_if_error`).
    """
    err, _ = checkify.checkify(render_checks, errors=checkify.user_checks)(vertices, faces, colors, background)
    return err


def checked_render(camera, vertices, faces, colors=None, **kwargs):
    """`render(camera, vertices, faces, colors, **kwargs)` with `render_checks`: (checkify.Error, image).
    Traceable (jit, grad with `has_aux`, vmap).

    Args:
        camera: the `Camera`.
        vertices: [N, 3] world units.
        faces: [F, 3] int, vertex indices of each triangle.
        colors: as `render` (None: its default).
        **kwargs: the other keyword arguments of `render` (its `background` is checked too).

    Returns:
        (checkify.Error, the image `render` returns).
    """
    err = validate_render_inputs(vertices, faces, colors, kwargs.get("background"))
    return err, render(camera, vertices, faces, colors, **kwargs)


def _video_checks(frames, faces, colors, background):
    render_checks(frames, faces, colors, background, vertices_name="frames")


def checked_render_video(camera, frames, faces, colors=None, **kwargs):
    """`render_video` with `render_checks` on all frames [T, N, 3]: (checkify.Error, video); a bad vertex is
    named "frames[t, i, k]".

    Args:
        camera: the `Camera`.
        frames: [T, N, 3] world units, the vertices of each frame.
        faces: [F, 3] int, vertex indices of each triangle.
        colors: as `render_video` (None: its default).
        **kwargs: the other keyword arguments of `render_video` (its `background` is checked too).

    Returns:
        (checkify.Error, the video `render_video` returns).
    """
    err, _ = checkify.checkify(_video_checks, errors=checkify.user_checks)(
        frames, faces, colors, kwargs.get("background"))
    return err, render_video(camera, frames, faces, colors, **kwargs)
