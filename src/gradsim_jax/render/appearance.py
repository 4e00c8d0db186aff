"""Appearance models: how a mesh's colours reach the rasterizer's per-pixel aggregation, registered by name.

An appearance model takes the colours record a caller passes to `render` (`shading.FaceColors`,
`VertexColors`, `Texture`, or None for an uncoloured mesh) and supplies what the aggregation reads:

- `color_table`: per-face colour columns [F, C], the face's light factor folded in;
- `texture_image`: an image the aggregation samples, or None;
- `pair_colors`: the colour of each pixel-face pair [..., K, 3] from its face's columns and the pair's
  perspective-correct barycentrics (inside `aggregate.pair_colors`, the SoftRas and DIB-R kernels alike);
- `checks`: its shape checks and the arrays whose values the renderer checks;
- which aggregation it needs: `hand_vjp` (SoftRas's hand-written VJP differentiates it; else the kernel
  differentiated by JAX's autodiff) and, for the VJP, `per_corner` (columns per face corner interpolated
  by the barycentrics: the VJP's vertex rule; else one colour per face).

The registered models are the ones `shading.py` describes: "face" (one albedo per face; also an uncoloured
mesh, white), "vertex" (per-vertex albedo interpolated) and "texture" (an image sampled at interpolated uv).
A new appearance (e.g. a lit, textured, shadowed one) is one subclass of `Appearance` with its colours
record, and one entry in `_MODELS`. The kernel's `KernelConfig.color_kind` is the model's name.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Optional

import jax.numpy as jnp

from gradsim_jax.render.shading import FaceColors, Texture, VertexColors, sample_bilinear

Array = Any


@dataclasses.dataclass(frozen=True)
class Appearance(abc.ABC):
    """An appearance model (see the module docstring).

    Attributes:
        name: the registered name; also `KernelConfig.color_kind`.
        colors_type: the colours record it renders (None: none).
        hand_vjp: whether `aggregate.aggregate`'s hand-written VJP differentiates it (else
            `aggregate_autodiff`); the VJP knows two column layouts, the face's RGB [3] and the corners'
            RGB [9] interpolated by the barycentrics, so a new model that sets it must use one of them.
        per_corner: whether its columns are per face corner, interpolated by the barycentrics (the VJP's
            vertex rule), rather than one colour per face.
    """

    name: str
    colors_type: Optional[type]
    hand_vjp: bool
    per_corner: bool

    @abc.abstractmethod
    def color_table(self, colors, light: Array, faces: Array, dtype) -> Array:
        """Per-face colour columns.

        Args:
            colors: the colours record (`colors_type`, or None for an uncoloured mesh).
            light: [F, 3], each face's light factor (`shading.face_light_factor`).
            faces: [F, 3] int32, vertex indices of each face.
            dtype: the floating dtype of the render.

        Returns:
            [F, C] colour columns, the light folded in.
        """

    @abc.abstractmethod
    def pair_colors(self, corner: Array, texture_image: Optional[Array], bary: list) -> Array:
        """Colour of each pixel-face pair.

        Args:
            corner: [..., P or 1, K, C], the pair's face's colour columns (`color_table` rows).
            texture_image: [Ht, Wt, 3] or None, `texture_image`'s result.
            bary: three [..., P or 1, K] perspective-correct barycentrics of the pair's pixel.

        Returns:
            [..., P or 1, K, 3] RGB.
        """

    def texture_image(self, colors, dtype) -> Optional[Array]:
        """The image the aggregation samples.

        Args:
            colors: the colours record.
            dtype: the floating dtype of the render.

        Returns:
            [Ht, Wt, 3] or None (none: the default).
        """
        return None

    def checks(self, colors, num_vertices: int, num_faces: int) -> tuple:
        """Check the colours' shapes (ValueError naming the field) and list the arrays whose values to check.

        Args:
            colors: the colours record.
            num_vertices: N, the mesh's vertex count.
            num_faces: F, the mesh's face count.

        Returns:
            ((name, array, unit), ...): each array to check for finite values (and, with unit, values in
            [0, 1]), with the name an error gives it.
        """
        return ()


@dataclasses.dataclass(frozen=True)
class FaceAppearance(Appearance):
    """One albedo per face (`FaceColors`), or white for an uncoloured mesh: the face's colour, lit."""

    def color_table(self, colors, light, faces, dtype):
        """Per-face colour columns [F, 3]: the albedo times the light (the light alone without colours).

        Args:
            colors: FaceColors or None.
            light: [F, 3], each face's light factor.
            faces: [F, 3] int32, vertex indices of each face.
            dtype: the floating dtype of the render.

        Returns:
            [F, 3] RGB.
        """
        if colors is None:
            return light
        return jnp.asarray(colors.rgb, dtype) * light

    def pair_colors(self, corner, texture_image, bary):
        """The face's colour, the same at every pixel.

        Args:
            corner: [..., P or 1, K, 3], the pair's face's colour.
            texture_image: unused (None).
            bary: unused.

        Returns:
            [..., P or 1, K, 3] RGB.
        """
        return corner

    def checks(self, colors, num_vertices, num_faces):
        """FaceColors.rgb must be [F, 3], in [0, 1].

        Args:
            colors: FaceColors or None.
            num_vertices: N, the mesh's vertex count.
            num_faces: F, the mesh's face count.

        Returns:
            the arrays to check (see `Appearance.checks`).
        """
        if colors is None:
            return ()
        if colors.rgb.shape != (num_faces, 3):
            raise ValueError(f"FaceColors.rgb must be [{num_faces}, 3], got {colors.rgb.shape}")
        return (("FaceColors.rgb", colors.rgb, True),)


