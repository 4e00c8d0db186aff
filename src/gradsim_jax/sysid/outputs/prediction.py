"""The files of a prediction (`gradsim-jax predict`): prediction.mp4 (the target, the prediction and the frozen
last fitted frame side by side; the held-out frames of the prediction framed in red), prediction.png (the
scores per frame, the fit's end marked) and the report's "prediction" entry (`prediction_report`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradsim_jax.sysid.outputs.plots import save_figure
from gradsim_jax.sysid.prediction import Prediction, frozen

#: The files a prediction writes beside the fit's.
PREDICTION_OUTPUTS = ("prediction.mp4", "prediction.png")

#: RGB of the frame drawn round the held-out frames of the predicted panel.
HELD_OUT_RGB = (0.85, 0.1, 0.1)


def framed(video, first: int, width: int = 1) -> np.ndarray:
    """The video [T, H, W, >=3] (RGB first) with a `width`-pixel red frame on frames first, first + 1, ...

    Args:
        video: [T, H, W, C] floats in [0, 1].
        first: the first frame to frame.
        width: pixels of the frame.

    Returns:
        [T, H, W, 3] float32.
    """
    out = np.array(np.asarray(video)[..., :3], np.float32)
    held = out[first:]
    for edge in (np.s_[:, :width], np.s_[:, -width:], np.s_[:, :, :width], np.s_[:, :, -width:]):
        held[edge] = HELD_OUT_RGB
    return out


def plot_prediction(path, prediction: Prediction) -> Path:
    """The scores per frame (IoU, PSNR inside the mask or over the frame, vertex error) of the prediction and its
    baselines, the fit's last frame marked, as a PNG.

    Args:
        path: the PNG file to write.
        prediction: the `Prediction`.

    Returns:
        The path, as a Path.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fit = prediction.scores["fit"]
    panels = [("iou", "silhouette IoU"), ("psnr_mask" if fit.psnr_mask is not None else "psnr",
                                          "PSNR inside the mask, dB" if fit.psnr_mask is not None else "PSNR, dB")]
    if fit.iou is None:
        panels = panels[1:]
    if fit.vertex_error is not None:
        panels.append(("vertex_error", "mean vertex error, m"))
    fig = Figure(figsize=(4.2 * len(panels), 3.4), dpi=100)
    FigureCanvasAgg(fig)
    frames = np.arange(prediction.video.shape[0])
    styles = {"fit": ("fitted quantities", "C0", "-"), "initial": ("initial guess", "C7", "--"),
              "frozen": ("last fitted frame held", "C3", ":"), "reference": ("reference, drawn here", "C2", "-.")}
    for i, (key, label) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for motion, (name, color, style) in styles.items():
            if motion not in prediction.scores:
                continue
            values = getattr(prediction.scores[motion], key)
            ax.plot(frames, values, style, color=color, label=name)
        ax.axvline(prediction.fitted_frames - 0.5, color="k", lw=0.8)
        ax.set_xlabel("frame (fitted | held out)")
        ax.set_title(label, fontsize=10)
        if i == 0:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, path)


def write_prediction(out_dir, prediction: Prediction, target, fps: float) -> dict:
    """Write prediction.mp4 and prediction.png into `out_dir`.

    Args:
        out_dir: the output folder (created when missing).
        prediction: the `Prediction`.
        target: [T', H, W, 4] the target video in [0, 1].
        fps: frames per second of the video written.

    Returns:
        {"prediction_video": path, "prediction_plot": path} as str.
    """
    from gradsim_jax.render.video import write_comparison

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    count = prediction.video.shape[0]
    held = frozen(prediction.video, prediction.fitted_frames, count)
    video = write_comparison(out / PREDICTION_OUTPUTS[0],
                             [np.asarray(target)[..., :3], framed(prediction.video, prediction.fitted_frames),
                              held[..., :3]],
                             ["target", "predicted (red: held out)", "last fitted frame held"], fps=fps)
    plot = plot_prediction(out / PREDICTION_OUTPUTS[1], prediction)
    return {"prediction_video": str(video), "prediction_plot": str(plot)}


def prediction_report(prediction: Prediction, quantities: dict) -> dict:
    """The report's "prediction" entry: what was predicted, the scores' means over the fitted and held-out
    frames per motion, and the scores per frame.

    Args:
        prediction: the `Prediction`.
        quantities: {name: value}, the fitted quantities simulated.

    Returns:
        {"fitted_frames", "frames", "target_frames", "reference_size_m", "quantities", "summary", "per_frame"}.
    """
    return {"fitted_frames": prediction.fitted_frames, "frames": int(prediction.video.shape[0]),
            "target_frames": prediction.target_frames, "reference_size_m": prediction.size,
            "quantities": {k: np.asarray(v).tolist() for k, v in quantities.items()},
            "summary": prediction.summary(),
            "per_frame": {motion: s.as_dict() for motion, s in prediction.scores.items()}}
