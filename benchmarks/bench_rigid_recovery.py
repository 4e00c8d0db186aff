"""Rigid-body system identification from 64 px video (issue 9, gradSim Tables 1 and 2): each quantity fitted
from a start exactly 50 % off, the others known, on the demo scene (`gradsim-jax demo rigid-mass`,
`rigid-material --estimate Q`, `rigid-restitution`) and on two other scenes per quantity with other true
values, boxes, pushes / throws and cameras. The fit settings (Adam iterations, learning rate, horizon,
Levenberg-Marquardt polish, rgba loss) are the CLI demos' own (`catalog.RIGID_DEMOS`); the demo scenes are
built by `scenes.catalog.rigid_demo_experiment`.

Targets: body_mass relative error < 1e-5 (gradSim Table 1: 9.0e-5); body_ke, body_kf, body_mu < 1e-3
(Table 2: 0.003, 0.001, 0.007); body_kd and restitution are reported.

    python benchmarks/bench_rigid_recovery.py                       # every row (about 40 min on 2 cores)
    python benchmarks/bench_rigid_recovery.py --only body_mass --scenes demo,other1
    python benchmarks/bench_rigid_recovery.py --table               # only print the table of the JSON

Rows are merged into the JSON (default benchmarks/results/rigid_recovery.json) by (scene, quantity, start
sign), so that separate runs add up; the table printed is that of every row in the file.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"

#: quantity: (CLI demo, start signs, target relative error or None: report only)
QUANTITIES = {
    "body_mass": ("rigid-mass", (+1, -1), 1e-5),
    "body_ke": ("rigid-material", (+1,), 1e-3),
    "body_kd": ("rigid-material", (+1,), None),
    "body_kf": ("rigid-material", (+1,), 1e-3),
    "body_mu": ("rigid-material", (+1,), 1e-3),
    "restitution": ("rigid-restitution", (+1,), None),
}

#: The two other scenes of each demo: builder keyword arguments (other true values, box, push / throw and
#: camera). Each is stable with a mass guessed 50 % low or a coefficient guessed 50 % high (checked below).
OTHER_SCENES = {
    "rigid-mass": {
        # gradSim-like heavy box (tests/sysid: mass recovered on another scene), camera high on the other side
        "other1": dict(mass=2.5, half_extents=(0.1, 0.12, 0.2), push=(15.0, 0.0, 5.0), contact_ke=2.0e4,
                       contact_kd=80.0, elevation=45.0, azimuth=-60.0),
        # a light, flat box pushed back-and-sideways on softer, grippier ground, camera low from behind
        "other2": dict(mass=0.4, half_extents=(0.12, 0.07, 0.09), push=(3.0, 0.0, -1.5), contact_ke=5.0e3,
                       contact_kd=15.0, contact_kf=20.0, contact_mu=0.6, elevation=15.0, azimuth=120.0),
    },
    "rigid-material": {
        # Estimating kf / mu: the slide (level on the ground, this initial velocity and spin, pulled back by
        # the default known force, half of mu m g at a side-face centre); ke / kd: the first bounce of a level
        # 25 cm drop with this velocity and spin.
        "other1": dict(mass=1.6, half_extents=(0.12, 0.1, 0.14), contact_ke=4.0e3, contact_kd=16.0,
                       contact_kf=30.0, contact_mu=0.55, velocity=(1.2, 0.0, -0.4), omega=(0.0, -1.5, 0.0),
                       elevation=40.0, azimuth=-35.0),
        "other2": dict(mass=0.6, half_extents=(0.1, 0.06, 0.12), contact_ke=1.2e3, contact_kd=6.0,
                       contact_kf=12.0, contact_mu=0.3, velocity=(-1.0, 0.0, 0.6), omega=(0.0, 3.0, 0.0),
                       elevation=20.0, azimuth=70.0),
    },
    "rigid-restitution": {
        "other1": dict(restitution=0.45, mass=2.0, half_extents=(0.12, 0.08, 0.1), height=0.5,
                       omega=(0.0, -4.0, 0.0), contact_mu=0.4, elevation=25.0, azimuth=-40.0),
        "other2": dict(restitution=0.65, mass=0.5, half_extents=(0.08, 0.08, 0.08), height=0.8,
                       omega=(0.0, 2.0, 0.0), contact_mu=0.2, elevation=40.0, azimuth=110.0),
    },
}


def build(quantity: str, scene: str, size: int):
    """The experiment of row (scene, quantity): the CLI's demo scene, or an other scene's builder."""
    from gradsim_jax.scenes import catalog
    from gradsim_jax.scenes import rigid

    demo = QUANTITIES[quantity][0]
    if scene == "demo":
        return catalog.rigid_demo_experiment(demo, (quantity,), size=size)
    kw = dict(OTHER_SCENES[demo][scene], size=size)
    if demo == "rigid-mass":
        return rigid.rigid_mass(**kw)
    if demo == "rigid-restitution":
        return rigid.rigid_restitution(**kw)
    return rigid.rigid_material(estimate=(quantity,), **kw)


def check_stable(exp, quantity: str) -> dict:
    """The penalty model's step numbers at the start guess that is hardest on it (mass 50 % low, a
    coefficient 50 % high); AssertionError when over the limit."""
    from gradsim_jax.scenes import rigid

    p = exp.params.rigid
    if exp.name == "rigid_restitution":
        return {}
    values = {"mass": float(p.mass[0]), "ke": float(p.contact_ke[0]), "kd": float(p.contact_kd[0]),
              "kf": float(p.contact_kf[0])}
    if quantity == "body_mass":
        values["mass"] *= 0.5
    elif quantity[5:] in values:
        values[quantity[5:]] *= 1.5
    limits = rigid.penalty_stability(**values, dt=exp.frame_dt / exp.substeps)
    assert limits["normal"] < 4.0 and limits["friction"] < 2.0, (exp.name, quantity, limits)
    return limits


def fit_row(quantity: str, scene: str, sign: int, size: int) -> dict:
    import jax.numpy as jnp

    from gradsim_jax import sysid
    from gradsim_jax.scenes import catalog

    demo = QUANTITIES[quantity][0]
    settings = catalog.RIGID_DEMOS[demo].defaults
    started = time.perf_counter()
    exp = build(quantity, scene, size)
    check_stable(exp, quantity)
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    initial = dict(truth)
    value = np.asarray(truth[quantity], np.float64) * (1.0 + 0.5 * sign)
    initial[quantity] = jnp.asarray(value, jnp.asarray(truth[quantity]).dtype)
    # The CLI demos' FitConfig (no flags given), without checkpoints or output files.
    config = catalog.demo_fit_config((quantity,), settings, progress=False, report=False)
    result = sysid.identify(exp, target, initial, config)
    wall = time.perf_counter() - started
    err = sysid.relative_error(quantity, result.theta[quantity], truth[quantity])
    target_err = QUANTITIES[quantity][2]
    scalar = lambda v: float(np.ravel(np.asarray(v, np.float64))[0])  # noqa: E731
    return {
        "scene": scene, "demo": demo, "quantity": quantity, "sign": sign,
        "truth": scalar(truth[quantity]), "start": scalar(initial[quantity]),
        "estimate": scalar(result.theta[quantity]), "relative_error": err,
        "target": target_err, "meets_target": None if target_err is None else bool(err < target_err),
        "converged": bool(result.convergence.converged), "reasons": list(result.convergence.reasons),
        "final_loss": float(result.convergence.final_loss), "wall_time_s": wall,
        "scene_kwargs": {} if scene == "demo" else {k: v for k, v in OTHER_SCENES[demo][scene].items()},
        "size": size, "frames": exp.frames, "substeps": exp.substeps, "settings": dict(settings),
    }


def _key(row):
    return (row["scene"], row.get("demo"), row["quantity"], row["sign"], row.get("size", 64))


def merge_rows(path: Path, rows: list, benchmark: str, quantities) -> dict:
    """Merge `rows` into the JSON at `path` (replacing rows of the same scene, demo, quantity, start sign and
    size), sorted by quantity (in the order of `quantities`), scene and sign; returns what was written."""
    old = json.loads(path.read_text()) if path.exists() else {"rows": []}
    keep = {_key(r): r for r in old.get("rows", [])}
    for r in rows:
        keep[_key(r)] = r
    order = {q: i for i, q in enumerate(quantities)}
    scenes = {"demo": 0, "other1": 1, "other2": 2}
    out = {"benchmark": benchmark, "machine": platform.platform(), "processor": platform.processor(),
           "rows": sorted(keep.values(), key=lambda r: (order.get(r["quantity"], 99), scenes.get(r["scene"], 9),
                                                        -r["sign"]))}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    return out


def merge(path: Path, rows: list) -> dict:
    return merge_rows(path, rows, "rigid_recovery", QUANTITIES)


def table(rows) -> str:
    lines = ["| scene | quantity | truth | start | estimate | relative error | target | converged | wall time |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        target = "report" if r["target"] is None else f"< {r['target']:.0e}"
        mark = "" if r["meets_target"] is None else (" ok" if r["meets_target"] else " MISS")
        lines.append(f"| {r['scene']} | {r['quantity']} | {r['truth']:.6g} | {r['start']:.6g} | "
                     f"{r['estimate']:.7g} | {r['relative_error']:.1e}{mark} | {target} | "
                     f"{'yes' if r['converged'] else 'no'} | {r['wall_time_s']:.0f} s |")
    return "\n".join(lines)


def recovery_parser(description: str, out: Path, only_help: str,
                    scenes_help: str = "comma-separated: demo, other1, other2") -> argparse.ArgumentParser:
    """The options every recovery benchmark has: --only, --scenes, --size, --out (rows merged into it) and
    --table (only print the table of --out; see `table_only`)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=None, help=only_help)
    parser.add_argument("--scenes", default="demo,other1,other2", help=scenes_help)
    parser.add_argument("--size", type=int, default=64, help="image size in pixels (default 64)")
    parser.add_argument("--out", type=Path, default=out,
                        help=f"JSON to merge the rows into (default benchmarks/results/{out.name})")
    parser.add_argument("--table", action="store_true", help="only print the table of --out")
    return parser


