"""Differentiable soft rasterizer (SoftRas: Liu, Li, Chen, Li, "Soft Rasterizer: A Differentiable
Renderer for Image-based 3D Reasoning", ICCV 2019), as gradSim uses it, with tiled face culling.

Model (per pixel p and face j; screen coordinates as in `camera.py`):
- d_j: distance from p to the nearest edge of face j; delta_j = +1 inside, -1 outside;
  D_j = sigmoid(delta_j d_j^2 / sigma). sigma defaults to 1e-5 at 256 px height, scaled by (256 / H)^2.
- Faces with D_j < dist_eps contribute nothing: an outside pixel with d_j^2 >= sigma ln(1/dist_eps - 1)
  is skipped exactly, in the tiled renderer and in the dense reference alike.
- Alpha: A = 1 - prod_j (1 - D_j), computed as 1 - exp(-sum_j softplus(delta_j d_j^2 / sigma)).
- Color: softmax over faces and the background with logits log D_j + z_hat_j / gamma and
  background_eps / gamma, z_hat_j = (far - z_j) / (far - near), z_j from perspective-correct barycentrics
  (screen barycentrics clamped to the face and renormalized, so pixels just outside use the nearest point).
  Subtracting the running maximum of the logits keeps it finite for small gamma. The background color
  is one RGB [3] for every pixel, or an image [H, W, 3] (e.g. a video's static, cluttered background):
  then each pixel's softmax uses its own background pixel (with supersampling, each output pixel's
  color covers its 2 x 2 block), and the gradient reaches every background pixel.
- Both sides of a face are visible by default (`fill_back=True`); with `fill_back=False` a face whose
  vertex order is counter-clockwise seen from the camera (right-hand normal pointing away from it) is
  culled, so meshes with outward normals show their near side.
- Faces with a vertex at or closer than the near plane, or at or beyond the far plane, are dropped (no
  clipping). Zero-area faces have no inside and use equal barycentrics; every division and norm is guarded
  (double where) so values and gradients stay finite for degenerate, edge-on and behind-camera faces and
  for pixel centers exactly on an edge (d^2 is used, never d).

Culling scheme (cost and memory not dense pixels x faces), in two levels on gradient-free coordinates:
1. Tiles. The image is split into square tiles of `tile_size` pixels. Every face, widened by the cutoff
   radius r = sqrt(sigma ln(1/dist_eps - 1)), is tested against every tile (a [tiles, F] separating-axis
   test: bounding box and the three edge lines pushed out by r). Each tile keeps its `tile_capacity`
   nearest overlapping faces (`lax.top_k` on minus the face's nearest depth), so a full tile drops its
   farthest faces.
2. Pixels. Each pixel tests its tile's list with the aggregation's own test at its center (inside the
   face, or within the cutoff of its nearest edge, with the same 1% margin) and keeps its
   `pixel_capacity` nearest candidates (skipped when pixel_capacity >= tile_capacity: then every pixel
   of a tile takes the tile's whole list).
The soft-rasterization math (`aggregate.py`, with a hand-written VJP) then runs on [pixels, capacity]
pairs only, tiles a few at a time under `lax.map` so that memory stays bounded. Tiles with candidates
are sorted first and chunks of empty tiles skip the math (`lax.cond`), so the cost follows the covered
area. The selection indices are integers and carry no gradient; the kernel scatters the per-pair
gradient of the faces' vertex columns back to the faces. `render_with_stats` reports the faces dropped by full tiles and pixels (`overflow`; 0 means
exact) and the fullest tile and pixel; `suggest_capacities` measures what example frames need. Without
overflow the result equals `render_dense`, the all-pixels-times-all-faces reference, up to the order of
floating-point sums.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.compilation import accurate_products, current_backend, jit
from gradsim_jax.physics.validate import check_index_rows, is_concrete
from gradsim_jax.render.aggregate import EMPTY_ROW, KernelConfig, aggregate, aggregate_autodiff
from gradsim_jax.render.appearance import appearance, appearance_of, as_colors
from gradsim_jax.render.camera import Camera, pixel_centers, with_image_size
from gradsim_jax.render.coverage import area_coverage
from gradsim_jax.render.coverage_models import coverage_model
from gradsim_jax.render.shading import Lights, face_light_factor
from gradsim_jax.render.tiling import (ScreenFaces, bin_faces, pixel_candidates, screen_faces, tile_layout,
                                      tile_overlap, tile_pixels)

Array = Any


#: Backends on which the rasterizer selects each pixel's faces from its tile's by one-hot products instead of a
#: gather (`RenderSettings.one_hot_rows`). On a TPU v5e the gathers and the gradient's scatter-add took half
#: of a 256 px render's gradient (400 faces: a 16384-pair chunk's gather 134 us, its scatter-add 111 us).
#: CPUs gather cheaply and keep the gather.
ONE_HOT_BACKENDS = ("tpu",)


@dataclasses.dataclass(frozen=True)
class RenderSettings:
    """Static rasterizer settings (hashable; a pytree with no leaves, so it can pass through `jit`).

    sigma: sharpness in screen units^2; None means 1e-5 * (256 / height)^2.
    gamma: depth-softmax temperature. dist_eps: coverage below which a face is skipped.
    background_eps: the background's z_hat in the color softmax.
    fill_back: render both sides of faces (else cull back faces).
    supersample: 1, or 2 to render at twice the size and average 2 x 2 blocks.
    tile_size: tile edge in pixels. tile_capacity: faces kept per tile. pixel_capacity: faces kept per
    pixel (out of its tile's); `suggest_capacities` measures what a scene needs.
    pairs_per_chunk: pixel-face pairs evaluated at once (a cache-size knob; it does not change results).
    checkpoint_frames: `render_video` recomputes each frame in the backward pass (slower; the memory of
    a gradient is then that of one frame instead of T frames' residuals, ~3 MB each at 128 px).
    coverage: the coverage (edge) model, a registered name (`coverage_models.py`, which describes each):
    "softras" (SoftRas and PyTorch3D's), "box" (a camera's sensor: the one to compare with real footage)
    or "dibr" (DIB-R).
    pixel_footprint: with "box", the side of the square each pixel integrates, in pixels (1: the
    sensor's pixel; up to 2 for a blurrier lens).
    one_hot_rows: how a pixel takes its faces' rows from its tile's: None on the backends in
    `ONE_HOT_BACKENDS` (TPU), where gathers and scatters are slow, by one-hot products (exact; the
    gradient adds back the same way), elsewhere by a gather; True or False: always or never. The image
    and gradient are the same either way (to float rounding of the sums' order).
    """

    sigma: float | None = None
    gamma: float = 1e-4
    dist_eps: float = 1e-4
    background_eps: float = 1e-3
    fill_back: bool = True
    supersample: int = 1
    tile_size: int = 8
    tile_capacity: int = 64
    pixel_capacity: int = 16
    pairs_per_chunk: int = 16384
    checkpoint_frames: bool = False
    coverage: str = "softras"
    pixel_footprint: float = 1.0
    one_hot_rows: bool | None = None

    def __post_init__(self):
        if self.supersample not in (1, 2):
            raise ValueError(f"supersample must be 1 or 2, got {self.supersample}")
        if min(self.tile_size, self.tile_capacity, self.pixel_capacity, self.pairs_per_chunk) < 1:
            raise ValueError("tile_size, tile_capacity, pixel_capacity and pairs_per_chunk must be positive")
        if self.sigma is not None and not self.sigma > 0:
            raise ValueError(f"sigma must be positive, got {self.sigma}")
        if not 0.5 <= self.pixel_footprint <= 2.0:
            raise ValueError(f"pixel_footprint must be in [0.5, 2] pixels, got {self.pixel_footprint}")
        coverage_model(self.coverage)  # ValueError naming the registered models
        if not (self.gamma > 0 and 0 < self.dist_eps < 0.5):
            raise ValueError("gamma must be positive and dist_eps in (0, 0.5)")

    def sigma_for(self, height: int) -> float:
        """sigma for an image `height` pixels tall (the default keeps edges ~1 px wide at any size).

        Args:
            height: pixels, the image height.

        Returns:
            screen units^2.
        """
        return self.sigma if self.sigma is not None else 1e-5 * (256.0 / height) ** 2

    def cutoff_sq(self, height: int) -> float:
        """Squared distance beyond which an outside pixel has coverage below dist_eps (with "box"
        coverage, at least the reach of the pixel's square: 3/4 of its side).

        Args:
            height: pixels, the image height.

        Returns:
            screen units^2 (the coverage model's rule, `coverage_models.CoverageModel.cutoff`).
        """
        cutoff = coverage_model(self.coverage).cutoff  # `coverage_models`: each model's rule
        return cutoff(self.sigma_for(height), self.dist_eps, self.pixel_footprint, height)


jax.tree_util.register_dataclass(
    RenderSettings, data_fields=[], meta_fields=[f.name for f in dataclasses.fields(RenderSettings)]
)


class RenderStats(NamedTuple):
    """Culling diagnostics. `tile_overflow` / `pixel_overflow`: candidate faces dropped because a tile or
    a pixel was full (0 and 0 mean the image is exact); `max_faces_per_tile` / `max_faces_per_pixel`:
    candidates of the fullest tile / pixel (the pixel count is taken over the faces its tile kept)."""

    tile_overflow: Array
    pixel_overflow: Array
    max_faces_per_tile: Array
    max_faces_per_pixel: Array

    @property
    def overflow(self):
        return self.tile_overflow + self.pixel_overflow


# --------------------------------------------------------------------------------------------------
# Per-face table: everything the per-pixel math needs, one row per face, gathered once per tile.
# --------------------------------------------------------------------------------------------------


def _face_colors_table(colors, lights, face_world, faces, camera, dtype):
    """Color columns [F, C] and their appearance model's name (`appearance.py`); lighting folded in."""
    model = appearance_of(colors)
    light = face_light_factor(lights, face_world, camera.eye)
    return model.color_table(colors, light, faces, dtype), model.name


# --------------------------------------------------------------------------------------------------
# Public API.
# --------------------------------------------------------------------------------------------------


def _check_inputs(vertices, faces, colors):
    if vertices.ndim != 2 or vertices.shape[-1] != 3:
        raise ValueError(f"vertices must be [N, 3], got shape {vertices.shape}")
    if faces.ndim != 2 or faces.shape[-1] != 3:
        raise ValueError(f"faces must be [F, 3], got shape {faces.shape}")
    if not jnp.issubdtype(faces.dtype, jnp.integer):
        raise TypeError(f"faces must be integer indices, got {faces.dtype}")
    if not jnp.issubdtype(vertices.dtype, jnp.floating):
        raise TypeError(f"vertices must be floating point, got {vertices.dtype}")
    num_vertices, num_faces = vertices.shape[0], faces.shape[0]
    # Each appearance model checks its colours' shapes and names the arrays whose values to check.
    color_values = appearance_of(colors).checks(colors, num_vertices, num_faces)
    # Values can only be checked when they are concrete (not inside jit: see `gradsim_jax.render.checks`,
    # whose messages these match).
    if not isinstance(faces, jax.core.Tracer):
        check_index_rows("faces", faces, num_vertices)
    _check_values("vertices", vertices)
    for name, value, unit in color_values:
        _check_values(name, value, unit=unit)


def _check_values(name, value, unit=False):
    """ValueError naming the first entry of a concrete `value` that is not finite (or, with `unit`, not in
    [0, 1]: colours and backgrounds are RGB in [0, 1], so that images are too)."""
    if isinstance(value, jax.core.Tracer):
        return
    value = np.asarray(value)
    bad = ~np.isfinite(value)
    if unit:
        bad |= (value < 0) | (value > 1)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0]) if value.ndim else ()
        index = "[" + ", ".join(map(str, at)) + "]" if at else ""
        what = "is not in [0, 1]" if unit and np.isfinite(value[at]) else "is not finite"
        raise ValueError(f"{name}{index} = {value[at]:.6g} {what}")


def _prepare(camera, vertices, faces, colors, background, settings):
    vertices = jnp.asarray(vertices)
    faces = jnp.asarray(faces)
    colors = as_colors(colors, vertices.shape[0], faces.shape[0])
    _check_inputs(vertices, faces, colors)
    dtype = vertices.dtype
    if background is None:
        background = jnp.zeros(3, dtype)
    background = jnp.asarray(background, dtype)
    image_shape = (camera.height, camera.width, 3)
    if background.ndim == 3:  # a per-pixel background image
        if background.shape != image_shape:
            raise ValueError(
                f"background must be RGB [3] or an image [H, W, 3] = {list(image_shape)} matching the camera's "
                f"image size, got shape {background.shape}"
            )
        if settings.supersample == 2:  # each output pixel's 2 x 2 block shares its background pixel
            background = jnp.repeat(jnp.repeat(background, 2, axis=0), 2, axis=1)
    elif background.ndim <= 1 and background.size in (1, 3):
        background = jnp.broadcast_to(background, (3,))
    else:
        raise ValueError(
            f"background must be RGB [3] or an image [H, W, 3] = {list(image_shape)} matching the camera's "
            f"image size, got shape {background.shape}"
        )
    _check_values("background", background, unit=True)
    if settings.supersample == 2:
        camera = with_image_size(camera, 2 * camera.width, 2 * camera.height)
    return camera, vertices, faces.astype(jnp.int32), colors, background


def _kernel_config(settings: RenderSettings, kind: str, with_color: bool, height: int) -> KernelConfig:
    return KernelConfig(
        color_kind=kind,
        with_color=with_color,
        sigma=settings.sigma_for(height),
        cutoff_sq=settings.cutoff_sq(height),
        gamma=settings.gamma,
        background_eps=settings.background_eps,
    )


def one_hot_rows(settings: RenderSettings) -> bool:
    """Whether the kernels take each tile's own rows, selected by one-hot products (`RenderSettings.one_hot_rows`;
    read while tracing), instead of the faces' rows by gathers.

    Args:
        settings: the `RenderSettings`.

    Returns:
        True for one-hot products, False for gathers.
    """
    if settings.one_hot_rows is None:
        return current_backend() in ONE_HOT_BACKENDS
    return bool(settings.one_hot_rows)


def _kernel(settings: RenderSettings, kind: str, autodiff: bool = False):
    """The per-pixel kernel of `settings.coverage` for colours of `kind` (autodiff: JAX's own derivatives, so
    that forward mode works, instead of the hand-written VJP)."""
    own = coverage_model(settings.coverage).kernel
    if own is not None:
        return own
    return aggregate_autodiff if autodiff or not appearance(kind).hand_vjp else aggregate


def _box_alpha(image, settings, height, pixel_xy, table, pair_index, pair_mask, with_color):
    """With "box" coverage, the kernel's output with its alpha replaced by the exact area coverage of
    each pixel (`coverage.area_coverage`; `height` is the sampled grid's, pixels are 2 / height wide)."""
    if not coverage_model(settings.coverage).area_alpha:
        return image
    # Recomputed in the backward pass instead of keeping autodiff's per-pair residuals: the same gradient,
    # bit for bit, and 1.6x faster (a 32 px, 20-frame video's gradient: 197 -> 123 ms), as XLA on CPU
    # writes every saved [pixels, faces] intermediate to memory.
    coverage = jax.checkpoint(lambda *a: area_coverage(*a, 2.0 / height, settings.pixel_footprint), prevent_cse=False)
    alpha = coverage(pixel_xy[..., 0:1], pixel_xy[..., 1:2], table, pair_index, pair_mask).astype(image.dtype)
    return jnp.concatenate([image[..., :3], alpha[..., None]], axis=-1) if with_color else alpha


def _finish(image, settings, background, with_color):
    if coverage_model(settings.coverage).blends_background and with_color:
        # Where any face contributes, the softmax colour is the faces' (the background's weight is about
        # exp(-1 / gamma) smaller): blend it over the background by the covered fraction, as a sensor does.
        alpha = image[..., 3:4]
        image = jnp.concatenate([alpha * image[..., :3] + (1.0 - alpha) * background, alpha], axis=-1)
    if settings.supersample == 2:
        h, w = image.shape[0] // 2, image.shape[1] // 2
        image = image.reshape(h, 2, w, 2, *image.shape[2:]).mean(axis=(1, 3))
    return image


def _color_inputs(colors, lights, vertices, faces, camera, dtype, with_color):
    """Per-face color table, its appearance model's name (`appearance.py`) and the texture image (or None)."""
    if not with_color:
        return jnp.zeros((faces.shape[0], 3), dtype), appearance_of(None).name, None
    color_table, kind = _face_colors_table(colors, lights, vertices[faces], faces, camera, dtype)
    return color_table, kind, appearance(kind).texture_image(colors, dtype)


def _empty_image(height, width, background, dtype, with_color):
    """The image of no faces: the background ([3], or [height, width, 3] per pixel) with alpha 0."""
    if not with_color:
        return jnp.zeros((height, width), dtype)
    rgb = jnp.broadcast_to(background, (height, width, 3)).astype(dtype)
    return jnp.concatenate([rgb, jnp.zeros((height, width, 1), dtype)], axis=-1)


def render_with_stats(
    camera: Camera,
    vertices,
    faces,
    colors=None,
    *,
    lights: Lights | None = None,
    background=None,
    settings: RenderSettings = RenderSettings(),
    with_color: bool = True,
    autodiff: bool = False,
):
    """`render` (or, with `with_color=False`, `silhouette`), also returning the tiling's RenderStats.

    Args:
        camera: `Camera` (H, W from it).
        vertices: [N, 3] m, world positions.
        faces: [F, 3] int, vertex indices of each face.
        colors: None (white), a registered appearance's record (`FaceColors`, `VertexColors`, `Texture`) or [F | N, 3].
        lights: `Lights` or None (unlit).
        background: RGB [3] or an image [H, W, 3] behind the mesh (default black; ignored without color).
        settings: the rasterizer's `RenderSettings`.
        with_color: False: alpha only (`silhouette`).
        autodiff: see `render`.

    Returns:
        (image [H, W, 4], or [H, W] without color; `RenderStats`).
    """
    with accurate_products():
        height = camera.height  # sigma follows the output size, also when supersampling
        camera, vertices, faces, colors, background = _prepare(camera, vertices, faces, colors, background, settings)
        image, stats = _run(_render_tiled, (camera, vertices, faces, colors, lights, background), settings=settings,
                            with_color=with_color, height=height, autodiff=autodiff)
        return _nan_unless_finite(image, vertices), stats


def _nan_unless_finite(image, vertices):
    """`image`, or NaN when a traced `vertices` is not all finite (concrete ones were refused by `_prepare`):
    the rasterizer alone drops faces with NaN corners and shows a finite image, so a loss of a simulation
    that blew up would look valid."""
    if is_concrete(vertices):
        return image
    return jnp.where(jnp.all(jnp.isfinite(vertices)), image, jnp.nan)


# Called outside any trace (a user's plain call), the renderers run as one compiled program instead of op by
# op (some 200 small programs compiled one after another: the README's 64 px image took 10.6 s instead of
# 3.0 s). Inside a trace they are traced into the caller's program as before.
_COMPILED_RENDERERS: dict = {}


def _run(renderer, args, **static):
    """`renderer(*args, **static)`: traced into the caller's program inside a trace, else compiled (once per
    renderer; jit keys on the static values and the input shapes)."""
    if not is_concrete(args):
        return renderer(*args, **static)
    compiled = _COMPILED_RENDERERS.get(renderer)
    if compiled is None:
        compiled = _COMPILED_RENDERERS[renderer] = jit(renderer, static_argnames=tuple(static))
    return compiled(*args, **static)


class _Shading(NamedTuple):
    """What every chunk of tiles shares in `_render_tiled`."""

    camera: Camera
    settings: RenderSettings
    screen: ScreenFaces
    color_table: Array  # the faces' colour table (`_color_inputs`)
    texture_image: Array  # the texture's image, or None
    kernel: Any  # `_kernel(settings, kind, autodiff)`
    config: KernelConfig
    per_pixel: bool  # each pixel keeps its own candidate list (pixel_capacity < tile capacity)
    pair_capacity: int  # candidate faces per pixel
    cutoff_sq: float  # px^2, squared distance beyond which a face does not reach a pixel
    background: Array  # [3], or [tiles, tile^2, 3] pixels in the tile layout
    pixel_background: bool  # the background is per pixel
    with_color: bool
    one_hot: bool  # the kernels take each tile's own rows (`one_hot_rows`)


def _shade_chunk(s: _Shading, chunk_inputs):
    """(the pixels of a chunk of tiles, (pixel overflow, fullest pixel)); chunk_inputs: (tile pixel centres,
    face index and mask per tile[, background pixels])."""
    settings, screen, camera = s.settings, s.screen, s.camera
    chunk_xy, chunk_index, chunk_mask = chunk_inputs[:3]
    chunk_background = chunk_inputs[3] if s.pixel_background else s.background
    tile_table = screen.table[chunk_index]  # [chunk, Kt, D]
    if s.one_hot:
        # The kernels select from each tile's own rows (`aggregate.pair_rows`). Where the tile's list has no
        # face the row is an empty one (not valid, 1 / z = 1, as `screen_faces` gives a dropped face): the
        # face there may hold inf, and the one-hot product's 0 times inf would be NaN.
        keep = chunk_mask[..., None]
        tile_table = jnp.where(keep, tile_table, jnp.asarray(EMPTY_ROW, tile_table.dtype))
        table, color_table = tile_table, jnp.where(keep, s.color_table[chunk_index], 0.0)
    else:
        table, color_table = screen.table, s.color_table
    if s.per_pixel:
        local, pair_mask, overflow, fullest = pixel_candidates(
            tile_table, chunk_mask, chunk_xy, s.cutoff_sq, s.pair_capacity
        )
        # [chunk, P, K]: into the tile's rows, or the faces
        pair_index = local if s.one_hot else jnp.take_along_axis(chunk_index[:, None, :], local, axis=-1)
    else:  # every pixel of a tile takes the tile's whole list
        pair_index = None if s.one_hot else chunk_index[:, None, :]
        pair_mask = chunk_mask[:, None, :]
        overflow, fullest = jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)
    image = s.kernel(
        s.config,
        chunk_xy[..., 0:1],
        chunk_xy[..., 1:2],
        table,
        color_table,
        s.texture_image,
        pair_index,
        pair_mask,
        chunk_background,
        camera.near,
        camera.far,
    )
    with_color = s.with_color
    image = _box_alpha(image, settings, camera.height, chunk_xy, table, pair_index, pair_mask, with_color)
    return image, (overflow, fullest)


def _shade_covered_chunks(s: _Shading, inputs: tuple, tile_counts, chunk: int, dtype):
    """`_shade_chunk` over chunks of `chunk` tiles, tiles with faces first (a stable sort) and chunks of empty
    tiles skipped; the tiles back in their order: ([tiles, tile^2, ...] pixels, (pixel overflow, fullest pixel)
    per chunk)."""
    background, with_color, pixel_background = s.background, s.with_color, s.pixel_background
    shade_chunk = functools.partial(_shade_chunk, s)
    num_tiles, pixels_per_tile = inputs[0].shape[0], inputs[0].shape[1]
    num_chunks = -(-num_tiles // chunk)
    pad = num_chunks * chunk - num_tiles
    order = jnp.argsort(jnp.where(tile_counts > 0, 0, 1), stable=True)
    active = jnp.pad(tile_counts[order] > 0, (0, pad))
    inputs = tuple(jnp.pad(x[order], ((0, pad),) + ((0, 0),) * (x.ndim - 1)) for x in inputs)
    if not pixel_background:
        empty = _empty_image(chunk, pixels_per_tile, background, dtype, with_color)  # a chunk of empty tiles

    def skip_chunk(chunk_inputs):
        zero = jnp.zeros((), jnp.int32)
        # The kernel's dtype (a float64 camera promotes a float32 mesh).
        out_dtype = jax.eval_shape(shade_chunk, chunk_inputs)[0].dtype
        if pixel_background:  # the chunk's own background pixels
            return _empty_image(chunk, pixels_per_tile, chunk_inputs[3], out_dtype, with_color), (zero, zero)
        return empty.astype(out_dtype), (zero, zero)

    def chunk_or_skip(chunk_inputs):
        return jax.lax.cond(chunk_inputs[0][0], shade_chunk, skip_chunk, chunk_inputs[1:])

    def split(x):
        return x.reshape(num_chunks, chunk, *x.shape[1:])

    out, (pixel_overflow, max_per_pixel) = jax.lax.map(
        chunk_or_skip, (split(active), *(split(x) for x in inputs))
    )
    out = out.reshape(num_chunks * chunk, *out.shape[2:])[jnp.argsort(order)]
    return out, (pixel_overflow, max_per_pixel)


def _render_tiled(camera, vertices, faces, colors, lights, background, *, settings, with_color, height,
                  autodiff=False):
    """`render_with_stats` on prepared inputs (`_prepare`); height: the output's (before supersampling)."""
    dtype = vertices.dtype
    num_faces = faces.shape[0]
    if num_faces == 0:
        zero = jnp.zeros((), jnp.int32)
        stats = RenderStats(zero, zero, zero, zero)
        return _finish(_empty_image(camera.height, camera.width, background, dtype, with_color), settings,
                       background, with_color), stats
    tile = settings.tile_size
    tiles_y, tiles_x, tile_xy, tile_rect = tile_layout(camera.width, camera.height, tile)
    screen = screen_faces(camera, vertices, faces, settings.fill_back)
    color_table, kind, texture_image = _color_inputs(colors, lights, vertices, faces, camera, dtype, with_color)
    # A 1% wider cutoff keeps float rounding in the culling tests from dropping a contributing face.
    radius = 1.01 * math.sqrt(settings.cutoff_sq(height))
    tile_capacity = min(settings.tile_capacity, num_faces)
    index, mask, tile_counts = bin_faces(screen, tile_rect, radius, tile_capacity)
    tile_overflow = jnp.sum(jnp.maximum(tile_counts - tile_capacity, 0))
    tile_xy = jnp.asarray(tile_xy, dtype)
    kernel = _kernel(settings, kind, autodiff)
    config = _kernel_config(settings, kind, with_color, height)
    per_pixel = settings.pixel_capacity < tile_capacity
    pair_capacity = settings.pixel_capacity if per_pixel else tile_capacity
    num_tiles, pixels_per_tile = tile_xy.shape[0], tile_xy.shape[1]
    cutoff_sq = radius * radius
    # A per-pixel background travels with its pixels, in the tile layout (and order) of tile_xy; a
    # constant one is shared by all pixels and stays [3].
    pixel_background = background.ndim == 3
    tile_background = tile_pixels(background, tiles_y, tiles_x, tile) if pixel_background else None
    shading = _Shading(camera, settings, screen, color_table, texture_image, kernel, config, per_pixel,
                       pair_capacity, cutoff_sq, background, pixel_background, with_color, one_hot_rows(settings))

    # Tiles go through the kernel a few at a time so that its [tiles, pixels, faces] temporaries stay
    # in cache; XLA on CPU materializes most of them. Tiles with faces come first (a stable sort), and
    # chunks of empty tiles skip the kernel, so the work follows the covered area, not the image's.
    chunk = max(1, min(num_tiles, settings.pairs_per_chunk // (pixels_per_tile * pair_capacity)))
    inputs = (tile_xy, index, mask) + ((tile_background,) if pixel_background else ())
    if chunk == num_tiles:  # one chunk (small images): no loop and no sort, much quicker to compile
        out, (pixel_overflow, max_per_pixel) = _shade_chunk(shading, inputs)
    else:
        out, (pixel_overflow, max_per_pixel) = _shade_covered_chunks(shading, inputs, tile_counts, chunk, dtype)
    channels = out.shape[2:]
    out = out.reshape(tiles_y, tiles_x, tile, tile, *channels).swapaxes(1, 2)
    out = out.reshape(tiles_y * tile, tiles_x * tile, *channels)[: camera.height, : camera.width]
    stats = RenderStats(tile_overflow, jnp.sum(pixel_overflow), jnp.max(tile_counts), jnp.max(max_per_pixel))
    return _finish(out, settings, background, with_color), stats


def render(
    camera: Camera,
    vertices,
    faces,
    colors=None,
    *,
    lights: Lights | None = None,
    background=None,
    settings: RenderSettings = RenderSettings(),
    autodiff: bool = False,
):
    """Soft-rasterized RGBA image [H, W, 4] of a triangle mesh.

    Called directly it runs as one compiled program (compiled once per settings, image size and input
    shapes); inside `jit`, `grad` or `vmap` it is traced into the caller's program (settings and the
    camera's image size are static).
    Faces beyond a tile's capacity are dropped silently; check with `render_with_stats`. Non-finite
    vertices raise when concrete; traced ones (a simulation that blew up inside a loss) give a NaN image.

    Args:
        camera: `Camera` (H, W from it).
        vertices: [N, 3] m, world positions.
        faces: [F, 3] int, vertex indices of each face.
        colors: None (white), a registered appearance's record (`FaceColors`, `VertexColors`, `Texture`) or [F | N, 3].
        lights: `Lights` or None (unlit).
        background: RGB [3] or an image [H, W, 3] behind the mesh (default black; alpha 0 there); an image
            blends each pixel with its own background pixel.
        settings: the rasterizer's `RenderSettings`.
        autodiff: the per-pixel kernel differentiated by JAX's own rules instead of its hand-written VJP, so
            that forward mode (`jax.jvp`, a Levenberg-Marquardt Jacobian) works too; the same image, a slower
            gradient.

    Returns:
        [H, W, 4] RGBA.
    """
    with accurate_products():
        image, _ = render_with_stats(
            camera, vertices, faces, colors, lights=lights, background=background, settings=settings,
            autodiff=autodiff,
        )
        return image


def silhouette(camera: Camera, vertices, faces, *, settings: RenderSettings = RenderSettings()):
    """Soft coverage (alpha) [H, W] of a mesh; cheaper than `render` (no depth or color).

    Args:
        camera: `Camera` (H, W from it).
        vertices: [N, 3] m, world positions.
        faces: [F, 3] int, vertex indices of each face.
        settings: the rasterizer's `RenderSettings`.

    Returns:
        [H, W] alpha.
    """
    image, _ = render_with_stats(camera, vertices, faces, settings=settings, with_color=False)
    return image


def render_video(
    camera: Camera,
    frames,
    faces,
    colors=None,
    *,
    lights: Lights | None = None,
    background=None,
    settings: RenderSettings = RenderSettings(),
):
    """RGBA video [T, H, W, 4] of vertex positions `frames [T, N, 3]` (same faces, colors, camera).

    Frames are rendered one after another (`lax.map`). A gradient keeps each frame's residuals (the
    per-pixel face lists and results, a few MB per frame); with `settings.checkpoint_frames` each frame
    is recomputed in the backward pass instead (`jax.checkpoint`), so that memory is one frame's.

    Args:
        camera: `Camera` (H, W from it).
        frames: [T, N, 3] m, world positions of each frame.
        faces: [F, 3] int, vertex indices of each face.
        colors: as for `render`.
        lights: `Lights` or None (unlit).
        background: RGB [3] or an image [H, W, 3] behind the mesh, the same for every frame (a static scene).
        settings: the rasterizer's `RenderSettings`.

    Returns:
        [T, H, W, 4] RGBA.
    """
    with accurate_products():
        frames = jnp.asarray(frames)
        if frames.ndim != 3 or frames.shape[-1] != 3:
            raise ValueError(f"frames must be [T, N, 3], got shape {frames.shape}")

        def one_frame(vertices):
            return render(camera, vertices, faces, colors, lights=lights, background=background, settings=settings)

        if settings.checkpoint_frames:
            one_frame = jax.checkpoint(one_frame)

        return jax.lax.map(one_frame, frames)


def render_dense(
    camera: Camera,
    vertices,
    faces,
    colors=None,
    *,
    lights: Lights | None = None,
    background=None,
    settings: RenderSettings = RenderSettings(),
    with_color: bool = True,
):
    """Reference renderer: every pixel against every face, differentiated by plain autodiff.

    Same model and cutoff as `render`; tiling settings are ignored. Memory is H x W x F: small tests only.

    Args:
        camera: `Camera` (H, W from it).
        vertices: [N, 3] m, world positions.
        faces: [F, 3] int, vertex indices of each face.
        colors: None (white), a registered appearance's record (`FaceColors`, `VertexColors`, `Texture`) or [F | N, 3].
        lights: `Lights` or None (unlit).
        background: RGB [3] or an image [H, W, 3] behind the mesh (default black).
        settings: the rasterizer's `RenderSettings`.
        with_color: False: alpha only.

    Returns:
        [H, W, 4] RGBA, or [H, W] alpha without color.
    """
    with accurate_products():
        height = camera.height
        camera, vertices, faces, colors, background = _prepare(camera, vertices, faces, colors, background, settings)
        image = _run(_render_dense, (camera, vertices, faces, colors, lights, background), settings=settings,
                     with_color=with_color, height=height)
        return _nan_unless_finite(image, vertices)


def _render_dense(camera, vertices, faces, colors, lights, background, *, settings, with_color, height):
    """`render_dense` on prepared inputs (`_prepare`)."""
    dtype = vertices.dtype
    if faces.shape[0] == 0:
        return _finish(_empty_image(camera.height, camera.width, background, dtype, with_color), settings,
                       background, with_color)
    xy = jnp.asarray(pixel_centers(camera.width, camera.height, np.float64), dtype).reshape(-1, 2)
    if background.ndim == 3:  # per pixel, in the order of xy
        background = background.reshape(-1, 3)
    screen = screen_faces(camera, vertices, faces, settings.fill_back)
    color_table, kind, texture_image = _color_inputs(colors, lights, vertices, faces, camera, dtype, with_color)
    kernel = coverage_model(settings.coverage).kernel or aggregate_autodiff
    out = kernel(
        _kernel_config(settings, kind, with_color, height),
        xy[:, 0:1],
        xy[:, 1:2],
        screen.table,
        color_table,
        texture_image,
        jnp.arange(faces.shape[0])[None],
        jnp.ones((1, faces.shape[0]), bool),
        background,
        camera.near,
        camera.far,
    )
    out = _box_alpha(out, settings, camera.height, xy, screen.table, jnp.arange(faces.shape[0])[None],
                     jnp.ones((1, faces.shape[0]), bool), with_color)
    image_background = background.reshape(camera.height, camera.width, 3) if background.ndim == 2 else background
    return _finish(out.reshape(camera.height, camera.width, *out.shape[1:]), settings, image_background, with_color)


def suggest_capacities(
    camera, frames, faces, *, settings: RenderSettings = RenderSettings(), multiple: int = 8
) -> RenderSettings:
    """`settings` with the smallest tile and pixel capacities (rounded up to `multiple`) that drop no face
    on example `frames [T, N, 3]` (or one [N, 3] frame) seen by `camera` (a `Camera`, or a sequence of
    cameras of one image size: the capacities then serve every view). Host-side: run it once on
    representative frames (e.g. a first simulation), then keep the settings fixed so that nothing
    recompiles. Each measurement is compiled once, whatever the number of cameras and frames.

    Args:
        camera: a `Camera`, or a sequence of cameras of one image size.
        frames: [T, N, 3] or [N, 3] m, example world positions.
        faces: [F, 3] int, vertex indices of each face.
        settings: the `RenderSettings` to start from.
        multiple: round the capacities up to a multiple of this.

    Returns:
        the `RenderSettings` with `tile_capacity` and `pixel_capacity` set.
    """
    frames = np.asarray(frames)
    if frames.ndim == 2:
        frames = frames[None]
    faces = jnp.asarray(faces, jnp.int32)
    cameras = (camera,) if isinstance(camera, Camera) else tuple(camera)
    if not cameras or len({(c.width, c.height) for c in cameras}) != 1:
        raise ValueError("suggest_capacities: give a camera, or cameras of one image size")

    def rounded(count):
        return max(multiple, -(-int(count) // multiple) * multiple)

    height = cameras[0].height

    def binning(cam):
        return with_image_size(cam, 2 * cam.width, 2 * cam.height) if settings.supersample == 2 else cam

    _, _, _, tile_rect = tile_layout(binning(cameras[0]).width, binning(cameras[0]).height, settings.tile_size)
    radius = 1.01 * math.sqrt(settings.cutoff_sq(height))

    # faces and the camera are arguments, not constants folded into the programs (big meshes).
    @jit
    def fullest_tile(cam, vertices, faces):
        screen = screen_faces(cam, vertices, faces, settings.fill_back)
        return jnp.max(jnp.sum(tile_overlap(screen.table, screen.valid, tile_rect, radius), axis=1))

    tile_capacity = rounded(max(int(fullest_tile(binning(c), jnp.asarray(f), faces)) for c in cameras for f in frames))
    # With no tile overflowing, the per-pixel count is exact.
    probe = dataclasses.replace(settings, tile_capacity=tile_capacity, pixel_capacity=1)
    fullest_pixel = jit(
        lambda cam, v, f: render_with_stats(cam, v, f, settings=probe, with_color=False)[1].max_faces_per_pixel
    )
    pixel_capacity = rounded(max(int(fullest_pixel(c, jnp.asarray(f), faces)) for c in cameras for f in frames))
    return dataclasses.replace(settings, tile_capacity=tile_capacity, pixel_capacity=pixel_capacity)
