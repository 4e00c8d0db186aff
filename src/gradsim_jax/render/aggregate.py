"""Per-pixel soft rasterization over candidate faces (SoftRas, Liu et al. 2019), with a hand-written VJP.

Shapes: pixels `px, py: [..., P, 1]` (screen coordinates); a per-face table `[F, D]` of screen-space
columns (`FACE_COLUMNS`) and colors `[F, C]`; the candidate faces of each pixel as indices `[..., P, K]`
into them with a selection mask `[..., P, K]` (a size-1 pixel axis, [..., 1, K], shares one face list
among all pixels: the dense reference). The tables may also be a tile's own rows, `[..., Kt, D]` and
`[..., Kt, C]`, with indices `[..., P, K]` into those Kt rows, or None when every pixel takes all Kt
(`pair_rows`). The kernel gathers the rows itself, so that its VJP can scatter the gradient straight back
into the faces. The background is one RGB `[3]` for all pixels or
one per pixel, `[..., P, 3]` (anything that broadcasts against the output's RGB); its cotangent has
the background's own shape (summed over the pixels that share a value). Output: RGBA `[..., P, 4]` or
alpha `[..., P]`.

Face columns: screen vertices v_k, edges e_k = v_{k+1} - v_k, il_k = 1 / |e_k|^2 (0 for a zero-length
edge); the screen barycentrics as planes u_i(p) = a_i p_x + b_i p_y + c_i (all 0 for a zero-area face);
iz_k = 1 / z_k (camera depth of each vertex); valid (1 or 0).

Per pixel p and face j (names as in the code):
  t_k = clip((p - v_k) . e_k il_k, 0, 1), r_k = p - v_k - t_k e_k, d2 = min_k |r_k|^2,
  inside = all(u_i > 0), s = (+-) d2 / sigma, contributes = valid and (inside or d2 < cutoff^2),
  alpha = 1 - exp(-sum_j softplus(s_j))                                   (= 1 - prod_j (1 - D_j)),
  b = clip(u, 0, 1) / sum (the centroid if all are 0), z = 1 / sum_i b_i iz_i, bp_i = b_i iz_i z
  (perspective-correct barycentrics), z_hat = (far - z) / (far - near),
  logit_j = log D_j + z_hat_j / gamma = s_j - softplus(s_j) + z_hat_j / gamma, background eps / gamma,
  rgb = softmax-weighted colors: face color C_j, sum_i bp_i C_ji (vertex colors) or a texture lookup,
  and the background color of pixel p (the constant one, or p's entry of a per-pixel background).

Why a hand-written VJP: reverse-mode autodiff of this elementwise math makes XLA on CPU materialize
dozens of [..., P, K] residuals and reductions; the gradient took ~10x the forward (3x with this rule).
The rule keeps only per-pixel results (alpha, rgb, the softmax maximum and normalizer) and the selection
indices, and recomputes the per-pair terms. It returns per pair only the cotangents of the 9 vertex
columns (v, iz) and the colors, and scatters them into the faces once: XLA on CPU recomputes the shared
per-pair arithmetic for every output, so few outputs matter more than few flops. The derived columns
(e, il, planes) get a zero cotangent because the rule differentiates through them: the point-to-segment
distance is stationary in the clamp parameter t where t is not clamped (so t is held constant, and
d2 = |p - v_k - t e_k|^2 moves with v_k by -2 (1 - t) r and with v_{k+1} by -2 t r), and a barycentric
coordinate moves with the vertices as d u_i / d v_j = -u_j (a_i, b_i). Texture colors are differentiated by autodiff
(`aggregate_autodiff`, the same forward); tests compare the two rules.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.render.appearance import appearance

FACE_COLUMNS = (
    "v0x v0y v1x v1y v2x v2y e0x e0y e1x e1y e2x e2y il0 il1 il2 a0 b0 c0 a1 b1 c1 a2 b2 c2 iz0 iz1 iz2 valid"
).split()


class KernelConfig(NamedTuple):
    """Static settings of the per-pixel math (hashable)."""

    # The name of the colours' appearance model (`appearance.py`), which tabulates the colour columns and
    # colours each pair: "face" ([K, 3] colors), "vertex" ([K, 9]: 3 corners x rgb) or "texture" ([K, 9]:
    # 3 corners x uv, then the face's light factor); "texture" is only supported by `aggregate_autodiff`.
    color_kind: str
    with_color: bool  # False: alpha only
    sigma: float
    cutoff_sq: float
    gamma: float
    background_eps: float

#: A table row that contributes nothing and keeps the kernels' arithmetic finite: not valid, 1 / z = 1 at every
#: corner (as `tiling.screen_faces` writes a dropped face), all else 0. It fills a tile's slots without a face.
EMPTY_ROW = np.array([1.0 if name in ("iz0", "iz1", "iz2") else 0.0 for name in FACE_COLUMNS], np.float32)


def pair_rows(table, index):
    """The table rows of each pixel-face pair, [..., P or 1, K, D].

    Three forms: `table` [F, D] with `index` [..., P or 1, K] into its rows (a gather); a tile's own rows
    [..., Kt, D] with `index` [..., P, K] into them, selected by a one-hot product (matrix units, exact at the
    highest precision; gathers are slow on a TPU, `RenderSettings.one_hot_rows`; the rows must be finite, as
    0 times inf is NaN); or those with `index` None, every pixel taking all Kt rows ([..., 1, Kt, D]).

    Args:
        table: [F, D] or [..., Kt, D].
        index: int indices as above, or None.

    Returns:
        [..., P or 1, K, D].
    """
    if index is None:
        return table[..., None, :, :]
    if table.ndim == 2:
        return table[index]
    hot = jax.nn.one_hot(index, table.shape[-2], dtype=table.dtype)
    return jnp.einsum("...pkt,...td->...pkd", hot, table, precision=jax.lax.Precision.HIGHEST)


def add_pair_rows(rows: tuple, index, per_pair):
    """The transpose of `pair_rows`: per-pair rows [..., P, K, D] summed into the table's rows.

    Args:
        rows: the table's shape without its last axis: (F,) or (..., Kt).
        index: as given to `pair_rows` (None: each of the Kt rows sums over the pixels).
        per_pair: [..., P, K, D] cotangents of the pairs' rows.

    Returns:
        [F, D] (a scatter-add) or [..., Kt, D] (a one-hot product).
    """
    if index is None:
        return jnp.sum(per_pair, axis=-3)
    index = jnp.broadcast_to(index, per_pair.shape[:-1])
    if len(rows) == 1:
        return jnp.zeros((rows[0], per_pair.shape[-1]), per_pair.dtype).at[index].add(per_pair)
    hot = jax.nn.one_hot(index, rows[-1], dtype=per_pair.dtype)
    return jnp.einsum("...pkt,...pkd->...td", hot, per_pair, precision=jax.lax.Precision.HIGHEST)


def pair_columns(table):
    """Face columns: name -> [..., P or 1, K].

    Args:
        table: [..., P or 1, K, len(FACE_COLUMNS)] the face rows gathered for each pixel-face pair.

    Returns:
        dict {column name (`FACE_COLUMNS`): [..., P or 1, K]}.
    """
    return {name: table[..., i] for i, name in enumerate(FACE_COLUMNS)}


def _very_negative(dtype):
    return jnp.asarray(-1e30 if jnp.finfo(dtype).bits <= 32 else -1e300, dtype)


class Pairs(NamedTuple):
    """Per pixel-face terms, [..., P, K]."""

    u: list  # screen barycentrics (unclipped)
    nearest: list  # masks: edge k is the nearest one (first on ties)
    t: jax.Array  # clamp parameter on the nearest edge
    rx: jax.Array  # pixel minus the nearest point of the nearest edge
    ry: jax.Array
    inside: jax.Array
    s: jax.Array  # delta d^2 / sigma
    contributes: jax.Array
    softplus: jax.Array


def find_pairs(px, py, cols, mask, config: KernelConfig) -> Pairs:
    """The per pixel-face terms of the module docstring: nearest edge, inside test, s and coverage.

    Args:
        px: [..., P, 1] screen x of each pixel.
        py: [..., P, 1] screen y of each pixel.
        cols: the face columns of each pair (`pair_columns`), each [..., P or 1, K].
        mask: [..., P or 1, K] bool, which candidates are selected.
        config: the static `KernelConfig` (sigma, cutoff).

    Returns:
        `Pairs`, each term [..., P, K].
    """
    t, rx, ry, d2 = [], [], [], []
    for k in range(3):
        ex, ey = cols[f"e{k}x"], cols[f"e{k}y"]
        qx, qy = px - cols[f"v{k}x"], py - cols[f"v{k}y"]
        t.append(jnp.clip((qx * ex + qy * ey) * cols[f"il{k}"], 0.0, 1.0))
        rx.append(qx - t[k] * ex)
        ry.append(qy - t[k] * ey)
        d2.append(rx[k] * rx[k] + ry[k] * ry[k])
    nearest0 = (d2[0] <= d2[1]) & (d2[0] <= d2[2])
    nearest1 = ~nearest0 & (d2[1] <= d2[2])

    def pick(values):
        return jnp.where(nearest0, values[0], jnp.where(nearest1, values[1], values[2]))

    d2_min = jnp.minimum(jnp.minimum(d2[0], d2[1]), d2[2])
    u = [cols[f"a{i}"] * px + cols[f"b{i}"] * py + cols[f"c{i}"] for i in range(3)]
    inside = (u[0] > 0) & (u[1] > 0) & (u[2] > 0)
    s = jnp.where(inside, d2_min, -d2_min) * (1.0 / config.sigma)
    contributes = (cols["valid"] > 0) & mask & (inside | (d2_min < config.cutoff_sq))
    nearest = [nearest0, nearest1, ~nearest0 & ~nearest1]
    return Pairs(u, nearest, pick(t), pick(rx), pick(ry), inside, s, contributes, jax.nn.softplus(s))


class PairDepth(NamedTuple):
    b: list  # clipped, normalized screen barycentrics
    total: jax.Array  # their sum before normalizing
    bary: list  # perspective-correct barycentrics
    z: jax.Array


def pair_depth(pairs: Pairs, cols) -> PairDepth:
    """Clipped screen barycentrics, perspective-correct barycentrics and depth z of each pixel-face pair.

    Args:
        pairs: the pair terms (`find_pairs`).
        cols: the face columns of each pair (`pair_columns`), each [..., P or 1, K].

    Returns:
        `PairDepth`, each term [..., P, K]; z in world units along the view axis.
    """
    clipped = [jnp.clip(ui, 0.0, 1.0) for ui in pairs.u]
    total = clipped[0] + clipped[1] + clipped[2]
    # Zero-area faces have all-zero planes, so total 0: use the centroid.
    no_weight = total <= 0
    inv_total = jnp.where(no_weight, 0.0, 1.0 / jnp.where(no_weight, 1.0, total))
    third = jnp.asarray(1.0 / 3.0, total.dtype)
    b = [jnp.where(no_weight, third, ci * inv_total) for ci in clipped]
    w = [b[i] * cols[f"iz{i}"] for i in range(3)]
    # sum w >= 1/far > 0 for valid faces; invalid faces carry iz = 1.
    z = 1.0 / (w[0] + w[1] + w[2])
    return PairDepth(b, total, [wi * z for wi in w], z)


def _logits(pairs: Pairs, depth: PairDepth, near, far, config: KernelConfig):
    z_hat = (far - depth.z) / (far - near)
    log_coverage = pairs.s - pairs.softplus  # log sigmoid(s)
    return jnp.where(
        pairs.contributes, log_coverage + z_hat * (1.0 / config.gamma), _very_negative(pairs.s.dtype)
    )


def pair_colors(config: KernelConfig, color_table, texture_image, depth: PairDepth):
    """Color of each pixel-face pair [..., P or 1, K, 3].

    Args:
        config: the static `KernelConfig` (its `color_kind`: the appearance model).
        color_table: [..., P or 1, K, C], the pairs' faces' colour columns.
        texture_image: [Ht, Wt, 3] or None.
        depth: `pair_depth`'s barycentrics.

    Returns:
        [..., P or 1, K, 3] RGB.
    """
    # [..., P or 1, K, C] columns, as the appearance model (`appearance.py`) of `color_kind` tabulated them.
    return appearance(config.color_kind).pair_colors(color_table, texture_image, depth.bary)


def _forward(config: KernelConfig, px, py, face_table, face_colors, texture_image, pair_index, mask, background,
             near, far):
    """Outputs and the per-pixel values the backward pass needs."""
    table = pair_rows(face_table, pair_index)
    color_table = pair_rows(face_colors, pair_index)
    cols = pair_columns(table)
    pairs = find_pairs(px, py, cols, mask, config)
    # 1 - D = sigmoid(-s), so prod_j (1 - D_j) = exp(-sum_j softplus(s_j)).
    log_transmit = -jnp.sum(jnp.where(pairs.contributes, pairs.softplus, 0.0), axis=-1)
    alpha = 1.0 - jnp.exp(log_transmit)
    if not config.with_color:
        return alpha, (alpha,)
    depth = pair_depth(pairs, cols)
    logits = _logits(pairs, depth, near, far, config)
    dtype = pairs.s.dtype
    bg_logit = jnp.asarray(config.background_eps / config.gamma, dtype)
    top = jax.lax.stop_gradient(jnp.maximum(jnp.max(logits, axis=-1, keepdims=True), bg_logit))
    weights = jnp.exp(logits - top)  # [..., P, K]
    bg_weight = jnp.exp(bg_logit - top)  # [..., P, 1]
    normalizer = jnp.sum(weights, axis=-1, keepdims=True) + bg_weight
    pair_rgb = pair_colors(config, color_table, texture_image, depth)
    rgb = (jnp.sum(weights[..., None] * pair_rgb, axis=-2) + bg_weight * background) / normalizer
    out = jnp.concatenate([rgb, alpha[..., None]], axis=-1)
    return out, (alpha, rgb, top, normalizer)


def aggregate_autodiff(config: KernelConfig, px, py, face_table, face_colors, texture_image, pair_index, mask,
                       background, near, far):
    """The per-pixel soft rasterizer, differentiated by JAX's autodiff (reference; textures).

    Args:
        config: the static `KernelConfig`.
        px: [..., P, 1] screen units, pixel centres x.
        py: [..., P, 1] screen units, pixel centres y.
        face_table: [F, D] (or a tile's [..., Kt, D], `pair_rows`), rows of `FACE_COLUMNS`.
        face_colors: [F, C] (or [..., Kt, C]), the colour columns of the appearance model `config.color_kind`.
        texture_image: [Ht, Wt, 3] or None, the image that model samples.
        pair_index: [..., P or 1, K] int, each pixel's candidate faces (rows of the tables; `pair_rows`).
        mask: [..., P or 1, K] bool, their selection.
        background: RGB [3] or per pixel [..., P, 3].
        near: the camera's near plane depth.
        far: the camera's far plane depth.

    Returns:
        RGBA [..., P, 4], or alpha [..., P] without colour.
    """
    args = (px, py, face_table, face_colors, texture_image, pair_index, mask, background, near, far)
    return _forward(config, *args)[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def aggregate(config: KernelConfig, px, py, face_table, face_colors, texture_image, pair_index, mask, background,
              near, far):
    """The per-pixel soft rasterizer with the hand-written VJP (same values; face or vertex colors).

    The rule returns the whole derivative through the vertex columns (v, iz): the derived columns
    (e, il, planes) get a zero cotangent, so `face_table` must hold them as computed from its vertices.

    Args:
        config: the static `KernelConfig`.
        px: [..., P, 1] screen units, pixel centres x.
        py: [..., P, 1] screen units, pixel centres y.
        face_table: [F, D] (or a tile's [..., Kt, D], `pair_rows`), rows of `FACE_COLUMNS`.
        face_colors: [F, C] (or [..., Kt, C]), the colour columns of the appearance model `config.color_kind`.
        texture_image: [Ht, Wt, 3] or None, the image that model samples.
        pair_index: [..., P or 1, K] int, each pixel's candidate faces (rows of the tables; `pair_rows`).
        mask: [..., P or 1, K] bool, their selection.
        background: RGB [3] or per pixel [..., P, 3].
        near: the camera's near plane depth.
        far: the camera's far plane depth.

    Returns:
        RGBA [..., P, 4], or alpha [..., P] without colour.
    """
    args = (px, py, face_table, face_colors, texture_image, pair_index, mask, background, near, far)
    return _forward(config, *args)[0]


def _aggregate_fwd(config, *args):
    out, pixel_values = _forward(config, *args)
    return out, (*args, pixel_values)


def _sum_to_shape(x, shape):
    """Sum `x` over the axes along which an array of `shape` was broadcast to x's shape (the reverse
    of broadcasting): [..., P, 3] -> [3] sums over all pixels, -> [..., P, 3] keeps every pixel."""
    lead = x.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"cannot reduce shape {x.shape} to {shape}")
    if lead:
        x = jnp.sum(x, axis=tuple(range(lead)))
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    if ones:
        x = jnp.sum(x, axis=ones, keepdims=True)
    return x


def _aggregate_bwd(config: KernelConfig, residuals, g_out):
    px, py, face_table, face_colors, texture_image, pair_index, mask, background, near, far, pixel_values = residuals
    table = pair_rows(face_table, pair_index)
    color_table = pair_rows(face_colors, pair_index)
    cols = pair_columns(table)
    pairs = find_pairs(px, py, cols, mask, config)
    dtype = pairs.s.dtype
    zero = jnp.zeros((), dtype)
    one_minus_coverage = jnp.exp(-pairs.softplus)  # sigmoid(-s)
    coverage = 1.0 - one_minus_coverage
    alpha = pixel_values[0]
    g_alpha = g_out[..., 3] if config.with_color else g_out
    # d alpha / d s_j = prod_i (1 - D_i) D_j.
    g_s = jnp.where(pairs.contributes, ((1.0 - alpha) * g_alpha)[..., None] * coverage, zero)
    g_color_table = None
    g_background = jnp.zeros_like(background)
    g_near = jnp.zeros_like(near)
    g_far = jnp.zeros_like(far)
    plane_leaves, depth_leaves = [zero] * 3, [zero] * 3
    if config.with_color:
        _, rgb, top, normalizer = pixel_values
        g_rgb = g_out[..., :3]
        depth = pair_depth(pairs, cols)
        logits = _logits(pairs, depth, near, far, config)
        share = jnp.exp(logits - top) * (1.0 / normalizer)  # softmax weight of each pair, [..., P, K]
        bg_share = jnp.exp(config.background_eps / config.gamma - top) / normalizer  # [..., P, 1]
        g_background = _sum_to_shape(bg_share * g_rgb, background.shape).astype(background.dtype)
        pair_rgb = pair_colors(config, color_table, texture_image, depth)  # [..., P or 1, K, 3]
        g_rgb_dot_rgb = jnp.sum(g_rgb * rgb, axis=-1, keepdims=True)
        g_rgb_dot_pair = sum(g_rgb[..., None, c] * pair_rgb[..., c] for c in range(3))
        g_logit = share * (g_rgb_dot_pair - g_rgb_dot_rgb)
        g_s = g_s + g_logit * one_minus_coverage
        depth_range = far - near
        g_z_hat = g_logit * (1.0 / config.gamma)
        g_far = jnp.sum(g_z_hat * (depth.z - near)) / (depth_range * depth_range)
        g_near = jnp.sum(g_z_hat * (far - depth.z)) / (depth_range * depth_range)
        z = depth.z
        # bary_i = w_i z with w_i = b_i iz_i and z = 1 / sum w; g_z = -g_z_hat / (far - near).
        g_w_common = g_z_hat * z * z * (1.0 / depth_range)
        if not appearance(config.color_kind).per_corner:  # one colour per face
            g_color_table = share[..., None] * g_rgb[..., None, :]
            g_w = [g_w_common] * 3
        else:
            corner = color_table
            g_bary = [share * sum(g_rgb[..., None, c] * corner[..., 3 * i + c] for c in range(3)) for i in range(3)]
            g_bary_mean = sum(g_bary[i] * depth.bary[i] for i in range(3))
            g_w = [(g_bary[i] - g_bary_mean) * z + g_w_common for i in range(3)]
            g_color_table = jnp.concatenate(
                [(share * depth.bary[i])[..., None] * g_rgb[..., None, :] for i in range(3)], axis=-1
            )
        depth_leaves = [g_w[i] * depth.b[i] for i in range(3)]  # gradients of iz_i
        g_b = [g_w[i] * cols[f"iz{i}"] for i in range(3)]
        # b_i = clip(u_i) / total; the centroid branch (total 0) has no gradient.
        has_weight = depth.total > 0
        inv_total = jnp.where(has_weight, 1.0 / jnp.where(has_weight, depth.total, 1.0), zero)
        g_b_mean = sum(g_b[i] * depth.b[i] for i in range(3))
        plane_leaves = [
            jnp.where((pairs.u[i] > 0) & (pairs.u[i] < 1), (g_b[i] - g_b_mean) * inv_total, zero)
            for i in range(3)
        ]

    # d2 = |r|^2 on the nearest edge k, r = p - v_k - t e_k with t held fixed (see module docstring):
    # d d2 / d v_k = -2 (1 - t) r, d d2 / d v_{k+1} = -2 t r. The barycentric planes u_i follow the
    # vertices as d u_i / d v_j = -u_j (a_i, b_i) (p fixed; zero-area faces have zero planes).
    g_d2 = g_s * jnp.where(pairs.inside, 2.0, -2.0) * (1.0 / config.sigma)
    t, nearest = pairs.t, pairs.nearest
    g_rx, g_ry = g_d2 * pairs.rx, g_d2 * pairs.ry
    plane_x = sum(plane_leaves[i] * cols[f"a{i}"] for i in range(3))
    plane_y = sum(plane_leaves[i] * cols[f"b{i}"] for i in range(3))
    per_pair = []  # [..., P, K] cotangents of v0x v0y v1x v1y v2x v2y iz0 iz1 iz2, then the colors
    for j in range(3):
        edge = jnp.where(nearest[j], t - 1.0, jnp.where(nearest[j - 1], -t, zero))
        per_pair += [edge * g_rx - pairs.u[j] * plane_x, edge * g_ry - pairs.u[j] * plane_y]
    per_pair = [jnp.broadcast_to(g, t.shape) for g in per_pair + depth_leaves]
    per_pair = jnp.stack(per_pair, axis=-1)
    if g_color_table is not None:
        per_pair = jnp.concatenate([per_pair, jnp.broadcast_to(g_color_table, (*t.shape, color_table.shape[-1]))], -1)
    # One scatter-add of the per-pair rows into the faces (or the tile's rows).
    rows = face_table.shape[:-1]
    per_face = add_pair_rows(rows, pair_index, per_pair)
    g_face_table = jnp.concatenate(
        [per_face[..., :6], jnp.zeros((*rows, FACE_COLUMNS.index("iz0") - 6), dtype), per_face[..., 6:9],
         jnp.zeros((*rows, len(FACE_COLUMNS) - FACE_COLUMNS.index("iz2") - 1), dtype)],
        axis=-1,
    )
    g_face_colors = per_face[..., 9:] if g_color_table is not None else jnp.zeros_like(face_colors)
    return (
        jnp.zeros_like(px),
        jnp.zeros_like(py),
        g_face_table,
        g_face_colors,
        None,
        None,
        None,
        g_background,
        g_near,
        g_far,
    )


aggregate.defvjp(_aggregate_fwd, _aggregate_bwd)
