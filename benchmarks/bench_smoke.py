"""Smoke against PhiFlow (issue 38): the same plume in gradsim-jax (`physics.smoke`) and in PhiFlow 3.4.0's JAX
backend (`benchmarks/reference/phiflow_plume.py`, run in its own interpreter: PhiFlow is no dependency of ours),
in one run of this script:

- accuracy: float64 both, our no-slip walls (PhiFlow's ZERO extrapolation) and our default free slip; the
  relative L2 difference of the density after every step (reported at --compare-at and at the end);
- time: float32 both (float64 with --time-precision 64), the median of --repeats calls after compiling;
  forward = the --steps steps and the mean squared final density, gradient = that and its gradient with respect
  to the initial velocity field (both jit-compiled whole, `block_until_ready` on the result).

    python -m venv /tmp/phivenv && /tmp/phivenv/bin/pip install phiflow==3.4.0 jax==0.10.2
    python benchmarks/bench_smoke.py --phiflow /tmp/phivenv/bin/python            # 128 x 128, 100 steps
    python benchmarks/bench_smoke.py --size 32 --steps 20 --phiflow /tmp/phivenv/bin/python

Writes benchmarks/results/smoke.json (`table()` is docs/benchmarks.md's table, via run_all.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SCRIPT = HERE / "reference" / "phiflow_plume.py"


def _phiflow(python: str, out: Path, args, precision: int, timed: bool, extra=()) -> dict:
    cmd = [python, str(SCRIPT), "--size", str(args.size), "--steps", str(args.steps), "--tolerance",
           str(args.tolerance), "--precision", str(precision), "--out", str(out), *extra]
    if timed:
        cmd += ["--time", "--repeats", str(args.repeats)]
    started = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if run.returncode != 0:
        raise SystemExit(f"PhiFlow failed ({' '.join(cmd)}):\n{run.stderr[-3000:]}")
    data = dict(np.load(out))
    data["wall_s"] = time.perf_counter() - started
    return data


def _ours(args, data, slip: str, dtype):
    """(topology, params, initial state) of our plume: PhiFlow's settings, its inflow mask."""
    from gradsim_jax.physics.smoke import SmokeTopology, smoke_params, smoke_state

    n = args.size
    top = SmokeTopology((n, n), 1.0, "closed", "semi-lagrangian", "cg", args.tolerance, 5000, slip=slip)
    params = smoke_params(top, buoyancy=args.buoyancy, inflow_rate=args.rate, inflow_mask=data["mask"], dtype=dtype)
    return top, params, smoke_state(top, dtype=dtype)


def accuracy(args, data, slip: str) -> dict:
    import jax
    import jax.numpy as jnp

    from gradsim_jax.physics.smoke import smoke_rollout

    top, params, state0 = _ours(args, data, slip, jnp.float64)
    traj = jax.jit(lambda p, s: smoke_rollout(top, p, s, frames=args.steps, frame_dt=args.dt))(params, state0)
    ours = np.asarray(traj.density)
    theirs = data["density"]
    rel = [float(np.linalg.norm(ours[k] - theirs[k]) / max(np.linalg.norm(theirs[k]), 1e-300))
           for k in range(1, args.steps + 1)]
    k = min(args.compare_at, args.steps)
    return {"slip": slip, "relative_l2_per_step": rel, f"relative_l2_step_{k}": rel[k - 1],
            "relative_l2_final": rel[-1], "total_density_ours": float(ours[-1].sum()),
            "total_density_phiflow": float(theirs[-1].sum())}


def timings(args, data, dtype=None) -> dict:
    import dataclasses

    import jax
    import jax.numpy as jnp

    from gradsim_jax.physics.smoke import smoke_rollout

    top, params, state0 = _ours(args, data, "no-slip", jnp.float32 if dtype is None else dtype)

    def final_loss(u, v):
        s = dataclasses.replace(state0, u=u, v=v)
        traj = smoke_rollout(top, params, s, frames=args.steps, frame_dt=args.dt)
        return jnp.mean(traj.density[-1] ** 2)

    forward = jax.jit(final_loss)
    gradient = jax.jit(jax.value_and_grad(final_loss, argnums=(0, 1)))
    out = {}
    for name, fn in (("forward", forward), ("gradient", gradient)):
        started = time.perf_counter()
        jax.block_until_ready(fn(state0.u, state0.v))
        out[f"{name}_compile_s"] = time.perf_counter() - started
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            jax.block_until_ready(fn(state0.u, state0.v))
            times.append(time.perf_counter() - started)
        out[f"{name}_s"] = float(np.median(times))
    out["final_loss"] = float(forward(state0.u, state0.v))
    return out


