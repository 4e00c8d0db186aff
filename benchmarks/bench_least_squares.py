"""Levenberg-Marquardt polish: the host-side loop (`gradsim_jax.fit.least_squares`) against optimistix's
`LevenbergMarquardt` (the whole loop in one compiled `while_loop`), on the system-identification test scene
(tests/sysid/test_sysid_identify.py: a 3 x 3-cell cloth, 32 x 32 px, 30 frames), one quantity at a time from
a start 30-50 % off. Reports cold time (compile included), warm time and the relative error reached.

    pip install optimistix   # not a dependency of the package: measured slower warm (2026-11: stiffness
                             # 6.6 s vs 2.0 s, mass 4.4 s vs 4.1 s; same accuracy), so the host loop stays
    python benchmarks/bench_least_squares.py [--steps 25]
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax import sysid
from gradsim_jax.fit.transforms import resolve_transform
from gradsim_jax.scenes.demos import hanging_cloth
from gradsim_jax.sysid.experiment import compiled
from gradsim_jax.sysid import residual_with_target


def host_lm(exp, target, initial, name, steps):
    theta, _ = sysid.levenberg_marquardt(exp, target, initial, (name,), steps=steps)
    return float(np.asarray(theta[name]))


def optimistix_lm(exp, target, initial, name, steps):
    import optimistix as optx

    tf = resolve_transform(sysid.QUANTITIES[name].transform)
    theta = sysid.as_theta(exp, initial)

    def solve(e, z0, base, tgt):
        def fn(z, _):
            return residual_with_target(e, "rgba", 1, dense=True)(dict(base, **{name: tf.inverse(z[0])}), tgt)

        solver = optx.LevenbergMarquardt(rtol=1e-6, atol=1e-9)
        sol = optx.least_squares(fn, solver, z0, max_steps=steps, throw=False)
        return sol.value, sol.stats["num_steps"]

    z0 = jnp.ravel(tf.forward(theta[name]))
    z, _ = compiled(exp, solve, ("bench-optimistix", name, steps))(z0, theta, jnp.asarray(target, jnp.float32))
    return float(tf.inverse(z[0]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--names", default="mass,stiffness,damping")
    args = parser.parse_args()
    exp = hanging_cloth(size=32, frames=30, cells=3)
    truth = dict(exp.theta)
    _, target = sysid.simulate_video(exp, truth)
    print(f"{'quantity':<10} {'solver':<11} {'cold s':>8} {'warm s':>8} {'start err':>10} {'final err':>10}")
    for seed, name in enumerate(args.names.split(",")):
        initial = sysid.perturbed(truth, (name,), seed=seed, low=0.3, high=0.5)
        start = sysid.relative_error(name, initial[name], truth[name])
        for label, solver in (("host", host_lm), ("optimistix", optimistix_lm)):
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                value = jax.block_until_ready(solver(exp, target, initial, name, args.steps))
                times.append(time.perf_counter() - t0)
            err = sysid.relative_error(name, value, truth[name])
            print(f"{name:<10} {label:<11} {times[0]:8.2f} {times[1]:8.2f} {start:10.3f} {err:10.2e}", flush=True)


if __name__ == "__main__":
    main()