@dataclasses.dataclass(frozen=True)
class VertexAppearance(Appearance):
    """One albedo per vertex (`VertexColors`), interpolated with perspective-correct barycentrics."""

    def color_table(self, colors, light, faces, dtype):
        """Per-face columns [F, 9]: the three corners' albedo times the face's light.

        Args:
            colors: VertexColors.
            light: [F, 3], each face's light factor.
            faces: [F, 3] int32, vertex indices of each face.
            dtype: the floating dtype of the render.

        Returns:
            [F, 9], corner-major RGB.
        """
        per_corner = jnp.asarray(colors.rgb, dtype)[faces] * light[:, None, :]
        return per_corner.reshape(faces.shape[0], 9)

    def pair_colors(self, corner, texture_image, bary):
        """The corners' colours weighted by the barycentrics.

        Args:
            corner: [..., P or 1, K, 9], the pair's face's corner colours.
            texture_image: unused (None).
            bary: three [..., P or 1, K] perspective-correct barycentrics.

        Returns:
            [..., P or 1, K, 3] RGB.
        """
        return sum(bary[i][..., None] * corner[..., 3 * i : 3 * i + 3] for i in range(3))

    def checks(self, colors, num_vertices, num_faces):
        """VertexColors.rgb must be [N, 3], in [0, 1].

        Args:
            colors: VertexColors.
            num_vertices: N, the mesh's vertex count.
            num_faces: F, the mesh's face count.

        Returns:
            the arrays to check (see `Appearance.checks`).
        """
        if colors.rgb.shape != (num_vertices, 3):
            raise ValueError(f"VertexColors.rgb must be [{num_vertices}, 3], got {colors.rgb.shape}")
        return (("VertexColors.rgb", colors.rgb, True),)