def table(data: dict) -> str:
    """The markdown tables of smoke.json (also run_all.py's)."""
    s = data["settings"]
    lines = [f"Smoke against PhiFlow {data['phiflow']} (`benchmarks/bench_smoke.py`; {data['machine']}, "
             f"{data['date']}): a plume in a closed {s['size']} x {s['size']} box, {s['steps']} steps of dt = "
             f"{s['dt']}, semi-Lagrangian, CG to {s['tolerance']} relative. Accuracy in float64 against PhiFlow "
             f"run with `{s['accuracy_args']}`: the relative L2 difference of the density field. Time in float"
             f"{s.get('time_precision', 32)}: median of "
             f"{s['repeats']} calls, compile apart; gradient = forward + the gradient of the mean squared final "
             "density w.r.t. the initial velocity field.", "",
             "| walls (ours) | density difference at step " + str(data["compare_at"]) + " | at the end |",
             "|---|---:|---:|"]
    key = f"relative_l2_step_{data['compare_at']}"
    for a in data["accuracy"]:
        lines.append(f"| {a['slip']} | {a[key]:.1e} | {a['relative_l2_final']:.1e} |")
    if not data.get("time"):
        return "\n".join(lines + ["", "(accuracy only: no timing in this run)"])
    lines += ["", "| engine | forward (s) | forward + gradient (s) | gradient / forward | compile forward / "
              "gradient (s) |", "|---|---:|---:|---:|---:|"]
    for name in ("gradsim-jax", "PhiFlow"):
        t = data["time"][name]
        lines.append(f"| {name} | {t['forward_s']:.2f} | {t['gradient_s']:.2f} | "
                     f"{t['gradient_s'] / t['forward_s']:.1f} | {t['forward_compile_s']:.1f} / "
                     f"{t['gradient_compile_s']:.1f} |")
    sp = data["speedup"]
    ph = data["time"]["PhiFlow"]
    lines.append(f"\nSpeed-up over PhiFlow: forward {sp['forward']:.1f}x, gradient {sp['gradient']:.1f}x. PhiFlow's "
                 f"float{s.get('time_precision', 32)} CG met the tolerance in {ph['steps_projected_to_tolerance']} of "
                 f"{s['steps']} steps "
                 + (f"(its divergence check stopped it early from step {ph['first_step_short_of_tolerance']} on; "
                    f"largest relative residual {ph['largest_projection_residual']:.1e}): it did less work than ours."
                    if ph["first_step_short_of_tolerance"] else "."))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phiflow", default=os.environ.get("PHIFLOW_PYTHON"),
                        help="a Python interpreter with phiflow 3.4.0 and jax (or $PHIFLOW_PYTHON)")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--compare-at", type=int, default=50)
    parser.add_argument("--dt", type=float, default=1.0)
    parser.add_argument("--buoyancy", type=float, default=0.1)
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--accuracy-args", default="--method scipy-direct",
                        help="phiflow_plume.py's arguments for the float64 reference (default: an exact sparse solve; "
                             "PhiFlow's CG at 1e-5 stops at its divergence check at step 62 of the 128 x 128 plume, "
                             "its biCG-stab(2) at step 84)")
    parser.add_argument("--time-args", default="--suppress-diverged",
                        help="phiflow_plume.py's arguments for the float32 timing (default: CG at --tolerance, its "
                             "divergence check's partial result kept)")
    parser.add_argument("--no-time", action="store_true", help="accuracy only (no timing runs)")
    parser.add_argument("--time-precision", type=int, choices=(32, 64), default=32,
                        help="float bits of both timing runs (default 32; 64: PhiFlow's CG then meets the tolerance "
                             "where its float32 CG runs to its iteration cap)")
    parser.add_argument("--out", default=None, help="results file (default benchmarks/results/smoke.json)")
    parser.add_argument("--table", action="store_true", help="only print the table of smoke.json")
    args = parser.parse_args()
    path = Path(args.out) if args.out else RESULTS / "smoke.json"
    if args.table:
        print(table(json.loads(path.read_text())))
        return
    if not args.phiflow:
        raise SystemExit("bench_smoke: give --phiflow PYTHON (an interpreter with phiflow 3.4.0; see the docstring)")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        ref64 = _phiflow(args.phiflow, Path(tmp) / "f64.npz", args, 64, False, args.accuracy_args.split())
        ref32 = None if args.no_time else _phiflow(args.phiflow, Path(tmp) / "timed.npz", args, args.time_precision,
                                                   True, args.time_args.split())
    import jax
    import jax.numpy as jnp

    if args.time_precision == 64:
        jax.config.update("jax_enable_x64", True)
    # float32 timing before x64 is switched on for the accuracy runs
    ours = None if args.no_time else timings(args, ref64, jnp.float64 if args.time_precision == 64 else jnp.float32)
    jax.config.update("jax_enable_x64", True)
    acc = [accuracy(args, ref64, slip) for slip in ("no-slip", "free")]
    theirs = None if args.no_time else _their_times(args, ref32, ref64)
    data = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} CPU",
        "phiflow": json.loads(str(ref64["settings"]))["phiflow"],
        "settings": {k: getattr(args, k) for k in ("size", "steps", "dt", "buoyancy", "rate", "tolerance", "repeats")}
        | {"accuracy_args": args.accuracy_args, "time_args": None if args.no_time else args.time_args,
           "time_precision": args.time_precision},
        "compare_at": min(args.compare_at, args.steps),
        "accuracy": acc,
        "time": None if args.no_time else {"gradsim-jax": ours, "PhiFlow": theirs},
        "speedup": None if args.no_time else {"forward": theirs["forward_s"] / ours["forward_s"],
                                              "gradient": theirs["gradient_s"] / ours["gradient_s"]},
        "load_average": list(os.getloadavg()),
    }
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(table(data))


def _their_times(args, ref32, ref64) -> dict:
    theirs = {k: float(ref32[k]) for k in ("forward_s", "gradient_s", "forward_compile_s", "gradient_compile_s")}
    theirs["wall_s"] = float(ref32["wall_s"])
    # how far PhiFlow's float32 CG got in each step (its eager run): |div| after / before the projection
    res = np.asarray(ref32["residual"], np.float64)
    theirs["steps_projected_to_tolerance"] = int(np.sum(res <= 2 * args.tolerance))
    theirs["first_step_short_of_tolerance"] = (int(np.argmax(res > 2 * args.tolerance)) + 1
                                               if np.any(res > 2 * args.tolerance) else None)
    theirs["largest_projection_residual"] = float(res.max())
    return theirs


if __name__ == "__main__":
    sys.exit(main())
