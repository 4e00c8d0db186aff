"""How far the README's recovered values move between runs: every row of the README's results table, run as a
user runs it (`gradsim-jax demo ...` in its own process) for several seeds of the initial guess, on this
machine; the table beside the README's gives, per figure, the range over every seed and every machine whose
results are in benchmarks/results/spread/.

A float32 fit that ends at the float32 floor (relative errors of 1e-8 to 1e-6) ends wherever the last rounding
leaves it: another CPU (another vector width, another order of additions in XLA's code) or another start gives
another figure of the same size. The ranges say how large that is, so that a user comparing their run with
the README knows what agrees.

    python benchmarks/bench_spread.py --seeds 0,1,2 --jobs 2            # every row, two runs at a time
    python benchmarks/bench_spread.py --only pendulum,bounce --seeds 0
    python benchmarks/bench_spread.py --table                           # the table of every machine's results

Writes benchmarks/results/spread/MACHINE.json (MACHINE: the CPU's model name, made safe for a file name; runs
merged by row and seed, so separate runs add up).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from demo_run import run_demo

RESULTS = Path(__file__).resolve().parent / "results" / "spread"

#: README row: (the demo's arguments, whether --seed changes its start, the figures: name -> report.json path)
ROWS = {
    "cloth-velocity": (["cloth", "--estimate", "velocity"], True, {"velocity": "relative_error.velocity"}),
    "cloth": (["cloth"], True, {"mass": "relative_error.mass", "stiffness": "relative_error.stiffness",
                                "damping": "relative_error.damping"}),
    "rigid-mass": (["rigid-mass"], True, {"body_mass": "relative_error.body_mass"}),
    "rigid-material-ke": (["rigid-material"], True, {"body_ke": "relative_error.body_ke"}),
    "rigid-material-kf": (["rigid-material", "--estimate", "body_kf"], True, {"body_kf": "relative_error.body_kf"}),
    "rigid-material-mu": (["rigid-material", "--estimate", "body_mu"], True, {"body_mu": "relative_error.body_mu"}),
    "fem-material": (["fem-material"], True, {"fem_mu": "relative_error.fem_mu",
                                              "fem_lambda": "relative_error.fem_lambda"}),
    "fem-mass": (["fem-mass"], True, {"particle_mass": "relative_error.particle_mass"}),
    "pendulum": (["pendulum"], True, {"pendulum_length": "relative_error.pendulum_length",
                                      "pendulum_damping": "relative_error.pendulum_damping"}),
    "double-pendulum": (["double-pendulum"], False, {"pendulum_length": "relative_error.pendulum_length"}),
    "bounce": (["bounce"], False, {"ball_speed": "relative_error.ball_speed", "gravity": "relative_error.gravity"}),
    "smoke-shape": (["smoke-shape"], False, {"IoU": "silhouette_iou.fitted"}),
    "texture": (["texture"], False, {"PSNR fitted (dB)": "psnr_db.fitted_views.fitted",
                                     "PSNR held out (dB)": "psnr_db.held_out_views.fitted"}),
    "shape": (["shape"], False, {"IoU held out": "silhouette_iou.held_out_views.fitted",
                                 "chamfer (m)": "chamfer_m.fitted.mean"}),
    "smoke-buoyancy": (["smoke-buoyancy"], False, {"smoke_buoyancy": "quantities.smoke_buoyancy.relative_error",
                                                   "inflow_rate": "quantities.inflow_rate.relative_error"}),
    "stack": (["stack"], True, {"body_mass": "relative_error.body_mass", "body_mu": "relative_error.body_mu"}),
    "drape": (["drape"], True, {"bending": "relative_error.bending", "collider_mu": "relative_error.collider_mu"}),
    "lift": (["lift"], True, {"mass": "relative_error.mass", "stiffness": "relative_error.stiffness"}),
    "control-fem": (["control-fem"], True, {"random / trained (mean squared)":
                                            "ratio_random_mean_over_trained_mse"}),
}


def machine() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _lookup(report: dict, path: str):
    value = report
    for key in path.split("."):
        value = value[key]
    return float(value)


def run_row(name: str, seed: int) -> dict:
    arguments, seeded, figures = ROWS[name]
    report, wall = run_demo(arguments + (["--seed", str(seed)] if seeded else []))
    return {"figures": {k: _lookup(report, p) for k, p in figures.items()}, "wall_time_s": wall}


def run(names, seeds, jobs: int, results: Path = RESULTS) -> None:
    results.mkdir(parents=True, exist_ok=True)
    cpu = machine()
    path = results / (re.sub(r"[^A-Za-z0-9]+", "-", cpu).strip("-") + ".json")
    data = json.loads(path.read_text()) if path.exists() else {"machine": cpu, "rows": {}}
    # A seed that does not change a demo's start runs once.
    work = [(n, s) for n in names for s in (seeds if ROWS[n][1] else seeds[:1])]

    def one(item):
        name, seed = item
        row = run_row(name, seed)
        print(f"{name} seed {seed}: {row['figures']} ({row['wall_time_s']:.0f} s)", flush=True)
        return name, seed, row

    with ThreadPoolExecutor(jobs) as pool:
        for done in as_completed([pool.submit(one, item) for item in work]):
            name, seed, row = done.result()
            data["rows"].setdefault(name, {})[str(seed)] = row
            data.update(cores=os.cpu_count(), jobs=jobs, date=time.strftime("%Y-%m-%d"))
            path.write_text(json.dumps(data, indent=1))
    print(f"written {path}")


def _range(values) -> str:
    lo, hi = min(values), max(values)
    fmt = (lambda v: f"{v:.3g}") if lo >= 0.01 or lo < 0 else (lambda v: "0" if v == 0 else f"{v:.1e}")
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)} - {fmt(hi)}"


def table(results: Path = RESULTS) -> str:
    """Per README row and figure: the range over every seed and machine, and what was run."""
    files = sorted(results.glob("*.json"))
    datas = [json.loads(f.read_text()) for f in files]
    lines = ["### Spread of the README's figures", "",
             "`benchmarks/bench_spread.py`: each figure of the README's results table as the range over the seeds of "
             "the initial guess (where the demo's `--seed` changes it) and the machines below, every run a "
             "`gradsim-jax demo` at its defaults in its own process. A float32 fit that ends at the float32 floor "
             "ends wherever the last roundings leave it; another CPU (another vector width, another order of "
             "additions in XLA's code) or another start rounds differently.", "",
             "| demo | figure | range | runs |", "|---|---|---|---:|"]
    for name in ROWS:
        figures = {}
        for data in datas:
            for run_ in data["rows"].get(name, {}).values():
                for k, v in run_["figures"].items():
                    figures.setdefault(k, []).append(v)
        for k, values in figures.items():
            lines.append(f"| `{' '.join(ROWS[name][0])}` | {k} | {_range(values)} | {len(values)} |")
    lines.append("")
    for data in datas:
        by_seeds = {}
        for name, runs in data["rows"].items():
            by_seeds.setdefault(", ".join(sorted(runs)), []).append(name)
        what = "; ".join(f"seeds {seeds}: {', '.join(names)}" for seeds, names in by_seeds.items())
        lines.append(f"- {data['machine']} ({data['cores']} cores, {data['jobs']} runs at a time, {data['date']}): "
                     f"{what}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated rows of {', '.join(ROWS)}")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (each its own process)")
    parser.add_argument("--table", action="store_true", help="only print the table of every machine's results")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"folder of the results (default {RESULTS})")
    args = parser.parse_args()
    if not args.table:
        names = args.only.split(",") if args.only else list(ROWS)
        unknown = [n for n in names if n not in ROWS]
        if unknown:
            raise SystemExit(f"--only: unknown rows {', '.join(unknown)}; rows: {', '.join(ROWS)}")
        run(names, [int(s) for s in args.seeds.split(",")], args.jobs, args.results)
    print(table(args.results))


if __name__ == "__main__":
    main()