def table_only(args) -> bool:
    """With --table, print the table of --out and return True (nothing to run)."""
    if args.table:
        print(table(json.loads(args.out.read_text())["rows"]))
    return args.table


def main():
    parser = recovery_parser(__doc__, RESULTS / "rigid_recovery.json",
                             f"comma-separated quantities (default all: {', '.join(QUANTITIES)})")
    parser.add_argument("--sign", choices=("+", "-", "both"), default="both",
                        help="start signs to run, of those the quantity has (default both)")
    args = parser.parse_args()
    if table_only(args):
        return
    names = list(QUANTITIES) if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    bad = [n for n in names if n not in QUANTITIES]
    if bad:
        parser.error(f"--only: unknown {', '.join(bad)}; choose from {', '.join(QUANTITIES)}")
    scenes = [s.strip() for s in args.scenes.split(",") if s.strip()]
    if any(s not in ("demo", "other1", "other2") for s in scenes):
        parser.error("--scenes: choose from demo, other1, other2")
    done = []
    for q in names:
        for scene in scenes:
            for sign in QUANTITIES[q][1]:
                if args.sign != "both" and sign != (1 if args.sign == "+" else -1):
                    continue
                row = fit_row(q, scene, sign, args.size)
                done.append(row)
                merge(args.out, [row])
                print(f"{scene} {q} {'+' if sign > 0 else '-'}50 %: {row['truth']:.6g} -> {row['estimate']:.7g}, "
                      f"error {row['relative_error']:.2e}, converged {row['converged']}, "
                      f"{row['wall_time_s']:.0f} s", flush=True)
    print()
    print(table(done))


if __name__ == "__main__":
    main()
