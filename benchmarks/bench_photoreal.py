"""Footage that looks real (issue 54): cloth simulated by Blender's own solver and rendered by Cycles (textured,
lit, shadowed; benchmarks/blender), fitted as a user fits it (examples/blender_cloth/*.toml: the first 30
frames) and then predicted to the end of the video, scored frame by frame against the video and Blender's own
vertices (`gradsim-jax predict --reference`).

For each case: the fit's wall time, the estimates, and per frame the silhouette IoU (thresholded at 1/2) and the
mean vertex error (% of the cloth's 0.8 m) of the prediction, of the initial guess, of the last fitted frame held
and of Blender's vertices drawn by our renderer (the bound a perfect motion reaches); the held-out frames' means.

    python benchmarks/bench_photoreal.py                     # swing, hand, drape, wind, swing2 (about 20-35 min on 2 cores)
    python benchmarks/bench_photoreal.py --cases swing --iterations 60
    python benchmarks/bench_photoreal.py --table

Rows go to benchmarks/results/photoreal.json (by case) and the per-frame plots to docs/assets/photoreal_<case>.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from bench_spread import machine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "photoreal.json"
CASES = ("swing", "hand", "drape", "wind", "swing2")


def run_case(case: str, iterations, out: Path) -> dict:
    """Fit and predict one case through the command line; its row."""
    from gradsim_jax.cli import main

    scene = ROOT / "examples" / "blender_cloth" / f"{case}.toml"
    run = out / case
    args = ["fit", str(scene), "--out", str(run), "--no-progress", "--force"]
    if iterations is not None:
        args += ["--iterations", str(iterations)]
    started = time.perf_counter()
    assert main(args) == 0, case
    wall = time.perf_counter() - started
    reference = ROOT / "benchmarks" / "blender" / "data" / case / "vertices.npy"
    assert main(["predict", str(scene), "--fit", str(run), "--reference", str(reference)]) == 0, case
    return row_of(case, run, wall)


def row_of(case: str, run: Path, wall=None) -> dict:
    """The row of a case fitted and predicted into `run` (`gradsim-jax fit` then `predict --reference`, the
    steps `run_case` takes); `wall`: the fit's seconds as the command measured them (None: its report's
    total_wall_time_s, the set-up and the outputs included)."""
    report = json.loads((run / "report.json").read_text())
    wall = report["total_wall_time_s"] if wall is None else wall
    pred = report["prediction"]
    return {"case": case, "fit_wall_s": round(wall, 1), "estimated": {k: v for k, v in report["estimated"].items()
                                                                     if k != "albedo"},
            "iterations": report["iterations"], "final_loss": report["final_loss"],
            "converged": (report.get("convergence") or {}).get("converged"),
            "fitted_frames": pred["fitted_frames"], "frames": pred["frames"],
            "reference_size_m": pred["reference_size_m"], "summary": pred["summary"],
            "per_frame": {m: {k: s[k] for k in ("iou", "vertex_error")} for m, s in pred["per_frame"].items()},
            "plot": str(run / "prediction.png"),
            "machine": f"{machine()}, {os.cpu_count()} cores, {platform.platform()}",
            "date": time.strftime("%Y-%m-%d")}


def table(rows: dict) -> list[str]:
    """The markdown table of the held-out frames' means."""
    lines = ["| case | fit (s) | held-out IoU: predicted / Blender's vertices drawn here / initial / last frame held "
             "| held-out vertex error (% of size): predicted / initial / last frame held |", "|---|---:|---|---|"]
    for case, row in rows.items():
        s = row["summary"]

        def pick(motion, key, scale=1.0, fmt="{:.3f}"):
            value = (s.get(motion) or {}).get("held_out", {}).get(key)
            return "-" if value is None else fmt.format(value * scale)

        lines.append(f"| {case} | {row['fit_wall_s']:.0f} | {pick('fit', 'iou')} / {pick('reference', 'iou')} / "
                     f"{pick('initial', 'iou')} / {pick('frozen', 'iou')} | "
                     f"{pick('fit', 'vertex_error_relative', 100, '{:.2f}')} / "
                     f"{pick('initial', 'vertex_error_relative', 100, '{:.2f}')} / "
                     f"{pick('frozen', 'vertex_error_relative', 100, '{:.2f}')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--iterations", type=int, default=None, help="Adam iterations (default: the scene file's)")
    parser.add_argument("--out", default="runs/photoreal", help="where the fits write their outputs")
    parser.add_argument("--table", action="store_true", help="print the stored table and stop")
    parser.add_argument("--collect", default=None, help="take the rows of --cases from fits already run by the same "
                        "commands into this folder (one subfolder per case) instead of running them")
    args = parser.parse_args()
    rows = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if not args.table:
        import shutil

        for case in args.cases:
            if args.collect:
                row = row_of(case, Path(args.collect) / case)
            else:
                row = run_case(case, args.iterations, Path(args.out))
            assets = ROOT / "docs" / "assets" / f"photoreal_{case}.png"
            shutil.copyfile(row.pop("plot"), assets)
            rows[case] = row
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
