"""Surface colors and lighting for the soft rasterizer.

Three ways to color a mesh (all differentiable):
- `FaceColors(rgb [F, 3])`: one albedo per face.
- `VertexColors(rgb [N, 3])`: one albedo per vertex, interpolated with perspective-correct barycentrics.
- `Texture(image [Ht, Wt, 3], uv [N, 2] or [F, 3, 2])`: an image sampled bilinearly at interpolated uv.
  u runs left to right over the texture's columns, v bottom to top (v = 0 is the last row, the OpenGL
  convention); texel centers sit at ((i + 0.5) / Wt, 1 - (j + 0.5) / Ht) and lookups clamp at the border.

Lighting is flat (per face), as in SoftRas (Liu et al. 2019):
  C_j = albedo_j * (ambient + directional * max(0, n_j . l)),
with n_j the unit face normal turned towards the camera (so a face seen from behind is lit like its front)
and l the unit `direction` from the surface towards the light, in world space. The direction is honoured
(gradSim's SoftRas wrapper ignored it). `ambient` and `directional` are scalars or RGB [3].
`lights=None` means unlit: colors appear exactly as given.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from gradsim_jax.mathutil import safe_normalize

Array = Any


def _pytree(cls):
    cls = dataclasses.dataclass(frozen=True)(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    return jax.tree_util.register_dataclass(cls, data_fields=names, meta_fields=[])


@_pytree
class FaceColors:
    """Per-face albedo `rgb: [F, 3]`."""

    rgb: Array


@_pytree
class VertexColors:
    """Per-vertex albedo `rgb: [N, 3]`, interpolated across faces."""

    rgb: Array


@_pytree
class Texture:
    """Texture `image: [Ht, Wt, 3]` with `uv: [N, 2]` per vertex or `[F, 3, 2]` per face corner."""

    image: Array
    uv: Array


@_pytree
class Lights:
    """Ambient + one directional light.

    `ambient`, `directional`: intensities (scalar or RGB [3]); `direction: [3]` from the surface towards
    the light, world space (normalized on use).
    """

    ambient: Array
    directional: Array
    direction: Array


def default_lights(dtype=jnp.float32) -> Lights:
    """SoftRas's default lights: ambient 0.5, directional 0.5 from above (0, 1, 0).

    Args:
        dtype: the dtype of the lights' arrays.

    Returns:
        `Lights`.
    """
    return Lights(
        ambient=jnp.asarray(0.5, dtype),
        directional=jnp.asarray(0.5, dtype),
        direction=jnp.asarray([0.0, 1.0, 0.0], dtype),
    )


def face_normals(face_vertices):
    """Unit normals [F, 3] of faces given as [F, 3, 3] vertex positions (right-hand rule on the order).

    Zero-area faces get a zero normal (finite gradient), so they receive ambient light only.

    Args:
        face_vertices: [F, 3, 3] world positions of each face's three vertices.

    Returns:
        [F, 3] unit normals (zero for zero-area faces).
    """
    n = jnp.cross(face_vertices[:, 1] - face_vertices[:, 0], face_vertices[:, 2] - face_vertices[:, 0])
    return safe_normalize(n)


def face_light_factor(lights: Lights | None, face_vertices, eye):
    """Light intensity [F, 3] per face: ambient + directional * max(0, n . l), n turned to the eye.

    Args:
        lights: the `Lights`, or None (unlit: all ones).
        face_vertices: [F, 3, 3] world positions of each face's three vertices.
        eye: [3] the camera centre in world coordinates.

    Returns:
        [F, 3] RGB light factor per face (multiplies the albedo).
    """
    num_faces = face_vertices.shape[0]
    dtype = face_vertices.dtype
    if lights is None:
        return jnp.ones((num_faces, 3), dtype)
    n = face_normals(face_vertices)
    centroid = jnp.mean(face_vertices, axis=1)
    # The sign carries no gradient; it only picks the side of the face that the camera sees.
    facing = jnp.sign(jnp.sum(n * (eye - centroid), axis=-1, keepdims=True))
    n = n * jax.lax.stop_gradient(jnp.where(facing == 0, jnp.ones_like(facing), facing))
    l = safe_normalize(jnp.asarray(lights.direction, dtype))
    cos = jnp.maximum(jnp.sum(n * l, axis=-1, keepdims=True), 0.0)
    ambient = jnp.broadcast_to(jnp.asarray(lights.ambient, dtype), (3,))
    directional = jnp.broadcast_to(jnp.asarray(lights.directional, dtype), (3,))
    return ambient + directional * cos


def sample_bilinear(image, uv):
    """Bilinear lookup of `image [Ht, Wt, C]` at `uv [..., 2]` (convention in the module docstring).

    Args:
        image: [Ht, Wt, C] the texture.
        uv: [..., 2] texture coordinates in [0, 1] (u left to right, v bottom to top; clamped at the border).

    Returns:
        [..., C] the interpolated values.
    """
    ht, wt = image.shape[0], image.shape[1]
    x = uv[..., 0] * wt - 0.5
    y = (1.0 - uv[..., 1]) * ht - 0.5
    x = jnp.clip(x, 0.0, wt - 1.0)
    y = jnp.clip(y, 0.0, ht - 1.0)
    x0 = jnp.clip(jnp.floor(x), 0, max(wt - 2, 0))
    y0 = jnp.clip(jnp.floor(y), 0, max(ht - 2, 0))
    fx = (x - x0)[..., None]
    fy = (y - y0)[..., None]
    i0 = x0.astype(jnp.int32)
    j0 = y0.astype(jnp.int32)
    i1 = jnp.minimum(i0 + 1, wt - 1)
    j1 = jnp.minimum(j0 + 1, ht - 1)
    top = image[j0, i0] * (1 - fx) + image[j0, i1] * fx
    bottom = image[j1, i0] * (1 - fx) + image[j1, i1] * fx
    return top * (1 - fy) + bottom * fy
