"""A soft body's material from below and from above the truth (issue 34, item 6): fem_mu and fem_lambda
jointly from 0.5x and from 2x (k_damp known), with the default fit of `gradsim-jax demo fem-material`
(`catalog.FEM_DEMOS`: 40 Adam iterations over a horizon growing from 10 frames, the polish, up to 5 rounds), 64 px.

Scenes:
- demo: the fem-material demo's box (k_mu 4000, k_lambda 6000 Pa, dropped level from 10 cm);
- thrown: a block tilted 20 degrees and thrown onto the ground (k_mu 5000, k_lambda 20000 Pa, k_damp 0) with
  Warp's default soft contact (ke 1000, kd 10, kf 1000, mu 0.5), 32 substeps: the scene an outside check failed
  on from 0.5x. It is also run with Warp's explicit contact (`[simulation] contact = "explicit"`), which is why
  it failed: dt kf / m of its light particles is 5-25, the stick phase chatters and the gradient of the loss
  by fem_mu at the 0.5x start was -1.8e27 (central differences: 1e-7);
- slab: a flat, stiffer slab dropped from higher (fem_recovery's other2).
Target: relative error < 1e-3 for both from both starts.

    python benchmarks/bench_soft_starts.py            # every row (about 8 min on 2 cores)
    python benchmarks/bench_soft_starts.py --table
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "soft_starts.json"
FREE = ("fem_mu", "fem_lambda")
TARGET = 1e-3
SCENES = {
    "demo": {},
    "thrown": dict(k_mu=5.0e3, k_lambda=2.0e4, k_damp=0.0, tilt=20.0, height=0.15, velocity=(1.0, 0.5, 0.0),
                   contact_ke=1.0e3, contact_kd=10.0, contact_kf=1.0e3, contact_mu=0.5, substeps=32),
    "slab": dict(cells=(3, 1, 2), extent=(0.3, 0.1, 0.24), density=1200.0, k_mu=6.0e3, k_lambda=4.0e3,
                 k_damp=30.0, height=0.15, elevation=15.0, azimuth=120.0),
}
#: (scene, start factor, contact integration)
RUNS = [(s, f, "implicit") for s in SCENES for f in (0.5, 2.0)] + [("thrown", 0.5, "explicit")]


def run(scene: str, factor: float, contact: str) -> dict:
    import jax.numpy as jnp

    from gradsim_jax import sysid
    from gradsim_jax.scenes import catalog
    from gradsim_jax.physics import SemiImplicitEuler
    from gradsim_jax.scenes import fem

    exp = fem.fem_material(estimate=FREE, **SCENES[scene])
    exp = dataclasses.replace(exp, integrator=SemiImplicitEuler(implicit_contact=contact == "implicit"))
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    start = dict(truth, **{q: jnp.asarray(truth[q] * factor) for q in FREE})
    config = catalog.demo_fit_config(FREE, catalog.FEM_DEMOS["fem-material"].defaults, progress=False, report=False)
    started = time.perf_counter()
    result = sysid.identify(exp, target, start, config)
    errors = {q: sysid.relative_error(q, result.theta[q], truth[q]) for q in FREE}
    return {"scene": scene, "start": factor, "contact": contact, "errors": errors,
            "meets_target": all(e < TARGET for e in errors.values()),
            "converged": bool(result.convergence.converged),
            "floor_ratio": float(result.loss / max(result.convergence.noise_floor, 1e-300)),
            "rounds": int(result.history.get("rounds", 1)), "wall_s": time.perf_counter() - started,
            "kept_start": bool(result.history.get("kept_start", False))}


def table(results: dict) -> str:
    lines = ["| scene | contact | start | fem_mu | fem_lambda | loss / noise floor | rounds | wall |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        e = r["errors"]
        lines.append(f"| {r['scene']} | {r['contact']} | {r['start']:g}x | {e['fem_mu']:.1e} | {e['fem_lambda']:.1e} | "
                     f"{r['floor_ratio']:.2g} | {r['rounds']} | {r['wall_s']:.0f} s |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="only print the table of the JSON")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(RESULTS.read_text())))
        return
    rows = []
    for scene, factor, contact in RUNS:
        row = run(scene, factor, contact)
        print(json.dumps(row), flush=True)
        rows.append(row)
    results = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
               "date": time.strftime("%Y-%m-%d"), "target": TARGET, "rows": rows}
    RESULTS.write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
