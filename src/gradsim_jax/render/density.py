"""A density field on a grid (the smoke of `physics.smoke`) as an RGBA image, differentiably.

Each cell's smoke is a thin slab that absorbs and emits: its opacity is a = 1 - exp(-density / scale)
(Beer-Lambert, smooth in the density and < 1 everywhere), its colour c = colormap(a) (piecewise linear
through the map's control colours), and a pixel is background (1 - a) + c a, with a as its alpha. The grid
is y up (row 0 at the bottom, `physics.smoke`'s convention) and the image row 0 at the top, so rows are
flipped; a grid of another size than the image is resampled bilinearly at the pixel centres (the grid
covering the whole image).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = Any

#: Control colours (RGB in [0, 1], evenly spaced from opacity 0 to 1) of the built-in colour maps.
COLORMAPS = {
    "grey": ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
    "smoke": ((0.25, 0.25, 0.3), (0.65, 0.65, 0.7), (1.0, 1.0, 1.0)),
    "fire": ((0.2, 0.0, 0.0), (0.8, 0.15, 0.0), (1.0, 0.6, 0.0), (1.0, 1.0, 0.6)),
}


def colormap_colors(colormap) -> np.ndarray:
    """The control colours [k, 3] of `colormap`: a name of COLORMAPS, or k >= 2 RGB rows in [0, 1].

    Args:
        colormap: a name of COLORMAPS ("grey", "smoke", "fire") or [k, 3] RGB rows in [0, 1], k >= 2.

    Returns:
        [k, 3] float64 control colours; ValueError for an unknown name or bad rows.
    """
    if isinstance(colormap, str):
        if colormap not in COLORMAPS:
            raise ValueError(f"colormap must be one of {', '.join(COLORMAPS)} or [k, 3] RGB rows, got {colormap!r}")
        return np.asarray(COLORMAPS[colormap], np.float64)
    colors = np.asarray(colormap, np.float64)
    if colors.ndim != 2 or colors.shape[0] < 2 or colors.shape[1] != 3:
        raise ValueError(f"colormap must be [k, 3] RGB rows with k >= 2, got shape {colors.shape}")
    if not np.all(np.isfinite(colors)) or np.any(colors < 0) or np.any(colors > 1):
        raise ValueError("colormap colours must be finite and in [0, 1]")
    return colors


def apply_colormap(t, colors) -> Array:
    """RGB [..., 3] of t [...] in [0, 1] along the control colours [k, 3] (piecewise linear).

    Args:
        t: [...] positions along the map, in [0, 1] (clipped).
        colors: [k, 3] control colours, evenly spaced from t = 0 to t = 1.

    Returns:
        [..., 3] RGB, in t's dtype.
    """
    colors = jnp.asarray(colors, jnp.result_type(t))
    k = colors.shape[0]
    s = jnp.clip(t, 0.0, 1.0) * (k - 1)
    i = jnp.clip(jnp.floor(s), 0, k - 2).astype(jnp.int32)
    f = (s - i)[..., None]
    return (1.0 - f) * colors[i] + f * colors[i + 1]


def _resample(grid, height: int, width: int):
    """Bilinear samples of grid [ny, nx] (row 0 at the top) at the centres of a height x width image."""
    ny, nx = grid.shape
    if (ny, nx) == (height, width):
        return grid
    gy = jnp.clip((jnp.arange(height) + 0.5) * ny / height - 0.5, 0.0, ny - 1.0)
    gx = jnp.clip((jnp.arange(width) + 0.5) * nx / width - 0.5, 0.0, nx - 1.0)
    j0 = jnp.clip(jnp.floor(gy), 0, max(ny - 2, 0)).astype(jnp.int32)
    i0 = jnp.clip(jnp.floor(gx), 0, max(nx - 2, 0)).astype(jnp.int32)
    fy, fx = (gy - j0)[:, None], (gx - i0)[None, :]
    j1, i1 = jnp.minimum(j0 + 1, ny - 1), jnp.minimum(i0 + 1, nx - 1)
    rows0 = (1 - fx) * grid[j0][:, i0] + fx * grid[j0][:, i1]
    rows1 = (1 - fx) * grid[j1][:, i0] + fx * grid[j1][:, i1]
    return (1 - fy) * rows0 + fy * rows1


def density_image(density, *, size=None, colormap="smoke", scale=1.0, background=(0.0, 0.0, 0.0)) -> Array:
    """RGBA image(s) [..., H, W, 4] of density [..., ny, nx] (y up): opacity 1 - exp(-density / scale) over
    `background`, coloured by `colormap` (a name of COLORMAPS or [k, 3] RGB rows); size (H, W) pixels, default
    the grid's. Differentiable in the density, the scale and the colours.

    Args:
        density: [..., ny, nx] the density grid(s), row 0 at the bottom.
        size: (H, W) pixels of the image, or None for the grid's (ny, nx).
        colormap: a name of COLORMAPS or [k, 3] RGB rows (`colormap_colors`).
        scale: the density at which the opacity is 1 - 1/e (same unit as the density).
        background: [3] RGB in [0, 1] behind the smoke.

    Returns:
        [..., H, W, 4] RGBA, alpha the opacity.
    """
    density = jnp.asarray(density)
    if density.ndim < 2:
        raise ValueError(f"density must be [..., ny, nx], got shape {density.shape}")
    height, width = (density.shape[-2], density.shape[-1]) if size is None else (int(size[0]), int(size[1]))
    if height < 1 or width < 1:
        raise ValueError(f"size must be two positive pixel counts, got {size!r}")
    colors = colormap_colors(colormap)
    bg = np.asarray(background, np.float64)
    if bg.shape != (3,) or not np.all(np.isfinite(bg)):
        raise ValueError(f"background must be 3 finite RGB values, got {background!r}")
    lead = density.shape[:-2]
    flat = jnp.flip(density.reshape((-1,) + density.shape[-2:]), axis=-2)
    opacity = 1.0 - jnp.exp(-jax.vmap(lambda g: _resample(g, height, width))(flat) / scale)
    rgb = jnp.asarray(bg, opacity.dtype) * (1.0 - opacity[..., None]) + apply_colormap(opacity, colors) * opacity[..., None]
    return jnp.concatenate([rgb, opacity[..., None]], axis=-1).reshape(lead + (height, width, 4))


def _bilinear_points(grid, gx, gy):
    """Bilinear samples of grid [ny, nx] at continuous cell coordinates (gx, gy) [...] (cell centres at whole
    numbers; row 0 at the grid's bottom); clamped at the border cells."""
    ny, nx = grid.shape
    gx = jnp.clip(gx, 0.0, nx - 1.0)
    gy = jnp.clip(gy, 0.0, ny - 1.0)
    i0 = jnp.clip(jnp.floor(gx), 0, max(nx - 2, 0)).astype(jnp.int32)
    j0 = jnp.clip(jnp.floor(gy), 0, max(ny - 2, 0)).astype(jnp.int32)
    fx, fy = gx - i0, gy - j0
    i1, j1 = jnp.minimum(i0 + 1, nx - 1), jnp.minimum(j0 + 1, ny - 1)
    bottom = (1 - fx) * grid[j0, i0] + fx * grid[j0, i1]
    top = (1 - fx) * grid[j1, i0] + fx * grid[j1, i1]
    return (1 - fy) * bottom + fy * top


def density_slab_image(camera, density, *, corner=(0.0, 0.0, 0.0), extent=(1.0, 1.0), colormap="smoke", scale=1.0,
                       background=(0.0, 0.0, 0.0)) -> Array:
    """RGBA image(s) [..., H, W, 4] of density [..., ny, nx] (y up) as `camera` (`render.camera.Camera`) sees it:
    the grid is a thin slab of emitting, absorbing smoke in the world plane z = corner[2], its bottom-left corner
    at `corner` (m) and spanning `extent` (width along world x, height along world y, m).

    Each pixel's ray meets the plane at one point; inside the slab the density there (bilinear between cell
    centres) gives the opacity a = 1 - exp(-density / (scale cos)), cos the cosine between the ray and the
    plane's normal (an oblique ray crosses more smoke: Beer-Lambert along its path), coloured by `colormap`
    and blended over `background` as in `density_image`; rays that miss the slab (or meet its plane behind
    the camera) show the background with alpha 0. Seen head-on (cos = 1) a pixel is `density_image`'s.
    Differentiable in the density, the camera, the corner and the extent.

    Args:
        camera: the `render.camera.Camera`.
        density: [..., ny, nx] the density grid(s), row 0 at the bottom.
        corner: [3] m, the slab's bottom-left corner; the slab lies in the plane z = corner[2].
        extent: (width along world x, height along world y) m of the slab, both > 0.
        colormap: a name of COLORMAPS or [k, 3] RGB rows (`colormap_colors`).
        scale: the density at which a head-on pixel's opacity is 1 - 1/e (same unit as the density).
        background: [3] RGB in [0, 1] behind the smoke.

    Returns:
        [..., H, W, 4] RGBA (H, W: the camera's image), alpha the opacity (0 where rays miss the slab).
    """
    density = jnp.asarray(density)
    if density.ndim < 2:
        raise ValueError(f"density must be [..., ny, nx], got shape {density.shape}")
    corner = np.asarray(corner, np.float64) if not isinstance(corner, jax.Array) else corner
    if np.shape(corner) != (3,) or np.shape(extent) != (2,):
        raise ValueError(f"corner must be a point (x, y, z) and extent (width, height) m, got {corner!r}, {extent!r}")
    if not isinstance(extent, jax.Array) and not (np.all(np.isfinite(extent)) and np.min(extent) > 0):
        raise ValueError(f"extent must be two positive lengths (m), got {extent!r}")
    colors = colormap_colors(colormap)
    bg = np.asarray(background, np.float64)
    if bg.shape != (3,) or not np.all(np.isfinite(bg)):
        raise ValueError(f"background must be 3 finite RGB values, got {background!r}")
    dtype = jnp.result_type(density, camera.rotation)
    corner = jnp.asarray(corner, dtype)
    extent = jnp.asarray(extent, dtype)
    # Each pixel centre's ray in world space: R^T ((u - cx) / fx, (v - cy) / fy, 1) from the eye (OpenCV pixels).
    v, u = np.mgrid[0:camera.height, 0:camera.width].astype(np.float64)
    uv = jnp.asarray(np.stack([u, v], -1), dtype)
    local = jnp.concatenate([(uv - camera.principal) / camera.focal, jnp.ones(uv.shape[:-1] + (1,), dtype)], -1)
    ray = local @ camera.rotation.astype(dtype)
    eye = camera.eye.astype(dtype)
    dz = ray[..., 2]
    parallel = jnp.abs(dz) < 1e-12
    t = (corner[2] - eye[2]) / jnp.where(parallel, 1.0, dz)
    hit = eye[:2] + t[..., None] * ray[..., :2]
    rel = (hit - corner[:2]) / extent  # 0..1 across the slab
    inside = ~parallel & (t > 0) & jnp.all((rel >= 0) & (rel <= 1), axis=-1)
    ny, nx = density.shape[-2:]
    gx, gy = rel[..., 0] * nx - 0.5, rel[..., 1] * ny - 0.5
    cos = jnp.abs(dz) / jnp.sqrt(jnp.sum(ray * ray, axis=-1))
    path = 1.0 / jnp.where(inside, cos, 1.0)
    lead = density.shape[:-2]
    flat = density.reshape((-1, ny, nx))
    sampled = jax.vmap(lambda g: _bilinear_points(g, gx, gy))(flat)
    opacity = jnp.where(inside, 1.0 - jnp.exp(-sampled * path / scale), 0.0)
    rgb = jnp.asarray(bg, dtype) * (1.0 - opacity[..., None]) + apply_colormap(opacity, colors) * opacity[..., None]
    return jnp.concatenate([rgb, opacity[..., None]], axis=-1).reshape(lead + (camera.height, camera.width, 4))


@dataclasses.dataclass(frozen=True)
class SmokeLook:
    """How a scene's smoke is filmed (static, hashable): as a thin slab in the world plane z = corner[2], its
    bottom-left corner at `corner` (m), as wide and tall as the grid (`density_slab_image`), coloured by
    `colormap` (a name of COLORMAPS or RGB rows) with opacity 1 - 1/e at density `scale`."""

    corner: tuple = (0.0, 0.0, 0.0)
    colormap: Any = "smoke"
    scale: float = 1.0

    def __post_init__(self):
        corner = tuple(float(c) for c in np.asarray(self.corner, np.float64).reshape(-1))
        if len(corner) != 3 or not np.all(np.isfinite(corner)):
            raise ValueError(f"SmokeLook.corner must be a finite point (x, y, z) m, got {self.corner!r}")
        object.__setattr__(self, "corner", corner)
        colors = colormap_colors(self.colormap)
        if not isinstance(self.colormap, str):
            object.__setattr__(self, "colormap", tuple(tuple(float(c) for c in row) for row in colors))
        if not (isinstance(self.scale, (int, float)) and np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"SmokeLook.scale must be a positive density, got {self.scale!r}")


def smoke_over(camera, density, image, look: SmokeLook, extent) -> Array:
    """Frames [..., H, W, 4] of smoke density [..., ny, nx] filmed by `camera` as `look` says, in front of
    `image` [..., H, W, 4] (colours already blended over their background, alpha the coverage): the slab's colour
    c a over the image's, colour c a + (1 - a) rgb, alpha a + (1 - a) alpha.

    Args:
        camera: the `render.camera.Camera`.
        density: [..., ny, nx] the smoke density, row 0 at the bottom.
        image: [..., H, W, 4] the frames behind the smoke (colours blended over their background, alpha the
            coverage).
        look: the `SmokeLook` (corner, colour map, scale).
        extent: the slab's (width, height) m.

    Returns:
        [..., H, W, 4] RGBA frames with the smoke in front.
    """
    smoke = density_slab_image(camera, density, corner=look.corner, extent=extent, colormap=look.colormap,
                               scale=look.scale)  # over black: premultiplied colour
    a = smoke[..., 3:]
    return jnp.concatenate([smoke[..., :3] + (1.0 - a) * image[..., :3], a + (1.0 - a) * image[..., 3:]], axis=-1)
