"""Which adjoint gives the double pendulum's gradient (issue 37)? The derivative of the second bob's final
position with respect to both lengths, through Diffrax's DirectAdjoint, RecursiveCheckpointAdjoint and
BacksolveAdjoint, against float64 central finite differences, over horizons of gradSim's release
(l1 = l2 = 1 m, m1 = m2 = 1 kg, g = 10, (3 pi / 7, 3 pi / 4)); all in float64, Tsit5 at 1/120 s (backsolve:
its adjoint ODE solved with the same fixed steps). Writes benchmarks/results/pendulum_adjoints.json.

    python benchmarks/bench_pendulum_adjoints.py
"""

import dataclasses
import json
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from gradsim_jax.geometry.ode import pendulum  # noqa: E402
from gradsim_jax.physics import simulate  # noqa: E402
from gradsim_jax.physics.ode import OdeSolver  # noqa: E402
from gradsim_jax.physics.pendulum import bob_positions  # noqa: E402


def main():
    top, par, st = pendulum([1.0, 1.0], [1.0, 1.0], [3 * np.pi / 7, 3 * np.pi / 4]).build(gravity=(0.0, -10.0, 0.0))
    rows = []
    for seconds in (0.5, 1.0, 2.0, 5.0):
        frames = int(round(seconds * 30))

        def final(lengths, adjoint):
            ode = dataclasses.replace(par.ode, length=lengths)
            traj = simulate(top, dataclasses.replace(par, ode=ode), st, frames=frames, substeps=4, frame_dt=1 / 30,
                            ode_solver=OdeSolver(adjoint=adjoint))
            return jnp.sum(bob_positions(ode, traj.ode.theta[-1])[0, 1, :2])

        lengths = par.ode.length
        h = 1e-6
        f = jax.jit(lambda L: final(L, "direct"))
        fd = np.array([(f(lengths.at[0, j].add(h)) - f(lengths.at[0, j].add(-h))) / (2 * h) for j in range(2)])
        row = {"seconds": seconds, "frames": frames, "finite_differences": fd.tolist()}
        for adjoint in ("direct", "recursive", "backsolve"):
            g = jax.jit(jax.grad(lambda L: final(L, adjoint)))
            t = time.perf_counter()
            grad = np.asarray(g(lengths).block_until_ready())[0]
            compile_and_run = time.perf_counter() - t
            t = time.perf_counter()
            g(lengths).block_until_ready()
            row[adjoint] = {"gradient": grad.tolist(),
                            "relative_error": float(np.max(np.abs(grad - fd)) / np.max(np.abs(fd))),
                            "compile_s": compile_and_run - (time.perf_counter() - t), "run_s": time.perf_counter() - t}
        rows.append(row)
        print(json.dumps(row))
    out = Path(__file__).parent / "results" / "pendulum_adjoints.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": "2-core x86-64 CPU", "jax": jax.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
