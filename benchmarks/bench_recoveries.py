"""The recoveries of issue 38 beside one another: the renderer alone (`demo texture`, `demo shape`), each with
SoftRas and with DIB-R (`--rasterizer`), and the smoke demos (`demo smoke-buoyancy`, `demo smoke-shape`).
Each row is a demo run as a user runs it, `gradsim-jax demo NAME` at its defaults, in its own process,
timed from the command to its exit (import, compile and outputs included), its report.json read back.

    python benchmarks/bench_recoveries.py                      # every row, one after another (~10 min, 2 cores)
    python benchmarks/bench_recoveries.py --only shape-softras,shape-dibr
    python benchmarks/bench_recoveries.py --keep runs/demos     # and keep the outputs for tools/demo_pages.py

Writes benchmarks/results/recoveries.json (rows merged by name, so separate runs add up).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from demo_run import run_demo, update_rows

RESULTS = Path(__file__).resolve().parent / "results"

#: row name: the `gradsim-jax demo` arguments
ROWS = {
    "texture-softras": ["texture"],
    "texture-dibr": ["texture", "--rasterizer", "dibr"],
    "shape-softras": ["shape"],
    "shape-dibr": ["shape", "--rasterizer", "dibr"],
    "smoke-buoyancy": ["smoke-buoyancy"],
    "smoke-shape": ["smoke-shape"],
}


def _accuracy(report: dict) -> dict:
    """The figures each demo scores itself by."""
    if "psnr_db" in report:
        p = report["psnr_db"]
        return {"psnr_fitted_views_db": p["fitted_views"]["fitted"],
                "psnr_held_out_views_db": p["held_out_views"]["fitted"], "texture_rmse": report["texture_rmse"],
                "goal": "PSNR > 35 dB on both"}
    if "chamfer_m" in report:
        iou = report["silhouette_iou"]
        return {"iou_fitted_views": iou["fitted_views"]["fitted"],
                "iou_held_out_views": iou["held_out_views"]["fitted"],
                "lowest_held_out_iou": report["lowest_view_iou"]["held_out_views"],
                "chamfer_m": report["chamfer_m"]["fitted"]["mean"],
                "chamfer_initial_m": report["chamfer_m"]["initial"]["mean"], "goal": "held-out IoU > 0.97"}
    if "relative_error" in report:
        return {"relative_error": report["relative_error"], "goal": "relative error < 1e-3"}
    iou = report.get("silhouette_iou", {})
    return {"iou_initial": iou.get("initial"), "iou_fitted": iou.get("fitted"), "goal": "the picture's outline"}


def run_row(name: str, keep=None) -> dict:
    """One row; with `keep` (a folder) its outputs stay in KEEP/DEMO (the demo's defaults) or KEEP/ROW."""
    folder = None
    if keep:
        folder = Path(keep) / (ROWS[name][0] if len(ROWS[name]) == 1 else name)
    report, wall = run_demo(ROWS[name], folder)
    return {"name": name, "command": "gradsim-jax demo " + " ".join(ROWS[name]), **_accuracy(report),
            "iterations": report["iterations"], "final_loss": report["final_loss"],
            "fit_wall_time_s": report["wall_time_s"], "wall_time_s": wall}


def table(data: dict) -> str:
    """The markdown table of the rows in `data` (also `run_all.py`'s)."""
    lines = [f"Recoveries of issue 38 (`benchmarks/bench_recoveries.py`; {data['machine']}, {data['date']}): each "
             "`gradsim-jax demo` at its defaults, wall time from the command to its exit (compilation and outputs "
             "included); fit: the optimizer's own time.", "",
             "| demo | accuracy | goal | fit (s) | wall time (s) |", "|---|---|---|---:|---:|"]
    for r in data["rows"].values():
        if "psnr_fitted_views_db" in r:
            acc = (f"PSNR {r['psnr_fitted_views_db']:.1f} dB fitted views, {r['psnr_held_out_views_db']:.1f} dB "
                   f"held out")
        elif "chamfer_m" in r:
            acc = (f"IoU {r['iou_fitted_views']:.4f} fitted views, {r['iou_held_out_views']:.4f} held out (lowest "
                   f"{r['lowest_held_out_iou']:.4f}); chamfer {r['chamfer_initial_m']:.4f} -> {r['chamfer_m']:.4f} m")
        elif "relative_error" in r:
            acc = ", ".join(f"{k} {v:.1e}" for k, v in r["relative_error"].items())
        else:
            acc = f"IoU with the picture {r['iou_initial']:.3f} -> {r['iou_fitted']:.3f}"
        lines.append(f"| `{r['command']}` | {acc} | {r['goal']} | {r['fit_wall_time_s']:.0f} | "
                     f"{r['wall_time_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated rows of {', '.join(ROWS)}")
    parser.add_argument("--table", action="store_true", help="only print the table of the JSON")
    parser.add_argument("--keep", metavar="DIR", help="keep each run's outputs in DIR (e.g. runs/demos, for "
                        "tools/demo_pages.py)")
    args = parser.parse_args()
    update_rows(RESULTS / "recoveries.json", ROWS, args.only, lambda name: run_row(name, args.keep), table, args.table)


if __name__ == "__main__":
    main()