@dataclasses.dataclass(frozen=True)
class TextureAppearance(Appearance):
    """An image (`Texture`) sampled bilinearly at the interpolated uv, times the face's light."""

    def color_table(self, colors, light, faces, dtype):
        """Per-face columns [F, 9]: the three corners' uv, then the face's light factor.

        Args:
            colors: Texture.
            light: [F, 3], each face's light factor.
            faces: [F, 3] int32, vertex indices of each face.
            dtype: the floating dtype of the render.

        Returns:
            [F, 9].
        """
        uv = jnp.asarray(colors.uv, dtype)
        if uv.ndim == 2:
            uv = uv[faces]
        return jnp.concatenate([uv.reshape(faces.shape[0], 6), light], axis=1)

    def texture_image(self, colors, dtype):
        """The texture's image.

        Args:
            colors: Texture.
            dtype: the floating dtype of the render.

        Returns:
            [Ht, Wt, 3].
        """
        return jnp.asarray(colors.image, dtype)

    def pair_colors(self, corner, texture_image, bary):
        """The texture at the barycentric-weighted uv, times the face's light.

        Args:
            corner: [..., P or 1, K, 9], the pair's face's corner uv and light.
            texture_image: [Ht, Wt, 3], the texture.
            bary: three [..., P or 1, K] perspective-correct barycentrics.

        Returns:
            [..., P or 1, K, 3] RGB.
        """
        uv = sum(bary[i][..., None] * corner[..., 2 * i : 2 * i + 2] for i in range(3))
        return sample_bilinear(texture_image, uv) * corner[..., 6:9]

    def checks(self, colors, num_vertices, num_faces):
        """Texture.image must be [Ht, Wt, 3] in [0, 1], Texture.uv [N, 2] or [F, 3, 2], finite.

        Args:
            colors: Texture.
            num_vertices: N, the mesh's vertex count.
            num_faces: F, the mesh's face count.

        Returns:
            the arrays to check (see `Appearance.checks`).
        """
        if colors.image.ndim != 3 or colors.image.shape[-1] != 3:
            raise ValueError(f"Texture.image must be [Ht, Wt, 3], got {colors.image.shape}")
        if colors.uv.shape not in ((num_vertices, 2), (num_faces, 3, 2)):
            raise ValueError(f"Texture.uv must be [{num_vertices}, 2] or [{num_faces}, 3, 2], got {colors.uv.shape}")
        return (("Texture.image", colors.image, True), ("Texture.uv", colors.uv, False))


_MODELS = (
    FaceAppearance(name="face", colors_type=FaceColors, hand_vjp=True, per_corner=False),
    VertexAppearance(name="vertex", colors_type=VertexColors, hand_vjp=True, per_corner=True),
    TextureAppearance(name="texture", colors_type=Texture, hand_vjp=False, per_corner=True),
)

#: The registered appearance models by name.
APPEARANCES = {model.name: model for model in _MODELS}
#: Their names, in registration order.
APPEARANCE_MODELS = tuple(APPEARANCES)
#: The colours records they render (for `isinstance`).
COLOR_TYPES = tuple(model.colors_type for model in _MODELS if model.colors_type is not None)


def appearance(name: str) -> Appearance:
    """The registered appearance model `name`.

    Args:
        name: one of `APPEARANCE_MODELS`.

    Returns:
        the model; ValueError naming the registered ones for another name.
    """
    model = APPEARANCES.get(name)
    if model is None:
        raise ValueError(f"unknown appearance {name!r}; choose from {APPEARANCE_MODELS}")
    return model


def appearance_of(colors) -> Appearance:
    """The appearance model that renders a colours record (an uncoloured mesh: "face", white).

    Args:
        colors: FaceColors, VertexColors, Texture (any registered `colors_type`) or None.

    Returns:
        the model; TypeError for an unsupported record.
    """
    if colors is None:
        return APPEARANCES["face"]
    for model in _MODELS:
        if model.colors_type is not None and isinstance(colors, model.colors_type):
            return model
    raise TypeError(f"unsupported colors {type(colors).__name__}")


def as_colors(colors, num_vertices: int, num_faces: int):
    """Wrap a bare [F, 3] or [N, 3] array as FaceColors / VertexColors (ambiguous when N == F).

    Args:
        colors: None, a colours record (`appearance.COLOR_TYPES`), or an [F, 3] / [N, 3] array.
        num_vertices: N, the mesh's vertex count.
        num_faces: F, the mesh's face count.

    Returns:
        None or a colours record.
    """
    if colors is None or isinstance(colors, COLOR_TYPES):
        return colors
    colors = jnp.asarray(colors)
    if colors.ndim != 2 or colors.shape[-1] != 3:
        raise ValueError(f"colors must be [F, 3] or [N, 3], got shape {colors.shape}")
    if num_vertices == num_faces:
        raise ValueError("a bare color array is ambiguous when N == F: wrap it in FaceColors or VertexColors")
    if colors.shape[0] == num_faces:
        return FaceColors(colors)
    if colors.shape[0] == num_vertices:
        return VertexColors(colors)
    raise ValueError(f"colors has {colors.shape[0]} rows; expected F={num_faces} or N={num_vertices}")


__all__ = [
    "APPEARANCES",
    "APPEARANCE_MODELS",
    "COLOR_TYPES",
    "Appearance",
    "FaceAppearance",
    "TextureAppearance",
    "VertexAppearance",
    "appearance",
    "appearance_of",
    "as_colors",
]
