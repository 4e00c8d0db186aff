"""Interpolation-based rasterization (DIB-R: Chen, Gao, Ling, Smith, Lehtinen, Jacobson, Fidler, "Learning to
Predict 3D Objects with an Interpolation-based Differentiable Renderer", NeurIPS 2019), the
`RenderSettings(coverage="dibr")` model of the rasterizer, beside SoftRas (`aggregate.py`).

Per pixel p, over the same candidate faces and face columns as SoftRas (`aggregate.FACE_COLUMNS`):
- Covered pixels (p inside or on the edge of at least one valid face): the front face is the covering face of smallest
  perspective-correct depth z (a hard z-buffer: the choice carries no gradient). The colour is that
  face's attributes interpolated exactly: face colour, sum_i bp_i C_i for vertex colours, or the texture
  at sum_i bp_i uv_i times the face's light factor, with bp the perspective-correct barycentrics of p.
  Alpha is 1. The gradient reaches the colours and, through bp, the vertices.
- Other pixels show the background colour; their alpha is DIB-R's soft silhouette
  A = 1 - prod_j (1 - exp(-d_j^2 / sigma)) over the faces within the cutoff (d_j: distance from p to face
  j, the same sigma as SoftRas's), so the silhouette's gradient reaches the vertices from outside.

So, unlike SoftRas, a covered pixel's colour is exactly a rasterizer's, at any sigma; the geometry learns
from the alpha channel (silhouettes) and from the interpolation inside faces, not from colours blurred
across edges. Differentiated by JAX's autodiff, recomputed in the backward pass (`jax.checkpoint`)
instead of keeping its [pixels, faces] intermediates.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from gradsim_jax.render.aggregate import (KernelConfig, PairDepth, find_pairs, pair_colors, pair_columns, pair_depth,
                                          pair_rows)

#: 1 - exp(-d^2 / sigma) is floored here before its log: only a pixel centre exactly on an outside edge
#: (d = 0 without being inside) reaches it; its alpha is then 1 to float precision.
_TRANSMIT_FLOOR = 1e-30


def _dibr(config: KernelConfig, px, py, face_table, face_colors, texture_image, pair_index, mask, background,
          near, far):
    del near, far  # the depth test needs no range
    table = pair_rows(face_table, pair_index)
    color_table = pair_rows(face_colors, pair_index)
    cols = pair_columns(table)
    pairs = find_pairs(px, py, cols, mask, config)
    # Closed faces (u >= 0), so that a pixel centre exactly on an edge two faces share is covered by both;
    # zero-area faces (all-zero planes, sum 0 instead of 1) cover nothing.
    u = pairs.u
    closed = (u[0] >= 0) & (u[1] >= 0) & (u[2] >= 0) & (u[0] + u[1] + u[2] > 0.5)
    covering = pairs.contributes & closed
    covered = jnp.any(covering, axis=-1)
    near_edge = pairs.contributes & ~closed
    # |s| = d^2 / sigma; exp(-|s|) is the face's DIB-R coverage D_j of an outside pixel.
    transmit = jnp.maximum(-jnp.expm1(-jnp.abs(pairs.s)), _TRANSMIT_FLOOR)
    log_transmit = jnp.sum(jnp.where(near_edge, jnp.log(transmit), 0.0), axis=-1)
    alpha = jnp.where(covered, 1.0, -jnp.expm1(log_transmit))
    if not config.with_color:
        return alpha
    depth = pair_depth(pairs, cols)
    # The front covering face of each pixel (no gradient through the choice); only its colour is computed.
    z = jax.lax.stop_gradient(jnp.where(covering, depth.z, jnp.inf))
    front = jnp.argmin(z, axis=-1)[..., None]  # [..., P, 1]

    def pick(a):
        return jnp.take_along_axis(jnp.broadcast_to(a, z.shape), front, axis=-1)

    # The colour reads only the perspective-correct barycentrics.
    front_depth = PairDepth(b=None, total=None, bary=[pick(b) for b in depth.bary], z=None)
    corner = jnp.broadcast_to(color_table, z.shape + color_table.shape[-1:])
    front_corner = jnp.take_along_axis(corner, front[..., None], axis=-2)  # [..., P, 1, C]
    face_rgb = pair_colors(config, front_corner, texture_image, front_depth)[..., 0, :]
    rgb = jnp.where(covered[..., None], face_rgb, background)
    return jnp.concatenate([rgb, alpha[..., None]], axis=-1)


@functools.partial(jax.checkpoint, static_argnums=(0,), prevent_cse=False)
def dibr_aggregate(config: KernelConfig, px, py, face_table, face_colors, texture_image, pair_index, mask,
                   background, near, far):
    """DIB-R's per-pixel image over candidate faces: the arguments and output of `aggregate.aggregate`
    (RGBA [..., P, 4], or alpha [..., P] without colour), any colour kind (face, vertex, texture).

    Args:
        config: the static `KernelConfig` (color kind, sigma, cutoff, gamma, background eps).
        px: [..., P, 1] screen x of each pixel (pixels scaled by 2 / H about the image centre, right).
        py: [..., P, 1] screen y of each pixel (up).
        face_table: [F, len(FACE_COLUMNS)] screen-space columns of every face (module docstring), or a
            tile's own rows [..., Kt, len(FACE_COLUMNS)] (`aggregate.pair_rows`; so for the other tables).
        face_colors: [F, C] colors per face: [F, 3] face colors, [F, 9] vertex colors (3 corners x rgb) or,
            for textures, 3 corners x uv then the face's light factor.
        texture_image: [Ht, Wt, 3] the texture (color kind "texture"), else None.
        pair_index: [..., P or 1, K] int, the candidate faces of each pixel (rows of `face_table`), or None.
        mask: [..., P or 1, K] bool, which candidates are selected.
        background: [3] RGB for every pixel, or [..., P, 3] one per pixel.
        near: the camera's near depth (unused: the depth test needs no range).
        far: the camera's far depth (unused).

    Returns:
        RGBA [..., P, 4], or alpha [..., P] when `config.with_color` is False.
    """
    return _dibr(config, px, py, face_table, face_colors, texture_image, pair_index, mask, background, near, far)
