"""Screen space and tiles of the tiled soft rasterizer (`render.rasterize`): the faces projected and tabulated
(`screen_faces`), the image cut into tiles (`tile_layout`, `tile_pixels`), each tile's candidate faces
nearest first (`tile_overlap`, `bin_faces`) and each pixel's among them (`pixel_candidates`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.render.aggregate import FACE_COLUMNS
from gradsim_jax.render.camera import Camera, project

Array = Any

#: Screen-space doubled areas below this are treated as zero: far below a pixel's area at any size.
DEGENERATE_AREA = 1e-10


class ScreenFaces(NamedTuple):
    """The faces projected to the screen (`screen_faces`)."""

    table: Array  # [F, len(FACE_COLUMNS)]
    nearest_z: Array  # [F] (no gradient; inf for dropped faces)
    valid: Array  # [F] bool


def screen_faces(camera: Camera, vertices, faces, fill_back: bool) -> ScreenFaces:
    """Project faces and tabulate their screen-space columns (`aggregate.FACE_COLUMNS`).

    Args:
      camera: the `Camera`.
      vertices: [N, 3] world positions (m).
      faces: [F, 3] int vertex indices.
      fill_back: keep faces seen from behind (else they are dropped).

    Returns:
      `ScreenFaces`.
    """
    xy, z = project(camera, vertices)
    fxy = xy[faces]  # [F, 3, 2]
    fz = z[faces]  # [F, 3]
    valid = jnp.all(fz > camera.near, axis=1) & jnp.all(fz < camera.far, axis=1)
    edges = jnp.roll(fxy, -1, axis=1) - fxy  # e_k = v_{k+1} - v_k
    len2 = jnp.sum(edges * edges, axis=-1)
    zero_len = len2 <= 0
    inv_len2 = jnp.where(zero_len, 0.0, 1.0 / jnp.where(zero_len, 1.0, len2))
    # Twice the signed area, cross(v1 - v0, v2 - v0), with v2 - v0 = -e2.
    area2 = edges[:, 0, 1] * edges[:, 2, 0] - edges[:, 0, 0] * edges[:, 2, 1]
    degenerate = jnp.abs(area2) <= DEGENERATE_AREA
    inv_area2 = jnp.where(degenerate, 0.0, 1.0 / jnp.where(degenerate, 1.0, area2))
    orient = jax.lax.stop_gradient(jnp.where(degenerate, 0.0, jnp.sign(area2)))
    if not fill_back:
        # Screen y is up and the camera is not mirrored: a face whose right-hand normal points at the
        # camera is counter-clockwise on screen (positive signed area).
        valid = valid & (orient > 0)
    inv_z = 1.0 / jnp.where(valid[:, None], fz, 1.0)
    # Screen barycentric of vertex i as a plane in p: the edge function of the opposite edge
    # e_{i+1} (from v_{i+1}), cross(e, p - v) = -e_y p_x + e_x p_y + (e_y v_x - e_x v_y), over area2.
    opposite_e = jnp.roll(edges, -1, axis=1)
    opposite_v = jnp.roll(fxy, -1, axis=1)
    planes = jnp.stack(
        [
            -opposite_e[..., 1],
            opposite_e[..., 0],
            opposite_e[..., 1] * opposite_v[..., 0] - opposite_e[..., 0] * opposite_v[..., 1],
        ],
        axis=-1,
    ) * inv_area2[:, None, None]
    table = jnp.concatenate(
        [
            fxy.reshape(-1, 6),
            edges.reshape(-1, 6),
            inv_len2,
            planes.reshape(-1, 9),
            inv_z,
            valid[:, None].astype(fxy.dtype),
        ],
        axis=1,
    )
    nearest_z = jax.lax.stop_gradient(jnp.where(valid, fz.min(axis=1), jnp.inf))
    return ScreenFaces(table, nearest_z, valid)


# --------------------------------------------------------------------------------------------------
# Tiling.
# --------------------------------------------------------------------------------------------------


def tile_layout(width: int, height: int, tile: int):
    """Tile grid (rows, cols), pixel centers [tiles, tile^2, 2] of the image padded to whole tiles, and
    each tile's screen rectangle [tiles, 4] (xmin, xmax, ymin, ymax) of its pixel centers.

    Args:
      width: the image's width in pixels.
      height: its height in pixels.
      tile: the tile's edge in pixels.

    Returns:
      (rows, cols, pixel centers [tiles, tile^2, 2] numpy, rectangles [tiles, 4] numpy), in screen units.
    """
    tiles_y, tiles_x = -(-height // tile), -(-width // tile)
    # Padded pixels continue the pixel grid beyond the image; they are cropped after rendering.
    cols = (2.0 * np.arange(tiles_x * tile) + 1.0 - width) / height
    rows = (height - 2.0 * np.arange(tiles_y * tile) - 1.0) / height
    xx, yy = np.meshgrid(cols, rows)
    grid = np.stack([xx, yy], axis=-1)
    grid = grid.reshape(tiles_y, tile, tiles_x, tile, 2).transpose(0, 2, 1, 3, 4)
    grid = grid.reshape(tiles_y * tiles_x, tile * tile, 2)
    rect = np.stack([grid[..., 0].min(1), grid[..., 0].max(1), grid[..., 1].min(1), grid[..., 1].max(1)], 1)
    return tiles_y, tiles_x, grid, rect


def tile_overlap(table, valid, rect, radius):
    """[tiles, F] bool: the face, widened by `radius`, may cover a pixel center of the tile.

    Separating-axis test on gradient-free screen coordinates: the bounding boxes overlap and the tile
    rectangle is not entirely beyond any edge of the face by more than `radius` (zero-area faces: boxes
    only).

    Args:
      table: [F, len(FACE_COLUMNS)] the faces' screen table (`ScreenFaces.table`).
      valid: [F] bool, the faces kept (`ScreenFaces.valid`).
      rect: [tiles, 4] the tiles' rectangles (`tile_layout`).
      radius: screen units, how far beyond its edges a face may reach.

    Returns:
      [tiles, F] bool.
    """
    table = jax.lax.stop_gradient(table)
    c = {name: table[:, i] for i, name in enumerate(FACE_COLUMNS)}
    vx = jnp.stack([c["v0x"], c["v1x"], c["v2x"]])
    vy = jnp.stack([c["v0y"], c["v1y"], c["v2y"]])
    rect = jnp.asarray(rect, table.dtype)
    x0, x1, y0, y1 = (rect[:, i : i + 1] for i in range(4))
    overlap = (
        (vx.max(0) + radius >= x0)
        & (vx.min(0) - radius <= x1)
        & (vy.max(0) + radius >= y0)
        & (vy.min(0) - radius <= y1)
        & valid
    )
    for i in range(3):
        # u_i = a x + b y + c is the screen barycentric; |(a, b)| converts it to distance from the edge.
        a, b, c0 = c[f"a{i}"], c[f"b{i}"], c[f"c{i}"]
        largest = jnp.where(a > 0, a * x1, a * x0) + jnp.where(b > 0, b * y1, b * y0) + c0
        overlap = overlap & (largest >= -radius * jnp.sqrt(a * a + b * b))
    return overlap


def bin_faces(screen: ScreenFaces, rect, radius: float, capacity: int):
    """Candidate faces per tile, nearest first: indices [tiles, capacity], mask, and each tile's count of
    overlapping faces [tiles] (more than `capacity` means the tile dropped its farthest ones).

    Args:
      screen: `ScreenFaces`.
      rect: [tiles, 4] the tiles' rectangles (`tile_layout`).
      radius: screen units, how far beyond its edges a face may reach.
      capacity: candidate faces kept per tile.

    Returns:
      (indices [tiles, capacity] int, mask [tiles, capacity] bool, counts [tiles] int32).
    """
    overlap = tile_overlap(screen.table, screen.valid, rect, radius)
    score = jnp.where(overlap, -screen.nearest_z[None, :], -jnp.inf)
    top_score, index = jax.lax.top_k(score, capacity)
    return index, top_score > -jnp.inf, jnp.sum(overlap, axis=1, dtype=jnp.int32)


def pixel_candidates(table, tile_mask, pixel_xy, cutoff_sq: float, capacity: int):
    """Per-pixel choice among a tile's candidate faces.

    A face is a candidate of a pixel when the pixel is inside it or within `cutoff_sq` of its nearest edge
    (the aggregation's own test, on gradient-free coordinates). Each pixel keeps its first `capacity`
    candidates in the tile's order (nearest first).

    Args:
      table: [..., Kt, D] the screen table rows of the tile's candidates (nearest first).
      tile_mask: [..., Kt] bool, the tile's candidates that are faces.
      pixel_xy: [..., P, 2] the pixel centers (screen units).
      cutoff_sq: screen units^2, the squared distance beyond which a face does not reach a pixel.
      capacity: candidates kept per pixel.

    Returns:
      (local indices [..., P, capacity] into the tile's list, their mask, the number of pixel-face
      candidates dropped, the fullest pixel's count).
    """
    c = {name: jax.lax.stop_gradient(table[..., None, :, i]) for i, name in enumerate(FACE_COLUMNS)}
    px, py = pixel_xy[..., 0:1], pixel_xy[..., 1:2]
    d2 = None
    for k in range(3):
        ex, ey = c[f"e{k}x"], c[f"e{k}y"]
        qx, qy = px - c[f"v{k}x"], py - c[f"v{k}y"]
        t = jnp.clip((qx * ex + qy * ey) * c[f"il{k}"], 0.0, 1.0)
        rx, ry = qx - t * ex, qy - t * ey
        d2k = rx * rx + ry * ry
        d2 = d2k if d2 is None else jnp.minimum(d2, d2k)
    ok = d2 < cutoff_sq
    inside = None
    for i in range(3):
        u = c[f"a{i}"] * px + c[f"b{i}"] * py + c[f"c{i}"] > 0
        inside = u if inside is None else inside & u
    ok = tile_mask[..., None, :] & (ok | inside)  # [..., P, Kt]
    # The tile's list is nearest first, so the first candidates are the nearest.
    order = -jnp.arange(ok.shape[-1], dtype=table.dtype)
    top_score, local = jax.lax.top_k(jnp.where(ok, order, -jnp.inf), capacity)
    counts = jnp.sum(ok, axis=-1, dtype=jnp.int32)
    overflow = jnp.sum(jnp.maximum(counts - capacity, 0), dtype=jnp.int32)
    return local, top_score > -jnp.inf, overflow, jnp.max(counts)


def tile_pixels(image, tiles_y: int, tiles_x: int, tile: int):
    """A per-pixel array [H, W, C] in the tile layout of `tile_layout` ([tiles, tile^2, C], tiles in
    row-major order, pixels row-major within a tile), padded beyond the image (the padded pixels are
    cropped after rendering). The inverse of the un-tiling in `render_with_stats`.

    Args:
      image: [H, W, C] a per-pixel array.
      tiles_y: rows of tiles.
      tiles_x: columns of tiles.
      tile: the tile's edge in pixels.

    Returns:
      [tiles, tile^2, C].
    """
    height, width, channels = image.shape
    image = jnp.pad(image, ((0, tiles_y * tile - height), (0, tiles_x * tile - width), (0, 0)))
    image = image.reshape(tiles_y, tile, tiles_x, tile, channels).swapaxes(1, 2)
    return image.reshape(tiles_y * tiles_x, tile * tile, channels)
