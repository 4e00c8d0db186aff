"""Coverage (edge) models of the rasterizer, `RenderSettings.coverage`, registered by name.

Each model says what differs between them: how far outside a face a pixel still takes part (`cutoff`),
whether the alpha is replaced by the exact area coverage of each pixel's square (`area_alpha`,
`coverage.area_coverage`) and the colour then blended over the background by it (`blends_background`: the
extra pass of `rasterize`, and the reason `sysid.experiment.render_frames` need not `composite`), which
per-pixel kernel it runs (`kernel`: DIB-R's own, or None for SoftRas's aggregation), and which model
`FitConfig.edge_model = "auto"` tries when the loss left lies on the outlines (`alternative`).

- "softras": alpha = 1 - prod_j (1 - D_j) (SoftRas and PyTorch3D's); outside pixels take part while
  D_j >= dist_eps, d^2 < sigma ln(1 / dist_eps - 1).
- "box": alpha is the exact fraction of each pixel's square that the mesh covers, as a camera's sensor
  integrates it (see `coverage.py`: no seams where faces meet), and the colour is blended over the
  background by it. "box" is the one to compare with real footage; its gradient lives on the pixels an
  outline crosses. The cutoff reaches at least the pixel square's reach (3/4 of its side).
- "dibr" (DIB-R, `dibr.py`): covered pixels take the front face's attributes interpolated exactly (a hard
  z-buffer), other pixels the background with DIB-R's soft silhouette alpha, 1 - prod_j (1 -
  exp(-d_j^2 / sigma)); geometry learns from the alpha channel and from inside the faces;
  d^2 < sigma ln(1 / dist_eps).

`composite` re-blends the colour of a model that does not blend it itself (SoftRas's, DIB-R's) as a camera
would.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

import jax.numpy as jnp

from gradsim_jax.render.dibr import dibr_aggregate


def softras_cutoff(sigma: float, dist_eps: float, footprint: float, height: int) -> float:
    """SoftRas's squared cutoff: sigmoid(-d^2 / sigma) < dist_eps beyond it.

    Args:
        sigma: screen units^2, the edge sharpness.
        dist_eps: the coverage below which a face is skipped.
        footprint: pixels, the side of a pixel's square (unused).
        height: pixels, the image height (unused).

    Returns:
        screen units^2.
    """
    return sigma * math.log(1.0 / dist_eps - 1.0)


def box_cutoff(sigma: float, dist_eps: float, footprint: float, height: int) -> float:
    """The box model's squared cutoff: SoftRas's, and at least the reach of the pixel's square (3/4 of its side).

    Args:
        sigma: screen units^2, the edge sharpness.
        dist_eps: the coverage below which a face is skipped.
        footprint: pixels, the side of the square each pixel integrates.
        height: pixels, the image height (a pixel is 2 / height screen units).

    Returns:
        screen units^2.
    """
    reach = 0.75 * footprint * 2.0 / height
    return max(softras_cutoff(sigma, dist_eps, footprint, height), reach * reach)


def dibr_cutoff(sigma: float, dist_eps: float, footprint: float, height: int) -> float:
    """DIB-R's squared cutoff: exp(-d^2 / sigma) < dist_eps beyond it.

    Args:
        sigma: screen units^2, the edge sharpness.
        dist_eps: the coverage below which a face is skipped.
        footprint: pixels, the side of a pixel's square (unused).
        height: pixels, the image height (unused).

    Returns:
        screen units^2.
    """
    return sigma * math.log(1.0 / dist_eps)


@dataclasses.dataclass(frozen=True)
class CoverageModel:
    """A coverage (edge) model (see the module docstring).

    Attributes:
        name: the registered name (`RenderSettings.coverage`).
        cutoff: (sigma, dist_eps, footprint, height) -> the squared distance beyond which an outside pixel
            takes no part (`RenderSettings.cutoff_sq`).
        area_alpha: whether the alpha is the exact area coverage of each pixel (`coverage.area_coverage`).
        blends_background: whether the renderer blends the colour over the background by that alpha.
        kernel: the model's own per-pixel kernel (`aggregate.aggregate`'s signature), or None for SoftRas's.
        alternative: the model `FitConfig.edge_model = "auto"` tries instead.
    """

    name: str
    cutoff: Callable[[float, float, float, int], float]
    area_alpha: bool
    blends_background: bool
    kernel: Optional[Callable]
    alternative: str


_MODELS = (
    CoverageModel("softras", softras_cutoff, area_alpha=False, blends_background=False, kernel=None,
                  alternative="box"),
    CoverageModel("box", box_cutoff, area_alpha=True, blends_background=True, kernel=None, alternative="softras"),
    CoverageModel("dibr", dibr_cutoff, area_alpha=False, blends_background=False, kernel=dibr_aggregate,
                  alternative="box"),
)

#: The registered coverage models by name.
COVERAGES = {model.name: model for model in _MODELS}
#: The models of `RenderSettings.coverage`: SoftRas, the exact box coverage of each pixel, DIB-R.
COVERAGE_MODELS = tuple(COVERAGES)


def coverage_model(name: str) -> CoverageModel:
    """The registered coverage model `name`.

    Args:
        name: one of `COVERAGE_MODELS`.

    Returns:
        the model; ValueError naming the registered ones for another name.
    """
    model = COVERAGES.get(name)
    if model is None:
        models = ", ".join(map(repr, COVERAGE_MODELS))
        raise ValueError(f"coverage must be one of {models}, got {name!r}")
    return model


def composite(image, background):
    """Re-blend a rendered image [..., H, W, 4] over `background` (RGB [3] or [H, W, 3]) by its coverage:
    rgb = c C + (1 - c) B with c = min(A + max(A - 1/2, 0), 1); alpha A unchanged.

    SoftRas's colour softmax lets a face's colour reach as far as its coverage's cutoff (about a pixel), so
    its RGB outline is wider than its alpha outline and its colour is a near-step function of the vertices
    (no gradient); a camera's pixel instead mixes object and background by the covered fraction. Where any
    face contributes, the softmax colour is the faces' colour C (the background's weight is about
    exp(-1 / gamma) smaller), so blending it by a coverage gives edges centred on the true outline, with
    gradients. SoftRas's alpha is 1/2 on an outline but dips to 3/4 along an edge two faces share; the
    coverage c equals A outside an outline (A <= 1/2) and closes those seams (c = 1 for A >= 3/4).
    Differentiable.

    Args:
        image: [..., H, W, 4], a rendered RGBA image or video.
        background: RGB [3] or [H, W, 3].

    Returns:
        [..., H, W, 4].
    """
    alpha = image[..., 3:4]
    coverage = jnp.minimum(alpha + jnp.maximum(alpha - 0.5, 0.0), 1.0)
    bg = jnp.asarray(background, image.dtype)
    rgb = coverage * image[..., :3] + (1.0 - coverage) * bg
    return jnp.concatenate([rgb, alpha], axis=-1)


__all__ = ["COVERAGES", "COVERAGE_MODELS", "CoverageModel", "box_cutoff", "composite", "coverage_model",
           "dibr_cutoff", "softras_cutoff"]
