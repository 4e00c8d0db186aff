"""Prediction: the fitted scene simulated past the frames it was fitted on, scored against the rest of the video.

A fit is only as good as what it predicts. `predict` simulates the experiment (built for the whole recording)
with the fitted quantities and scores every frame, the fitted ones and the held-out ones apart, against the
target:

- **IoU**: the thresholded silhouettes' intersection over union, |A and B| / |A or B| with A = the render's
  coverage > 1/2 and B = the target's alpha > 1/2 (only where the target's alpha was observed: a mask, an alpha
  channel or a key colour); 1 when both are empty.
- **PSNR inside the mask**: 10 log10(1 / MSE) dB of the RGB over the pixels the target's silhouette covers (B),
  so that a large static background does not flatter it; and over the whole frame.
- **vertex error**: where the user gives reference 3-D positions [T, V, 3] m of the render vertices (another
  engine's, a motion-capture), the mean distance per frame, in metres and as a fraction of the reference's size
  (the largest side of its first frame's bounding box).

The same scores are given for two baselines: the initial guess (what the fit started from) and the frozen last
fitted frame (the fitted motion's frame at the end of the fit, held: a prediction that nothing moves any more);
and, with a reference, for the reference motion itself drawn by this renderer with the fitted appearance: the
scores a perfect motion would get, the bound the prediction's IoU and PSNR are to be read against.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.sysid.experiment import Experiment, frames_for
from gradsim_jax.sysid.renderer_fits.shape import silhouette_iou as views_iou
from gradsim_jax.sysid.simulated import simulate_video

#: The threshold of the silhouettes' IoU (coverage and alpha in [0, 1]).
IOU_THRESHOLD = 0.5

#: The PSNR of a perfect match (the MSE floored at 1e-10: 100 dB).
MAX_PSNR_DB = 100.0


@dataclasses.dataclass(frozen=True)
class FrameScores:
    """Scores per frame of one predicted motion against the target (NaN where the target has no frame).

    Attributes:
        iou: [T] thresholded silhouette IoU, or None when the target's alpha was not observed.
        psnr_mask: [T] dB, PSNR of RGB inside the target's silhouette, or None when its alpha was not observed.
        psnr: [T] dB, PSNR of RGB over the whole frame.
        vertex_error: [T] m, mean distance of the render vertices from the reference, or None without one.
    """

    iou: Optional[np.ndarray]
    psnr_mask: Optional[np.ndarray]
    psnr: np.ndarray
    vertex_error: Optional[np.ndarray]

    def as_dict(self) -> dict:
        """The scores as lists (None where absent; NaN as None), for JSON.

        Returns:
            {"iou", "psnr_mask", "psnr", "vertex_error": list of float or None per frame, or None}.
        """
        def plain(a):
            return None if a is None else [None if not np.isfinite(v) else float(v) for v in a]

        return {k: plain(getattr(self, k)) for k in ("iou", "psnr_mask", "psnr", "vertex_error")}


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A fitted scene's prediction and its scores.

    Attributes:
        fitted_frames: how many of the video's frames the fit used (frames 0 .. fitted_frames - 1).
        video: [T, H, W, 4] RGBA, the predicted video (T = all frames predicted, the initial one included).
        vertices: [T, V, 3] m, the predicted render vertices.
        scores: {"fit": the prediction's, "initial": the initial guess's, "frozen": the frozen last fitted
            frame's `FrameScores`; with a reference of every frame, "reference": the reference positions drawn by
            this renderer with the fitted appearance (the best a motion can score here)}.
        size: m, the reference's size (the vertex errors' scale), or None without a reference.
        target_frames: how many frames the target has (scores beyond it are NaN).
    """

    fitted_frames: int
    video: np.ndarray
    vertices: np.ndarray
    scores: dict
    size: Optional[float]
    target_frames: int

    def summary(self) -> dict:
        """Means of every score over the fitted frames and over the held-out frames, per motion.

        Returns:
            {motion: {"fitted": {score: mean or None}, "held_out": {...}}} with motion in "fit", "initial",
            "frozen" and score in "iou", "psnr_mask", "psnr", "vertex_error", "vertex_error_relative".
        """
        end = min(self.target_frames, self.video.shape[0])
        spans = {"fitted": slice(0, min(self.fitted_frames, end)), "held_out": slice(self.fitted_frames, end)}
        out = {}
        for motion, s in self.scores.items():
            out[motion] = {}
            for span, part in spans.items():
                means = {k: _mean(getattr(s, k), part) for k in ("iou", "psnr_mask", "psnr", "vertex_error")}
                rel = means["vertex_error"]
                means["vertex_error_relative"] = None if rel is None or not self.size else rel / self.size
                out[motion][span] = means
        return out


