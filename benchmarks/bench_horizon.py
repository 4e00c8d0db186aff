"""How far gradients stay informative (issue 12), measured by `gradsim_jax.diagnostics.gradient_horizon`.

Cases:
- cloth: gradSim's demo cloth (`scenes.gradsim_demo_cloth`: 20 x 10 cells, two anchor springs, 60 fps with 32
  substeps, dt = 1/1920 s) over 90 frames = 2880 steps; the loss of horizon k is mean(x_k^2) over the
  particles at frame k, differentiated w.r.t. every particle's initial velocity (reverse mode, one pass per
  horizon), in float64 and float32 (issue 12's table: 8.7e-6 at 736 steps, 0.10 at 1440, 0.15 at 2880).
- pendulum: the double pendulum of particles and stiff springs of tests/diagnostics (arms 0.125 m, released
  horizontal), 300 frames of 16 substeps at 60 fps; the loss of horizon k is the outer bob's height at frame
  k; its largest Lyapunov exponent by Benettin's method (float64) predicts the horizon
  t* = ln(0.1 / 2^-24) / lambda.

    python benchmarks/bench_horizon.py            # both, writes benchmarks/results/horizon.json
    python benchmarks/bench_horizon.py --cases cloth
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def cloth_case(every: int = 5) -> dict:
    import jax.numpy as jnp

    import gradsim_jax as gs
    from gradsim_jax.diagnostics import gradient_horizon
    from gradsim_jax.physics import replace_paths
    from gradsim_jax.scenes import gradsim_demo_cloth
    from gradsim_jax.scenes.cloth import DEMO_FRAME_DT, DEMO_SUBSTEPS

    frames = 90
    topology, params, state0 = gradsim_demo_cloth().build()
    horizons = np.arange(every, frames + 1, every)

    def losses(p):
        s0 = replace_paths(p["state"], {"particles.v": p["v"]})
        x = gs.simulate(topology, p["params"], s0, frames=frames, substeps=DEMO_SUBSTEPS,
                        frame_dt=DEMO_FRAME_DT).particles.x
        return jnp.mean(jnp.square(x[every::every]), axis=(1, 2))  # frames every, 2 every, ..., 90

    started = time.perf_counter()
    result = gradient_horizon(losses, {"v": state0.particles.v, "params": params, "state": state0}, free=("v",),
                              times=horizons * DEMO_SUBSTEPS, unit="steps", mode="reverse", progress=True)
    out = result.as_dict()
    out["wall_time_s"] = time.perf_counter() - started
    print(result.table())
    return out


def pendulum_case() -> dict:
    import jax.numpy as jnp

    import gradsim_jax as gs
    from gradsim_jax.diagnostics import gradient_horizon, lyapunov_exponent, predicted_horizon
    from gradsim_jax.physics import replace_paths

    arm, fps, substeps, frames = 0.125, 60.0, 16, 300
    x = np.array([[0.0, 0.0, 0.0], [arm, 0.0, 0.0], [2 * arm, 0.0, 0.0]])
    topology, params, state0 = (gs.particles(x, mass=[0.0, 1.0, 1.0])
                                .add_springs([[0, 1], [1, 2]], ke=2e4, kd=0.0).build())

    def heights(p):
        s0 = replace_paths(p["state"], {"particles.v": p["v"]})
        traj = gs.simulate(topology, p["params"], s0, frames=frames, substeps=substeps, frame_dt=1 / fps)
        return traj.particles.x[1:, 2, 1]

    def advance(state):
        traj = gs.simulate(topology, params, state, frames=1, substeps=substeps, frame_dt=1 / fps)
        return replace_paths(state, {"particles.x": traj.particles.x[-1], "particles.v": traj.particles.v[-1]})

    started = time.perf_counter()
    result = gradient_horizon(heights, {"v": state0.particles.v, "params": params, "state": state0}, free=("v",),
                              times=np.arange(1, frames + 1) / fps, mode="forward", progress=True)
    lam = lyapunov_exponent(advance, state0, steps=2 * frames, dt=1 / fps)
    out = result.as_dict()
    out.update(lyapunov_per_s=lam, predicted_horizon_s=predicted_horizon(lam, result.tol),
               wall_time_s=time.perf_counter() - started)
    out["table"] = out["table"][::10]  # every 10th frame is enough to read the curve
    print(result.table().splitlines()[-2])
    print(f"Lyapunov exponent {lam:.3f} /s -> predicted horizon {out['predicted_horizon_s']:.2f} s; marked "
          f"{result.horizon} s")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="cloth,pendulum", help="comma-separated: cloth, pendulum")
    args = parser.parse_args()
    import jax

    cases = {"cloth": cloth_case, "pendulum": pendulum_case}
    data = {"machine": f"{platform.processor() or platform.machine()}, jax {jax.__version__} "
                       f"({jax.default_backend()})", "date": time.strftime("%Y-%m-%d")}
    for name in args.cases.split(","):
        print(f"== {name}")
        data[name] = cases[name.strip()]()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "horizon.json"
    path.write_text(json.dumps(data, indent=1))
    print(f"written {path}")


if __name__ == "__main__":
    main()
