"""A density field on a grid (the smoke of `physics.smoke`) as an RGBA image, differentiably.

Each cell's smoke is a thin slab that absorbs and emits: its opacity is a = 1 - exp(-density / scale)
(Beer-Lambert, smooth in the density and < 1 everywhere), its colour c = colormap(a) (piecewise linear
through the map's control colours), and a pixel is background (1 - a) + c a, with a as its alpha. The grid
is y up (row 0 at the bottom, `physics.smoke`'s convention) and the image row 0 at the top, so rows are
flipped; a grid of another size than the image is resampled bilinearly at the pixel centres (the grid
covering the whole image).
"""

from __future__ import annotations

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
    """The control colours [k, 3] of `colormap`: a name of COLORMAPS, or k >= 2 RGB rows in [0, 1]."""
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
    """RGB [..., 3] of t [...] in [0, 1] along the control colours [k, 3] (piecewise linear)."""
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
    the grid's. Differentiable in the density, the scale and the colours."""
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
