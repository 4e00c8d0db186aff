"""Windowed against full-horizon fits on gradSim's demo cloth (issue 12): mass and stiffness from a rendered video.

Scene: `scenes.gradsim_demo_cloth` (20 x 10 cells, 231 particles of 1 kg, two anchor springs), 60 fps with 32
substeps (dt = 1/1920 s), 90 frames = 2880 steps = 1.5 s; the target video is rendered from the true
parameters (mass 1 kg, stiffness tri_ke 1e4 N/m) at SIZE x SIZE pixels; every STRIDE-th frame is compared.
Both fits start 40 % off (mass x 1.4, stiffness x 0.6) and run the same Adam (log space, cosine-decayed
learning rate, same iterations) then the same Levenberg-Marquardt polish on the same frames:
- full: one window over the whole recording (the loss of `sysid.make_loss`; the polish's Jacobian through
  all 2880 steps, as `sysid.identify` does);
- truncated: the same forward run and loss value, the gradient stopped every WINDOW frames, WINDOW =
  `window_length_for(1440, 32)`: issue 12's horizon (float32 and float64 gradients 10 % apart at 1440 steps);
  the polish's Jacobian truncated the same way;
- multiple (optional, --cases): multiple shooting, windows of WINDOW frames overlapping by WINDOW // 4 (Adam
  only: its start states are too many unknowns for the polish).
Each fit runs in its own process, all at once. Reported per fit: the recovered values and their relative
errors, the full-horizon image loss at the result (one common yardstick), the history, and wall time.

    python benchmarks/bench_windowed.py                 # full + truncated, writes benchmarks/results/windowed.json
    python benchmarks/bench_windowed.py --cases full,truncated,multiple --iterations 80 --polish 0
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
TRUTH = {"mass": 1.0, "stiffness": 1.0e4}
START = {"mass": 1.4, "stiffness": 0.6e4}
HORIZON_STEPS = 1440  # issue 12: float32 / float64 gradients of this cloth 10 % apart at 1440 steps
SUBSTEPS, FRAMES = 32, 90


def _experiment(size: int, frames: int):
    from gradsim_jax.scenes import gradsim_demo_cloth
    from gradsim_jax.scenes.demos import finish_experiment
    from gradsim_jax.sysid import default_theta, simulate_video

    topology, params, state0 = gradsim_demo_cloth().build()
    theta = default_theta(topology, params, state0, list(TRUTH))
    exp = finish_experiment("gradsim_demo_cloth", topology, params, state0, theta, size=size, frames=frames,
                            substeps=SUBSTEPS, frame_dt=1.0 / 60.0, elevation=10.0, azimuth=0.0)
    return exp, simulate_video(exp, theta)[1]


def run_case(case: str, args) -> dict:
    """One fit in this process; returns its figures."""
    import jax
    import numpy as np

    from gradsim_jax.sysid.windows.windowed import fit_windowed
    from gradsim_jax.fit.windows import window_length_for
    from gradsim_jax.sysid import compiled, make_loss
    from gradsim_jax.sysid.experiment import as_theta

    exp, target = _experiment(args.size, args.frames)
    window = window_length_for(HORIZON_STEPS, SUBSTEPS, safety=args.safety)
    kw = {"full": dict(window=args.frames, shooting="truncated"),
          "truncated": dict(window=window, shooting="truncated"),
          "multiple": dict(window=window, overlap=window // 4, shooting="multiple")}[case]
    losses = []

    def callback(it, theta, loss):
        losses.append(loss)
        if it % 10 == 0:
            print(f"[{case}] iteration {it}: loss {loss:.4e}, mass {float(np.ravel(theta['mass'])[0]):.4f}, "
                  f"stiffness {float(np.ravel(theta['stiffness'])[0]):.1f}", flush=True)

    polish = args.polish if kw["shooting"] == "truncated" else 0
    result = fit_windowed(exp, target, START, list(TRUTH), iterations=args.iterations,
                          learning_rate=args.learning_rate, frame_stride=args.stride, polish=polish, progress=False,
                          callback=callback, **kw)
    theta = as_theta(exp, {n: result.theta[n] for n in TRUTH})
    full_loss = compiled(exp, lambda e, th, tgt: make_loss(e, tgt, frame_stride=args.stride)(th),
                         ("bench_windowed_full_loss", args.stride))(theta, jax.numpy.asarray(target))
    values = {n: float(np.ravel(result.theta[n])[0]) for n in TRUTH}
    return {
        "case": case, **kw, "frame_stride": args.stride, "polish_steps": polish,
        "recovered": values,
        "relative_error": {n: abs(values[n] / TRUTH[n] - 1.0) for n in TRUTH},
        "within_1_percent": all(abs(values[n] / TRUTH[n] - 1.0) < 0.01 for n in TRUTH),
        "full_horizon_loss_at_result": float(full_loss),
        "final_windowed_loss": result.loss,
        "terms": result.terms,
        "history": {"loss": result.history["loss"],
                    **{n: [float(np.ravel(v)[0]) for v in result.history["params"][n]] for n in TRUTH},
                    "polish": result.history.get("polish")},
        "wall_time_s": result.wall_time,
        "start_from": result.start_from, "start_fit": result.start_fit,
        "start_estimate_error": _start_error(exp, result),
    }


def _start_error(exp, result):
    """Largest distance of the window start states from the truth's (multiple shooting), or None."""
    import numpy as np

    from gradsim_jax.sysid.windows.runs import START_V, START_X, window_states

    if not result.starts or START_X not in result.starts:
        return None
    truth = window_states(exp, {}, result.windows)
    return {"position_m_max": float(np.max(np.abs(np.asarray(result.starts[START_X]) - np.asarray(truth[START_X])))),
            "velocity_m_s_max": float(np.max(np.abs(np.asarray(result.starts[START_V]) - np.asarray(truth[START_V]))))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="full,truncated", help="comma-separated: full, truncated, multiple")
    parser.add_argument("--iterations", type=int, default=50, help="Adam iterations")
    parser.add_argument("--polish", type=int, default=10, help="Levenberg-Marquardt steps after Adam")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--size", type=int, default=48, help="image size (pixels)")
    parser.add_argument("--frames", type=int, default=FRAMES, help="frames at 60 fps (32 substeps each)")
    parser.add_argument("--stride", type=int, default=3, help="compare every STRIDE-th frame")
    parser.add_argument("--safety", type=float, default=1.0 / 3.0, help="window = safety x horizon steps / substeps")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one case, print its JSON
    parser.add_argument("--out", default=str(RESULTS / "windowed.json"))
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_case(args.one, args)), flush=True)
        return
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - {"full", "truncated", "multiple"})
    if unknown:
        parser.error(f"unknown case(s) {unknown}")
    started = time.perf_counter()
    load_before = os.getloadavg()
    forwarded = ["--iterations", str(args.iterations), "--polish", str(args.polish), "--learning-rate", str(args.learning_rate), "--size",
                 str(args.size), "--frames", str(args.frames), "--stride", str(args.stride), "--safety", str(args.safety)]
    procs = {c: subprocess.Popen([sys.executable, __file__, "--one", c, *forwarded], stdout=subprocess.PIPE, text=True)
             for c in cases}
    rows = []
    for case, proc in procs.items():
        result = None
        for line in proc.stdout:
            if line.startswith("RESULT "):
                result = json.loads(line[len("RESULT "):])
            else:
                print(line, end="", flush=True)
        if proc.wait() != 0 or result is None:
            raise SystemExit(f"case {case} failed (exit {proc.returncode})")
        rows.append(result)
    import jax

    out = {
        "scene": "gradSim demo cloth 20 x 10, 231 particles of 1 kg + 2 anchors, dt = 1/1920 s, "
                 f"{args.frames} frames x {SUBSTEPS} substeps = {args.frames * SUBSTEPS} steps ({args.frames / 60:.1f} s), "
                 f"{args.size} px video, one frame in {args.stride} compared",
        "truth": TRUTH, "start": START, "horizon_steps": HORIZON_STEPS, "iterations": args.iterations,
        "polish_steps": args.polish,
        "learning_rate": args.learning_rate,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} "
                   f"({jax.default_backend()}); load average {load_before[0]:.1f} at start, "
                   f"{os.getloadavg()[0]:.1f} at end (shared machine: wall times inflated)",
        "date": time.strftime("%Y-%m-%d"),
        "wall_time_s": time.perf_counter() - started,
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    for r in rows:
        err = r["relative_error"]
        print(f"{r['case']:>9}: mass {r['recovered']['mass']:.4f} ({100 * err['mass']:.2f} %), stiffness "
              f"{r['recovered']['stiffness']:.1f} ({100 * err['stiffness']:.2f} %), full-horizon loss "
              f"{r['full_horizon_loss_at_result']:.3e}, {r['wall_time_s']:.0f} s")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