def _mean(values, part: slice):
    if values is None:
        return None
    v = np.asarray(values, np.float64)[part]
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def psnr(a, b, where=None) -> float:
    """PSNR in dB of RGB images a and b [H, W, 3] in [0, 1], over the pixels `where` [H, W] is true (all: None).

    Args:
        a: [H, W, >=3] image in [0, 1] (RGB first).
        b: [H, W, >=3] image in [0, 1].
        where: [H, W] bool, the pixels compared, or None for all.

    Returns:
        dB, 10 log10(1 / MSE), MSE floored at 1e-10; NaN when `where` selects no pixel.
    """
    d = (np.asarray(a, np.float64)[..., :3] - np.asarray(b, np.float64)[..., :3]) ** 2
    if where is not None:
        d = d[np.asarray(where, bool)]
    if d.size == 0:
        return float("nan")
    return float(min(MAX_PSNR_DB, 10.0 * np.log10(1.0 / max(float(d.mean()), 1e-10))))


def silhouette_iou(a, b) -> float:
    """IoU of the thresholded silhouettes of coverages a and b [H, W] in [0, 1] (`IOU_THRESHOLD`).

    Args:
        a: [H, W] coverage or alpha in [0, 1].
        b: [H, W] coverage or alpha in [0, 1].

    Returns:
        |A and B| / |A or B|, 1.0 when both are empty.
    """
    if not (np.any(np.asarray(a) > IOU_THRESHOLD) or np.any(np.asarray(b) > IOU_THRESHOLD)):
        return 1.0  # both empty: they agree
    return float(views_iou(np.asarray(a)[None], np.asarray(b)[None], IOU_THRESHOLD)[0])


def frame_scores(video, target, alpha_observed: bool, vertices=None, reference=None) -> FrameScores:
    """Scores per frame of a video (and its vertices) against the target (and the reference positions).

    Args:
        video: [T, H, W, 4] RGBA in [0, 1], the predicted video.
        target: [T', H, W, 4] RGBA in [0, 1], the target video (frames past T' score NaN).
        alpha_observed: whether the target's alpha carries information (IoU and PSNR inside the mask need it).
        vertices: [T, V, 3] m, the predicted render vertices, or None.
        reference: [T'', V', 3] m, reference positions of the first V' <= V vertices, or None.

    Returns:
        The `FrameScores`.
    """
    video, target = np.asarray(video), np.asarray(target)
    count, seen = video.shape[0], min(video.shape[0], target.shape[0])
    nan = np.full(count, np.nan)
    iou, psnr_mask, full = nan.copy(), nan.copy(), nan.copy()
    for t in range(seen):
        full[t] = psnr(video[t], target[t])
        if alpha_observed:
            iou[t] = silhouette_iou(video[t, ..., 3], target[t, ..., 3])
            psnr_mask[t] = psnr(video[t], target[t], target[t, ..., 3] > IOU_THRESHOLD)
    error = None
    if reference is not None and vertices is not None:
        error = nan.copy()
        n = min(count, reference.shape[0])
        v = reference.shape[1]  # the first v render vertices (the particles) have reference positions
        error[:n] = np.linalg.norm(np.asarray(vertices[:n, :v], np.float64) - reference[:n], axis=-1).mean(axis=-1)
    return FrameScores(iou=iou if alpha_observed else None, psnr_mask=psnr_mask if alpha_observed else None,
                       psnr=full, vertex_error=error)


