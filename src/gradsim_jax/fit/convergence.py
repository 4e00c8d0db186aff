"""Did a fit converge? The final image loss against the initial one and against the noise floor of the
target, the gradient norm, and the size of the last parameter steps, turned into one verdict with reasons.

Noise floor: the loss a perfect model would still have, from the target's own pixel noise. The noise's
standard deviation per channel comes from the Laplacian difference of Immerkaer ("Fast Noise Variance
Estimation", CVIU 1996), N = [[1, -2, 1], [-2, 4, -2], [1, -2, 1]], which cancels smooth image content and
has standard deviation 6 sigma on white noise; its median absolute value (a robust scale, 0.6745 of a
standard deviation) rather than its mean keeps edges and textures, which cover few pixels, from passing for
noise. 8-bit quantization adds (1/255)^2 / 12. The floor of a mean squared error is the mean noise variance.

Verdict: a fit has converged when it stopped moving (the free quantities changed by less than
`STEP_TOL`, relatively, over the last tenth of the iterations, at least two entries; a fit at or below the
noise floor counts as stopped, its last steps chase noise) and what is left of the loss is explained: at most `FLOOR_FACTOR` times the noise floor (an imperfect renderer, soft edges against
a hard-edged video, leaves a little more than the noise), or at most `RATIO_TOL` of the initial loss.
Anything else is reported as not converged with what to try. A fit converged by the ratio rule alone (the
loss above `FLOOR_FACTOR` times the floor) gets a caution in its advice: against a rendered target that is a
local minimum.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from gradsim_jax.fit.image_losses import IMAGE_LOSSES
from gradsim_jax.render.coverage_models import COVERAGES

FLOOR_FACTOR = 4.0
RATIO_TOL = 0.02
STEP_TOL = 1e-3
_QUANTIZATION = (1.0 / 255.0) ** 2 / 12.0


def noise_sigma(frames) -> np.ndarray:
    """Robust estimate of the noise standard deviation per channel of frames [T, H, W, C] (in [0, 1]).

    Args:
        frames: [T, H, W, C] in [0, 1].

    Returns:
        [C], the standard deviation of each channel's noise (zeros for frames under 3 x 3 pixels).
    """
    v = np.asarray(frames, np.float64)
    if v.shape[1] < 3 or v.shape[2] < 3:
        return np.zeros(v.shape[-1])
    lap = (v[:, :-2, :-2] - 2 * v[:, :-2, 1:-1] + v[:, :-2, 2:]
           - 2 * v[:, 1:-1, :-2] + 4 * v[:, 1:-1, 1:-1] - 2 * v[:, 1:-1, 2:]
           + v[:, 2:, :-2] - 2 * v[:, 2:, 1:-1] + v[:, 2:, 2:])
    return np.median(np.abs(lap).reshape(-1, v.shape[-1]), axis=0) / (0.6745 * 6.0)


def noise_floor(frames, channels=slice(None)) -> float:
    """Mean squared error a perfect model would have against target frames [T, H, W, C] in the loss's
    `channels` (e.g. slice(0, 3) for rgb, slice(3, 4) for silhouettes), quantization included.

    Args:
        frames: [T, H, W, C] target frames in [0, 1].
        channels: the slice of the last axis the loss compares (`fit.image_losses.ImageLoss.channels`).

    Returns:
        the floor, a mean squared error.
    """
    sigma = noise_sigma(np.asarray(frames)[..., channels])
    return float(np.mean(sigma ** 2) + _QUANTIZATION)


@dataclasses.dataclass(frozen=True)
class Convergence:
    """The verdict and the numbers behind it (see the module docstring)."""

    converged: bool
    initial_loss: float
    final_loss: float
    noise_floor: float
    grad_norm: float
    last_step: float
    reasons: tuple[str, ...]
    advice: tuple[str, ...]

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["reasons"], out["advice"] = list(self.reasons), list(self.advice)
        out["loss_ratio"] = self.final_loss / self.initial_loss if self.initial_loss > 0 else None
        out["floor_ratio"] = self.final_loss / self.noise_floor if self.noise_floor > 0 else None
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in out.items()}


def relative_last_step(history_params: dict, fraction: float = 0.1) -> float:
    """Largest relative change of any free quantity over the last `fraction` of its history (>= 2 entries):
    |x_end - x_start| / max(|x_end|, tiny) (norms for arrays); inf with fewer than two entries.

    Args:
        history_params: {name: [value per logged iteration]}, the fit's history of each free quantity.
        fraction: the share of the history looked back over.

    Returns:
        the largest relative change.
    """
    worst = 0.0
    for values in history_params.values():
        if len(values) < 2:
            return float("inf")
        back = max(2, int(np.ceil(fraction * len(values))))
        a, b = np.asarray(values[-back], np.float64), np.asarray(values[-1], np.float64)
        worst = max(worst, float(np.linalg.norm(b - a) / max(np.linalg.norm(b), 1e-300)))
    return worst


#: The loss left lies on the outlines when at least this share of it is there, on at most a third as large a
#: share of the pixels: then the advice names the edge model.
EDGE_SHARE = 0.5


def on_outlines(edges) -> bool:
    """Whether the loss left lies on the target's outlines (`edges`: `sysid.edges.edge_residual`'s numbers): at
    least EDGE_SHARE of it, on at most a third as large a share of the pixels.

    Args:
        edges: `edge_residual`'s dict ("residual_share", "pixel_share"), or None / {}.

    Returns:
        True when the loss left lies on the outlines.
    """
    if not edges or not edges.get("pixel_share"):
        return False
    share, pixels = edges["residual_share"], edges["pixel_share"]
    return share >= EDGE_SHARE and share >= 3.0 * pixels


def edge_advice(edges) -> list:
    """What to try when the loss left lies on the target's outlines (`on_outlines`), following from what the fit
    measured of them. `edges`: `sysid.edges.edge_residual`'s numbers ("coverage", "blur" applied or None,
    "edge_model" and "blur_mode" of the fit's config) and, where `FitConfig.edge_model` "auto" measured the
    other coverage at the estimate, "tried" (its record: "from", "to", "loss", "loss_at_estimate", "switched",
    "final_loss"). The advice names the other coverage only when nothing measured it; once measured, it
    reports the numbers and points past the edge model; with the edge model fixed (as --true sets it: that
    target is this renderer's, edges and all) it says how to measure it and what outlines mean on a rendered
    target.

    Args:
        edges: the dict above, or None / {}.

    Returns:
        [str], the advice (empty unless the loss left lies on the outlines).
    """
    if not on_outlines(edges):
        return []
    share, pixels = edges["residual_share"], edges["pixel_share"]
    where = f"{100 * share:.0f} % of the loss left lies on the outlines ({100 * pixels:.0f} % of the pixels)"
    model = edges.get("coverage", "box")
    known = COVERAGES.get(model)
    other = known.alternative if known is not None else "box"  # the model `FitConfig.edge_model` "auto" tries
    blur, blur_mode = edges.get("blur"), edges.get("blur_mode", "auto")
    elsewhere = ("the motion, the shape or the camera differs there: check that the rendered frame 0 overlays the "
                 "target's")
    blur_tip = ('let the fit estimate a Gaussian blur of the edges ([fit] blur = "fit", --blur fit)' if blur is None
                else f"the blur ({blur:.2g} px) did not explain them")
    tried = edges.get("tried")
    if tried is not None:
        refit = "" if tried.get("final_loss") is None else f", {tried['final_loss']:.3g} once refitted with it"
        measured = (f'[render] coverage = "{tried["to"]}" was measured at the estimate: '
                    f'{tried["loss_at_estimate"]:.3g} against "{tried["from"]}"\'s {tried["loss"]:.3g}{refit}')
        more = f"{blur_tip}; if that does not," if blur is None else f"nor did the blur ({blur:.2g} px), so"
        return [f"{where}; {measured}, so the edge model does not explain them: {more} {elsewhere}"]
    now = f'[render] coverage = "{model}"' + ("" if blur is None else f", blur {blur:.2g} px")
    if edges.get("edge_model") == "fixed":
        unmeasured = (f"the edge model is fixed ({now}) and nothing measured the other: if the target is not this "
                      f'renderer\'s, --edge-model auto measures coverage "{other}" at the estimate and continues '
                      "with it if it explains the video better")
        if blur is None and blur_mode == "off":
            unmeasured += ", and --blur auto measures the edges' blur"
        return [f"{where}; {unmeasured}; on a target this renderer drew (--true, the demos) the edges are its own, "
                f"so {elsewhere}"]
    return [f"{where}: the target's edges are not the renderer's ({now}); try [render] coverage = \"{other}\" "
            f"(another soft rasterizer's edges, e.g. PyTorch3D's, are SoftRas's; a camera's are \"box\"), or {blur_tip}"]


def appearance_advice(edges) -> list:
    """What to try when the loss left lies inside the object (at least EDGE_SHARE of it inside the target's
    silhouette, off its outlines, on at most a third as large a share of the pixels): its colours are not the
    render's. `edges`: `sysid.edges.edge_residual`'s numbers ("inside_share", "inside_pixel_share",
    "appearance": whether the fit estimated one).

    Args:
        edges: the dict above, or None / {}.

    Returns:
        [str], the advice (empty unless the loss left lies inside the object).
    """
    if not edges or not edges.get("inside_pixel_share"):
        return []
    share, pixels = edges.get("inside_share", 0.0), edges["inside_pixel_share"]
    if not (share >= EDGE_SHARE and share >= 3.0 * pixels):
        return []
    where = f"{100 * share:.0f} % of the loss left lies inside the object ({100 * pixels:.0f} % of the pixels)"
    if not edges.get("appearance"):
        return [f"{where}: its appearance is not the render's (a texture, shading): [render] appearance = \"video\" "
                "reads each face's albedo off the first frame and fits it with the lights"]
    return [f"{where}, with its appearance fitted (an albedo per face under ambient and one directional light): "
            "what remains is what that model lacks: shadows cast on the object, highlights, a texture finer than "
            "the mesh (a finer [scene] grid), or a motion that differs inside the outline (folds: bending, "
            "stiffness)"]


def _drops_alpha(loss_name) -> bool:
    """Whether the loss `loss_name` compares the target's colours and its alpha (so that, the alpha not observed,
    a loss of the colours alone remains: --loss rgb)."""
    loss = IMAGE_LOSSES.get(loss_name)
    return loss is not None and loss.uses_alpha and loss.uses_color


def assess(*, initial_loss: float, final_loss: float, floor: float, grad_norm: float, last_step: float,
           loss_kind: str = "rgba", edges: Optional[dict] = None) -> Convergence:
    """The verdict of a fit from its numbers (see the module docstring); `edges`: where the loss left lies
    (the share on the outlines), for the advice.

    Args:
        initial_loss: the loss at the start.
        final_loss: the loss at the estimate.
        floor: the target's noise floor (`noise_floor`), a mean squared error.
        grad_norm: the norm of the loss's gradient at the estimate.
        last_step: the free quantities' last relative step (`relative_last_step`).
        loss_kind: the image loss's name (`fit.image_losses.LOSSES`).
        edges: where the loss left lies (`edge_advice`), or None.

    Returns:
        the `Convergence`.
    """
    reasons, advice = [], []
    moving = not last_step < STEP_TOL
    explained = final_loss <= FLOOR_FACTOR * floor or (initial_loss > 0 and final_loss <= RATIO_TOL * initial_loss)
    if not np.isfinite(final_loss):
        reasons.append("the final loss is not finite")
    if moving:
        reasons.append(f"the estimates were still moving: last relative step {last_step:.2g} >= {STEP_TOL:g}")
        advice.append("run more iterations (--iterations) or more Levenberg-Marquardt steps (--polish)")
    if not explained:
        advice.extend(edge_advice(edges))
        advice.extend(appearance_advice(edges))
        reasons.append(
            f"the final loss {final_loss:.3g} is {final_loss / max(floor, 1e-300):.3g} x the target's noise floor "
            f"{floor:.3g} and {final_loss / max(initial_loss, 1e-300):.3g} x the initial loss: the video is not "
            "explained")
        advice.append("check the camera and the scene against the first frame of the target (rendered frame 0 "
                      "must overlay it)")
        if _drops_alpha(loss_kind):
            advice.append("if the target's alpha is not observed (no alpha channel, mask or key colour), use "
                          "--loss rgb with the scene's background colour or [render] background_image")
        advice.append("start closer ([initial]) or fit the first frames first (--horizon), since a start far off "
                      "puts late frames out of phase")
        advice.append("a shorter horizon (fewer [simulation] frames) if the motion is chaotic")
    # At the noise floor the remaining steps chase noise: the estimate is as good as the video allows.
    at_floor = final_loss <= floor
    if at_floor and moving:
        reasons.pop(0)
        advice.pop(0)
    converged = bool(np.isfinite(final_loss) and (at_floor or not moving) and explained)
    if converged and final_loss > FLOOR_FACTOR * floor:
        advice.extend(edge_advice(edges))
        # Explained by the ratio rule alone: right for an imperfect renderer against a real video, a local
        # minimum against a rendered one. Said, not hidden behind the verdict.
        advice.append(f"the final loss is {final_loss / max(floor, 1e-300):.3g} x the target's noise floor, "
                      f"accepted as explained because it is under {100 * RATIO_TOL:g} % of the initial loss; if the "
                      "target was rendered by this scene's renderer this is a local minimum: compare fitted.gif "
                      "with target.gif and start closer or fit the first frames first (--horizon)")
    return Convergence(converged, float(initial_loss), float(final_loss), float(floor), float(grad_norm),
                       float(last_step), tuple(reasons), tuple(advice))
