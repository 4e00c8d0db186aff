"""Batched fits: throughput of N members fitted at once against N separate fits, per batching mode.

Each case is a rendered system-identification fit (the Adam stage of `gradsim-jax fit`: simulate, render,
image loss, gradient, Adam) of N starts of one video, run by `fit_batched` in each mode:

- vmap: one program on the whole batch;
- map: `lax.map` over members inside one program (one member at a time; "map/2": two at a time);
- sequential: the members one after another by one compiled step (N separate runs, compiled once);
- separate fit() calls: `gradsim_jax.fit.fit` on one member, its wall time (compilation included, as a
  fresh call compiles again) times N: what N separate runs of `gradsim-jax fit` cost.

Each mode runs `--repeats` times, interleaved with the others (the load of a shared machine drifts); the
minimum is reported. "first" is the first iteration (tracing and compilation included); "iteration" the median wall time of one
later iteration of all N members; "total" first + (steps - 1) x iteration.

    python benchmarks/bench_batched.py                # table + benchmarks/results/batched.json
    python benchmarks/bench_batched.py --members 4 --steps 4 --cases spring
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]

#: The scene of tests/cli/test_cli_restarts.py (a cloth springing back and forth, 16 px, 16 frames of 8
#: substeps) and the README's example scene (a pushed cloth, 32 px, 20 frames of 32 substeps).
CASES = {
    "spring": ("spring cloth 3x3 particles, 16 px, 16 frames x 8 substeps", None),
    "example": ("examples/cloth_scene.toml: 5x5 particles, 32 px, 20 frames x 32 substeps",
                ROOT / "examples" / "cloth_scene.toml"),
}


def _experiment(case: str):
    from gradsim_jax.scenefile import load_scene

    _, path = CASES[case]
    if path is None:
        sys.path.insert(0, str(ROOT / "tests" / "cli"))
        from test_cli_restarts import SCENE

        path = Path(tempfile.mkdtemp()) / "spring.toml"
        path.write_text(SCENE)
    spec = load_scene(path)
    return spec, spec.experiment()


def measure(case: str, members: int, steps: int, repeats: int) -> list[dict]:
    import dataclasses

    import jax
    import optax

    from gradsim_jax import sysid
    from gradsim_jax.fit import fit
    from gradsim_jax.fit.batched import fit_batched, random_starts
    from gradsim_jax.sysid.experiment import as_theta, split_data, with_data
    from gradsim_jax.sysid import make_loss
    from gradsim_jax.sysid.quantities import transforms_for

    spec, exp = _experiment(case)
    _, target = sysid.simulate_video(exp, {})
    config = dataclasses.replace(spec.fit_config, loss="rgba")
    free = config.free
    theta0 = as_theta(exp, spec.initial_theta(exp))
    tf = transforms_for(free)
    # Starts within a factor 1.5: the members stay in the stable range of the explicit integrator.
    starts = random_starts({n: theta0[n] for n in free}, free, members, key=jax.random.key(0), spread=1.5,
                           transforms=tf)

    def loss_fn(theta):
        theta, e, tgt = split_data(exp, theta)
        return make_loss(e, tgt, "rgba")(theta)

    params = with_data(theta0, exp, target)
    modes = (("vmap", "vmap", None), ("map", "map", None), ("map/2", "map", 2), ("sequential", "sequential", None))
    timings: dict = {label: [] for label, _, _ in modes}
    singles = []
    # Interleaved repeats (each compiles afresh): the machine's load drifts, so every mode sees all of it.
    for _ in range(repeats):
        for label, mode, size in modes:
            r = fit_batched(loss_fn, params, batch=starts, free=free, transforms=tf, optimizer=optax.adam(0.05),
                            steps=steps, mode=mode, map_batch_size=size, progress=False)
            timings[label].append((r.timing["first_s"], r.timing["iteration_s"]))
            print(f"  {case} {label:<11} first {r.timing['first_s']:7.2f} s  iteration "
                  f"{r.timing['iteration_s'] * 1e3:9.1f} ms", flush=True)
        one = {n: starts[n][0] for n in free}
        started = time.perf_counter()
        fit(loss_fn, {**params, **one}, free=free, transforms=tf, optimizer=optax.adam(0.05), steps=steps,
            progress=False)
        singles.append(time.perf_counter() - started)
        print(f"  {case} separate fit(): {singles[-1]:.2f} s each, x {members}", flush=True)
    rows = []
    for label, _, _ in modes:
        first = min(t[0] for t in timings[label])
        it = min(t[1] for t in timings[label])
        rows.append({"case": case, "mode": label, "members": members, "steps": steps, "first_s": first,
                     "iteration_s": it, "total_s": first + (steps - 1) * it,
                     "member_iterations_per_s": members / it, "repeats": timings[label]})
    single = min(singles)
    rows.append({"case": case, "mode": "separate fit() calls", "members": members, "steps": steps,
                 "first_s": None, "iteration_s": None, "total_s": single * members,
                 "member_iterations_per_s": None, "repeats": singles})
    return rows


def machine() -> str:
    import jax

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} ({jax.default_backend()}), "
            f"load average {load} at the start")


def table(data: dict) -> str:
    lines = [f"Batched fits (`benchmarks/bench_batched.py`; {data['machine']}, {data['date']}): {data['members']} "
             f"starts of one video, {data['steps']} Adam iterations each.", "",
             "| scene | batching | first iteration (s) | one iteration of all (ms) | total (s) "
             "| vs separate fit() calls |",
             "|---|---|---:|---:|---:|---:|"]
    for case in data["cases"]:
        rows = [r for r in data["rows"] if r["case"] == case]
        separate = next(r["total_s"] for r in rows if r["mode"] == "separate fit() calls")
        for r in rows:
            first = "" if r["first_s"] is None else f"{r['first_s']:.2f}"
            it = "" if r["iteration_s"] is None else f"{r['iteration_s'] * 1e3:.1f}"
            lines.append(f"| {case} | {r['mode']} | {first} | {it} | {r['total_s']:.1f} | "
                         f"{separate / r['total_s']:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--cases", default="spring,example", help=f"comma-separated: {', '.join(CASES)}")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats; the minimum is reported")
    parser.add_argument("--out", type=Path, default=RESULTS / "batched.json")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    data = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "members": args.members, "steps": args.steps,
            "repeats": args.repeats,
            "cases": cases, "descriptions": {c: CASES[c][0] for c in cases}, "rows": []}
    for case in cases:
        data["rows"] += measure(case, args.members, args.steps, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1))
    print(table(data))


if __name__ == "__main__":
    main()
