"""Chaos, fitted (issue 37, item 4): both arm lengths of a double pendulum from a 20 s video.

Scene: gradSim's double pendulum (`scenes.ode.double_pendulum`: l1 = l2 = 1 m, m1 = m2 = 1 kg, g = 10,
released at rest from (3 pi / 7, 3 pi / 4)), 600 frames at 30 fps (4 Tsit5 steps per frame), rendered at SIZE
px from 8 m. Every fit starts 5 % off: l1 = 1.05, l2 = 0.95. Cases (each in its own process with --cases):

- horizon: the gradient horizon of the full-horizon loss at that start (`diagnostics.horizon.gradient_horizon`,
  forward mode, every STRIDE-th frame as a horizon): where float32 and float64 gradients part by 10 %, and the
  window length it suggests (`window_length_for`);
- full: a full-horizon fit (one window over the 600 frames; Adam, then Levenberg-Marquardt through all of it);
- multiple: multiple shooting over windows of WINDOW frames overlapping by WINDOW // 4, start states read off
  the video (`sysid.windows.starts.estimate_window_states`), a few Adam iterations (join weight tightened from
  0.1 to 10), then Gauss-Newton multiple shooting on the lengths and every start state
  (`sysid.windows.shooting.polish_multiple`);
- multiple-run: the same with the start states from a run of the 5 %-off guess (the old default).

Writes benchmarks/results/chaos.json (merging the cases run).

    python benchmarks/bench_chaos.py --cases horizon,full,multiple,multiple-run
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
TRUTH = (1.0, 1.0)
START = (1.05, 0.95)


def _experiment(size: int, frames: int):
    from gradsim_jax.scenes.ode import double_pendulum
    from gradsim_jax.sysid import simulate_video

    exp = double_pendulum(size=size, frames=frames)
    return exp, simulate_video(exp, {})[1]


def _lengths(theta) -> list:
    import numpy as np

    return [float(v) for v in np.ravel(theta["pendulum_length"])]


def run_case(case: str, args) -> dict:
    import jax.numpy as jnp
    import numpy as np

    from gradsim_jax.sysid.windows.windowed import fit_windowed
    from gradsim_jax.fit.windows import window_length_for

    exp, target = _experiment(args.size, args.frames)
    start = {"pendulum_length": np.array([START], np.float32)}
    started = time.perf_counter()
    if case == "horizon":
        from gradsim_jax.diagnostics.horizon import gradient_horizon
        from gradsim_jax.diagnostics.problem import SceneProblem
        from gradsim_jax.sysid.experiment import as_theta

        problem = SceneProblem(exp, np.asarray(target), ("pendulum_length",), as_theta(exp, start), None, "rgba",
                               args.stride, (), "bench_chaos")
        result = gradient_horizon(problem.horizon_losses, problem.params, free=problem.free,
                                  times=problem.loss_frames * exp.frame_dt, mode="forward",
                                  horizon_losses_forward=lambda p: problem.horizon_losses(p, dense=True),
                                  progress=True)
        window = (None if result.horizon is None else
                  window_length_for(max(1, round(result.horizon / exp.frame_dt * exp.substeps)), exp.substeps))
        return {"case": case, **result.as_dict(), "suggested_window": window,
                "wall_time_s": time.perf_counter() - started}
    kw = {"full": dict(window=args.frames, shooting="truncated"),  # (its polish takes scalar quantities only)
          "multiple": dict(window=args.window, shooting="multiple", start_from="video", frame_stride=args.stride,
                           state_learning_rate=args.state_learning_rate, polish=args.polish_multiple),
          "multiple-run": dict(window=args.window, shooting="multiple", start_from="run",
                               frame_stride=args.stride, state_learning_rate=args.state_learning_rate)}[case]

    def callback(it, theta, loss):
        if it % 5 == 0:
            print(f"[{case}] iteration {it}: loss {loss:.4e}, lengths {_lengths(theta)}", flush=True)

    iterations = args.iterations_multiple if case.startswith("multiple") else args.iterations
    result = fit_windowed(exp, target, start, ["pendulum_length"], iterations=iterations,
                          learning_rate=args.learning_rate, progress=False, callback=callback, **kw)
    lengths = _lengths(result.theta)
    errors = [abs(v - t) / t for v, t in zip(lengths, TRUTH)]
    history = {"loss": [float(v) for v in result.history["loss"]]}
    if "polish" in result.history:
        history["polish"] = result.history["polish"]
    row = {"case": case, "window": result.windows.length, "overlap": result.windows.overlap,
           "windows": result.windows.count, "frame_stride": result.windows.stride, "start_from": result.start_from,
           "recovered": lengths, "relative_error": errors, "within_1e-3": bool(max(errors) < 1e-3),
           "terms": result.terms, "history": history, "wall_time_s": time.perf_counter() - started}
    if result.start_fit is not None:
        from gradsim_jax.sysid.windows.runs import join_gap
        from gradsim_jax.sysid.windows.runs import START_Q, START_QD, window_states

        truth = window_states(exp, {}, result.windows)
        row["start_fit"] = result.start_fit
        row["start_estimate_error"] = {
            "pose_rad_max": float(np.max(np.abs(join_gap(np.asarray(result.starts[START_Q]),
                                                         np.asarray(truth[START_Q]), 2.0 * np.pi)))),
            "rate_rad_s_max": float(np.max(np.abs(np.asarray(result.starts[START_QD]) - np.asarray(truth[START_QD])))),
        }
    del jnp
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="horizon,full,multiple,multiple-run")
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--window", type=int, default=15)
    parser.add_argument("--stride", type=int, default=2, help="compared frames: every STRIDE-th")
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--learning-rate", type=float, default=0.02)
    parser.add_argument("--state-learning-rate", type=float, default=0.3,
                        help="Adam step of the start states, in units of their scales (0.01 rad, 0.3 rad/s)")
    parser.add_argument("--polish-multiple", type=int, default=10,
                        help="Gauss-Newton steps of multiple shooting (`sysid.windows.shooting.polish_multiple`)")
    parser.add_argument("--iterations-multiple", type=int, default=10, help="Adam iterations before them")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(run_case(args.one, args), default=lambda o: getattr(o, "tolist", lambda: str(o))()),
              flush=True)
        return
    started = time.perf_counter()
    procs = {}
    for case in args.cases.split(","):
        cmd = [sys.executable, __file__, "--one", case]
        for key, value in vars(args).items():
            if key not in ("cases", "one"):
                cmd += [f"--{key.replace('_', '-')}", str(value)]
        procs[case] = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    rows = {}
    for case, proc in procs.items():
        for line in proc.stdout:
            print(line, end="", flush=True)
            if line.startswith("RESULT "):
                rows[case] = json.loads(line[len("RESULT "):])
        proc.wait()
    path = RESULTS / "chaos.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update({
        "scene": f"gradSim double pendulum (l1 = l2 = 1 m, m = 1 kg, g = 10, from (3 pi / 7, 3 pi / 4)), "
                 f"{args.frames} frames at 30 fps, {args.size} px",
        "truth": list(TRUTH), "start": list(START),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores; cases ran in parallel",
        "date": time.strftime("%Y-%m-%d"),
    })
    data.setdefault("cases", {}).update({case: {**row, "settings": {k: v for k, v in vars(args).items() if k != "one"}}
                                         for case, row in rows.items()})
    data["wall_time_s_last_run"] = time.perf_counter() - started
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    print(f"written {path}")


if __name__ == "__main__":
    main()