def frozen(frames, fitted: int, count: int) -> np.ndarray:
    """The frozen-last-frame baseline: frames 0 .. fitted - 1 as they are, then frame fitted - 1 held.

    Args:
        frames: [>= fitted, ...] the fitted motion (video frames or vertices).
        fitted: how many frames the fit used.
        count: how many frames to return.

    Returns:
        [count, ...] the held motion.
    """
    frames = np.asarray(frames)
    idx = np.minimum(np.arange(count), fitted - 1)
    return frames[idx]


def check_reference(reference, vertices: int) -> np.ndarray:
    """Reference positions as float64 [T, V, 3], checked against the scene's render vertex count.

    Args:
        reference: [T, V, 3] (or [V, 3] for one frame) m, positions of the scene's first V render vertices (its
            particles come first: the cloth's, then the soft bodies'; drawn colliders and bodies after them).
        vertices: the scene's render vertex count (V may be fewer).

    Returns:
        [T, V, 3] float64.

    Raises:
        ValueError: naming the shapes, for another vertex count or a non-finite value.
    """
    ref = np.asarray(reference, np.float64)
    if ref.ndim == 2:
        ref = ref[None]
    if ref.ndim != 3 or ref.shape[2] != 3 or not 1 <= ref.shape[1] <= vertices:
        raise ValueError(f"the reference positions must be [frames, V, 3] for the scene's first V <= {vertices} "
                         f"render vertices in their order (the cloth's, the soft bodies'), m; got shape "
                         f"{list(np.shape(reference))}")
    if not np.all(np.isfinite(ref)):
        raise ValueError("the reference positions hold a non-finite value")
    return ref


def reference_size(reference) -> float:
    """The size of a reference motion: the largest side of its first frame's bounding box, m.

    Args:
        reference: [T, V, 3] m.

    Returns:
        m, the size (vertex errors are reported relative to it).
    """
    first = np.asarray(reference, np.float64)[0]
    return float(np.max(first.max(axis=0) - first.min(axis=0)))


def predict(exp: Experiment, theta: dict, initial: dict, target, alpha_observed: bool, fitted: int,
            reference=None) -> Prediction:
    """Simulate the fitted and the initial quantities over the experiment's frames and score every frame.

    Args:
        exp: the experiment, built for every frame to predict (exp.frames + 1 of them).
        theta: {quantity name: value}, the fitted quantities (missing entries from the experiment's defaults).
        initial: {quantity name: value}, the initial guess of the fit (a baseline).
        target: [T', H, W, 4] RGBA in [0, 1], the target video at the render size.
        alpha_observed: whether the target's alpha carries information.
        fitted: how many of the frames the fit used (>= 1).
        reference: [T'', V, 3] m, reference positions of the render vertices, or None.

    Returns:
        The `Prediction`.
    """
    count = exp.frames + 1
    if not 1 <= fitted <= count:
        raise ValueError(f"the fit used {fitted} frames, but the prediction has {count}: predict at least as many")
    vertices, video = simulate_video(exp, theta)
    start_vertices, start_video = simulate_video(exp, initial)
    ref = None if reference is None else check_reference(reference, vertices.shape[1])
    scores = {
        "fit": frame_scores(video, target, alpha_observed, vertices, ref),
        "initial": frame_scores(start_video, target, alpha_observed, start_vertices, ref),
        "frozen": frame_scores(frozen(video, fitted, count), target, alpha_observed,
                               frozen(vertices, fitted, count), ref),
    }
    if ref is not None and ref.shape[0] >= count:  # the best our renderer can do with the true motion
        x = np.array(vertices)  # the other drawn parts (a collider, a body) as predicted
        x[:, : ref.shape[1]] = ref[:count]
        drawn = jax.jit(lambda x, th: frames_for(exp, x, th))(jnp.asarray(x, exp.dtype), theta)
        scores["reference"] = frame_scores(np.asarray(drawn), target, alpha_observed, x, ref)
    return Prediction(fitted_frames=fitted, video=video, vertices=vertices, scores=scores,
                      size=None if ref is None else reference_size(ref), target_frames=int(np.shape(target)[0]))
