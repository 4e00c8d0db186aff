"""`gradsim-jax predict SCENE.toml --fit RUN`: the fitted scene simulated past the frames it was fitted on and
scored against the rest of the video (`scenefile.load_prediction_job`, `sysid.prediction.predict`); the scores,
prediction.mp4 and prediction.png go beside the fit's outputs and into its report.json and report.html."""

from __future__ import annotations

import argparse
from pathlib import Path

from gradsim_jax.cli.args import fail, missing_input


def add_parser(sub) -> None:
    """`predict` on `gradsim-jax`'s subparsers.

    Args:
        sub: the subparsers action of `gradsim-jax`'s parser (`add_subparsers`).
    """
    p = sub.add_parser(
        "predict", help="simulate a fitted scene past the fitted frames and score it against the rest of the video",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Simulate the scene file with the quantities a fit estimated (its report.json) over the whole "
                    "target video, or N frames past the fitted ones, and score every frame, fitted and held out "
                    "apart: silhouette IoU (thresholded at 1/2, with a mask), PSNR inside the mask and over the "
                    "frame, and with --reference the mean vertex error. Baselines: the initial guess and the last "
                    "fitted frame held. Writes prediction.mp4, prediction.png and report.json's \"prediction\" "
                    "(report.html shows it) into OUT, the fit's folder by default.")
    p.add_argument("scene", help="the scene file (TOML) that was fitted")
    p.add_argument("--fit", required=True, metavar="RUN", help="the fit's output folder (its report.json)")
    p.add_argument("--target", default=None, help="target video (default: [target] video), all of its frames")
    p.add_argument("--mask", default=None, help="alpha mask video or folder (default: [target] mask)")
    p.add_argument("--key-color", type=float, nargs=3, default=None, metavar=("R", "G", "B"),
                   help="background color of the target in [0, 1]: alpha from the distance to it")
    p.add_argument("--frames", type=int, default=None, metavar="N",
                   help="frames to predict after the fitted ones (default: to the end of the target)")
    p.add_argument("--reference", default=None, metavar="FILE.npy",
                   help="reference positions [frames, V, 3] m of the scene's first V render vertices (the cloth's, "
                        "in its order: another engine's, a motion capture), in the scene's world: the mean vertex "
                        "error per frame")
    p.add_argument("--out", default=None, help="output folder (default: the fit's folder, whose report it extends)")


def run(args) -> int:
    """CLI arguments -> the prediction job -> predict -> files and report.

    Args:
        args: the parsed command line (argparse.Namespace of the predict parser).

    Returns:
        The exit status: 0, or 2 after a one-line error.
    """
    from gradsim_jax.scenefile import SceneFileError
    from gradsim_jax.scenefile.predict import load_prediction_job
    from gradsim_jax.sysid.outputs.prediction import prediction_report, write_prediction
    from gradsim_jax.sysid.outputs.report import write_report
    from gradsim_jax.sysid.prediction import predict
    from gradsim_jax.sysid.outputs.files import outputs_line

    try:
        job = load_prediction_job(args.scene, args.fit, target=args.target, mask=args.mask, key_color=args.key_color,
                                  frames=args.frames, reference=args.reference)
    except (SceneFileError, ValueError) as e:
        return fail(str(e))
    except FileNotFoundError as e:
        return fail(missing_input(args) or str(e))
    exp = job.experiment
    count = exp.frames + 1
    print(f"predict {job.spec.path}: frames {job.fitted_frames}-{count - 1} after the {job.fitted_frames} fitted "
          f"(target: {job.target.shape[0]} frames)")
    try:
        prediction = predict(exp, job.theta, job.initial, job.target, job.alpha_observed, job.fitted_frames,
                             job.reference)
    except ValueError as e:
        return fail(str(e))
    out = Path(args.out) if args.out is not None else Path(args.fit)
    paths = write_prediction(out, prediction, job.target, fps=min(50.0, 1.0 / exp.frame_dt))
    fitted = {k: job.theta[k] for k in job.fit_report["estimated"]}
    entry = prediction_report(prediction, fitted)
    report = dict(job.fit_report) if out.resolve() == Path(args.fit).resolve() else {
        "command": "predict", "experiment": exp.name, "frames": exp.frames, "fit": str(args.fit)}
    report["prediction"] = entry
    report.setdefault("outputs", {}).update(paths)
    write_report(out / "report.json", report)
    for line in summary_lines(entry):
        print(line)
    print(outputs_line(out))
    return 0


def summary_lines(entry: dict) -> list[str]:
    """The console lines of a prediction: each motion's mean scores over the fitted and the held-out frames.

    Args:
        entry: the report's "prediction" entry (`prediction_report`).

    Returns:
        One line per motion and span.
    """
    names = {"fit": "fitted quantities", "initial": "initial guess", "frozen": "last fitted frame held",
             "reference": "reference, drawn here"}
    lines = []
    for motion, spans in entry["summary"].items():
        for span, values in spans.items():
            parts = []
            if values.get("iou") is not None:
                parts.append(f"IoU {values['iou']:.3f}")
            if values.get("psnr_mask") is not None:
                parts.append(f"PSNR in mask {values['psnr_mask']:.1f} dB")
            if values.get("psnr") is not None:
                parts.append(f"PSNR {values['psnr']:.1f} dB")
            if values.get("vertex_error") is not None:
                rel = values.get("vertex_error_relative")
                parts.append(f"vertex error {values['vertex_error']:.4f} m"
                             + (f" ({rel:.2%} of the size)" if rel is not None else ""))
            label = "fitted frames" if span == "fitted" else "held-out frames"
            lines.append(f"  {names.get(motion, motion):24s} {label:16s} " + ", ".join(parts))
    return lines

