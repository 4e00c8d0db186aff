"""Run a rising smoke plume in PhiFlow 3.4.0 (JAX backend) and write its density, or time it: the anchor of
`physics.smoke` (issue 38). PhiFlow is no dependency of gradsim-jax; run this with an interpreter that has it:

    python -m venv /tmp/phivenv && /tmp/phivenv/bin/pip install phiflow==3.4.0 jax==0.10.2
    /tmp/phivenv/bin/python benchmarks/reference/phiflow_plume.py --size 32 --steps 20 --out tests/data/phiflow_plume.npz
    /tmp/phivenv/bin/python benchmarks/reference/phiflow_plume.py --size 128 --steps 100 --time --out plume.npz

The plume (the same one `tests/physics/test_physics_smoke_phiflow.py` and `benchmarks/bench_smoke.py` build):
a closed square box of N x N unit cells (ZERO velocity extrapolation: no flow through the walls; the density's
extrapolation ZERO_GRADIENT), at rest and empty at the start; each step of dt:

1. density advected semi-Lagrangian (`advect.semi_lagrangian`, one Euler step back) by the velocity, then
   the inflow `dt * rate * mask` added (mask: the cells whose centres lie in a disc of radius N / 16 at
   (N / 2, N / 8));
2. velocity advected by itself (semi-Lagrangian), then buoyancy: `dt * buoyancy * density` resampled onto the
   y faces (`resample(s * (0, b), to=v)`: the mean of the two cells beside each face);
3. `fluid.make_incompressible` with `Solve('CG', rel_tol, 0)`: |residual| <= rel_tol |div| (PhiFlow's
   stop_on_l2), from a zero initial guess.

With --advection maccormack both advections are `advect.mac_cormack` instead (the MacCormack comparison of
docs/concepts/smoke.md, "MacCormack at walls", via `benchmarks/smoke_refinement.py --phiflow`).

Written (--out, npz): density [steps + 1, N, N] (rows y up, columns x), u [N, N] and v [N, N] on the MAC faces of
the last step (gradsim-jax's layout: u[:, 0] and v[0, :] the walls), mask [N, N], and the settings; with --time
also forward_s and gradient_s (the median of --repeats calls, compile excluded) and compile_s.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from phi.jax.flow import (Box, field, CenteredGrid, Solve, StaggeredGrid, advect, extrapolation, fluid, math, resample,
                          tensor, spatial)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--dt", type=float, default=1.0)
    parser.add_argument("--buoyancy", type=float, default=0.1)
    parser.add_argument("--rate", type=float, default=0.2, help="inflow rate (density per unit time)")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--advection", default="semi-lagrangian", choices=("semi-lagrangian", "maccormack"),
                        help="advect.semi_lagrangian (default) or advect.mac_cormack, for density and velocity alike")
    parser.add_argument("--method", default="CG", help="PhiFlow's Solve method (default CG)")
    parser.add_argument("--warm-start", action="store_true",
                        help="start each pressure solve from the last step's pressure (PhiFlow's own plume example)")
    parser.add_argument("--max-iterations", type=int, default=5000)
    parser.add_argument("--precision", type=int, default=64, choices=(32, 64))
    parser.add_argument("--rank-deficiency", type=int, default=None,
                        help="PhiFlow's Solve(rank_deficiency=...): 1 tells it the closed box's pressure is defined up to a constant")
    parser.add_argument("--suppress-diverged", action="store_true",
                        help="PhiFlow's Solve(suppress=(Diverged, NotConverged)): where its CG's divergence check fires "
                             "(the L2 residual above 316 x the first one after 8 iterations) keep its partial result "
                             "instead of raising; the npz's 'residual' says how far each step's projection got")
    parser.add_argument("--time", action="store_true", help="also time forward and gradient (jit)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    math.set_global_precision(args.precision)
    n = args.size
    bounds = Box(x=n, y=n)
    yy, xx = np.mgrid[0:n, 0:n] + 0.5
    mask = ((xx - n / 2) ** 2 + (yy - n / 8) ** 2 <= (n / 16) ** 2).astype(np.float64)  # [y, x]
    inflow = CenteredGrid(tensor(mask.T, spatial("x,y")), extrapolation.ZERO_GRADIENT, x=n, y=n, bounds=bounds)
    from phiml.math import Diverged, NotConverged

    suppress = (Diverged, NotConverged) if args.suppress_diverged else ()
    solve = Solve(args.method, args.tolerance, 0.0, max_iterations=args.max_iterations,
                  rank_deficiency=args.rank_deficiency, suppress=suppress)
    dt = args.dt

    pressure = [None]

    scheme = advect.semi_lagrangian if args.advection == "semi-lagrangian" else advect.mac_cormack

    def advance(velocity, smoke):
        """A step up to the projection: (the velocity handed to it, the new density)."""
        smoke = scheme(smoke, velocity, dt) + (dt * args.rate) * inflow
        buoyancy = resample(smoke * (0, args.buoyancy), to=velocity)
        return scheme(velocity, velocity, dt) + dt * buoyancy, smoke

    def project(velocity):
        start = solve if not (args.warm_start and pressure[0] is not None) else Solve(
            args.method, args.tolerance, 0.0, x0=pressure[0], max_iterations=args.max_iterations,
            rank_deficiency=args.rank_deficiency, suppress=suppress)
        velocity, p = fluid.make_incompressible(velocity, (), start)
        if args.warm_start:
            pressure[0] = p
        return velocity

    def step(velocity, smoke):
        velocity, smoke = advance(velocity, smoke)
        return project(velocity), smoke

    smoke0 = CenteredGrid(0, extrapolation.ZERO_GRADIENT, x=n, y=n, bounds=bounds)
    velocity0 = StaggeredGrid(0, extrapolation.ZERO, x=n, y=n, bounds=bounds)

    residuals = []

    def _div_norm(v):
        d = field.divergence(v).values
        return float(math.sqrt(math.sum(d ** 2, "x,y")))

    def run(velocity, smoke, steps):
        frames = [smoke]
        for k in range(steps):
            try:
                before, smoke = advance(velocity, smoke)
                velocity = project(before)
                residuals.append(_div_norm(velocity) / max(_div_norm(before), 1e-300))
            except Exception as e:
                raise RuntimeError(f"PhiFlow's step {k + 1} failed: {e}") from e
            frames.append(smoke)
        return velocity, frames

    velocity, frames = run(velocity0, smoke0, args.steps)
    density = np.stack([f.values.numpy("y,x") for f in frames])
    ux = velocity.vector["x"].values.numpy("y,x")  # [N, N - 1]: the inner x faces
    vy = velocity.vector["y"].values.numpy("y,x")  # [N - 1, N]
    u = np.zeros((n, n))
    v = np.zeros((n, n))
    u[:, 1:] = ux
    v[1:, :] = vy
    # |div v| after each step's projection over |div| before it: <= tolerance where the solve converged
    out = {"density": density, "u": u, "v": v, "mask": mask, "residual": np.asarray(residuals)}
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    settings["phiflow"] = __import__("phi").__version__
    if args.time:
        out.update(_timings(step, velocity0, smoke0, args))
    np.savez_compressed(args.out, **out, settings=json.dumps(settings))
    print(json.dumps({k: float(v) for k, v in out.items() if np.ndim(v) == 0}))


def _timings(step, velocity0, smoke0, args) -> dict:
    """Forward (the steps, the final density's sum) and forward + gradient (of the mean squared final density
    with respect to the buoyancy-free initial velocity field), each jit-compiled whole by PhiFlow."""

    def final_loss(velocity):
        smoke = smoke0
        for _ in range(args.steps):
            velocity, smoke = step(velocity, smoke)
        return math.mean(smoke.values ** 2, "x,y")

    forward = math.jit_compile(final_loss)
    gradient = math.jit_compile(math.gradient(final_loss, "velocity", get_output=True))
    out = {}
    for name, fn in (("forward", forward), ("gradient", gradient)):
        started = time.perf_counter()
        _block(fn(velocity0))
        out[f"{name}_compile_s"] = time.perf_counter() - started
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            _block(fn(velocity0))
            times.append(time.perf_counter() - started)
        out[f"{name}_s"] = float(np.median(times))
    return out


def _block(result):
    """Wait for `result` (a tensor, a field, or tuples of them): each array is copied to numpy, which waits for
    its computation (a 128 x 128 copy costs microseconds)."""
    from phi.field import Field
    from phiml.math import Tensor

    if isinstance(result, (tuple, list)):
        for item in result:
            _block(item)
    elif isinstance(result, Field):
        if result.is_staggered:
            for dim in result.shape.spatial.names:
                _block(result.vector[dim].values)
        else:
            _block(result.values)
    elif isinstance(result, Tensor):
        result.numpy(result.shape.names)  # any order: only the wait matters
    return result


if __name__ == "__main__":
    main()
