"""MacCormack's clamp at closed walls, decided by grid refinement (issue 52).

MacCormack advection (`physics.smoke`, Selle et al. 2008) clamps its corrected value to the values the forward
semi-Lagrangian pass interpolated between. Three ways to pick those values, compared here:

- "weighted" (ours, `smoke.advect`): the corners of the bilinear cell whose weight is not zero. A point traced
  onto or past a wall sits on the cell's edge, and the corners behind it do not count;
- "all corners" (gradsim-jax before issue 52): all four corners of the cell, also those of weight zero, so at a
  wall the clamp admits the next row inwards, whose value the sample never used;
- "phiflow" (PhiFlow 3.4.0's `advect.mac_cormack`): `Field.closest_values` brackets each traced point by floor
  and floor + 1 of its index, clamped to the array (its extrapolation), with traced points not moved into the
  box. It returns before its staggered branch, so a face field's values are bracketed as if they sat at cell
  centres: half a cell off along the component's own axis (floor(g + 1/2)).

Flows with exact solutions, in the unit box of N x N cells, dt = h / 2 (Courant number 1/2 at the top speed 1),
to t = 0.5, float64, free-slip walls: the cell psi = sin(pi x) sin(pi y) / pi, u = d psi / dy, v = -d psi / dx
(the face velocities from differences of psi, so the grid's divergence is zero; the flow slides along all four
walls at up to 1 m/s and is a steady solution of Euler's equations):

- "density": a Gaussian blob (sigma 0.08) at (0.5, 0.1), on the floor, carried by the fixed cell along it;
- "face": the same blob sampled on the x faces (where u lives), carried likewise: the clamp of a face field;
- "vortex": the cell itself under our step (self-advection, then the projection, CG to 1e-10): it should stay.

The exact density is the blob at the point traced back through the analytic cell (RK4, 400 steps). Errors are
the relative L2 error over the grid; "wall" is the part within N / 16 cells of a wall. Rates are log2 of the
ratios between successive sizes.

    python benchmarks/smoke_refinement.py                          # the three flows, 32 ... 256 (vortex to 128)
    python benchmarks/smoke_refinement.py --plume 32,64,128,256,512 --limiters weighted,"all corners"
    python benchmarks/smoke_refinement.py --phiflow plume_mc.npz   # against PhiFlow's MacCormack plume

--plume: the buoyant plume (an inflow bump at (0.5, 0.15), buoyancy 5, 2 per second, 2.5 s) at each size, float32,
each compared with the finest, block-averaged onto the coarser grid (512 cells a side takes 6 minutes on a TPU v5e).
--phiflow: a plume from `benchmarks/reference/phiflow_plume.py --advection maccormack` run in ours, no-slip walls,
with each limiter: the relative L2 difference of the density after every 5th step. Writes
benchmarks/results/smoke_refinement.json (the sections run) and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gradsim_jax.physics import smoke, smoke_grid

RESULTS = Path(__file__).resolve().parent / "results" / "smoke_refinement.json"
LIMITERS = ("weighted", "all corners", "phiflow")


# ---------------------------------------------------------------------------------------------------------
# The three limiters


def _traced(top, state, shape, offset, dt, clamp: bool):
    """Sample points (x, y) in cells of a field at `offset`, traced back over dt; moved into the box (clamp)."""
    x, y = smoke._points(shape, offset)
    u, v = smoke.velocity_at(top, state, x, y)
    bx, by = x - dt * u / top.spacing, y - dt * v / top.spacing
    if clamp:
        bx, by = jnp.clip(bx, 0.0, top.shape[1]), jnp.clip(by, 0.0, top.shape[0])
    return bx, by


def _bracket(g, size, limiter, shift):
    """The two indices along one axis whose values bound a sample at fractional index g."""
    if limiter == "all corners":  # the bilinear cell of `smoke._sample`
        i0 = jnp.clip(jnp.floor(jnp.clip(g, 0.0, size - 1.0)), 0, size - 2)
        return i0.astype(jnp.int32), (i0 + 1).astype(jnp.int32)
    f = jnp.floor(g + shift)
    return jnp.clip(f, 0, size - 1).astype(jnp.int32), jnp.clip(f + 1, 0, size - 1).astype(jnp.int32)


def maccormack(top, state, field, offset, dt, limiter: str):
    """`field` (at `offset`) advected over dt by MacCormack with `limiter` (module docstring)."""
    if limiter == "weighted":
        return smoke.advect(top, state, field, offset, dt)
    clamp = limiter == "all corners"
    bx, by = _traced(top, state, field.shape, offset, dt, clamp)
    forward = smoke._sample_at(top, field, offset, bx, by)
    fx, fy = _traced(top, state, field.shape, offset, -dt, clamp)
    back = smoke._sample_at(top, forward, offset, fx, fy)
    source, (sx, sy) = smoke._sampled(top, field, offset)
    staggered_x, staggered_y = (0.5, 0.0) if offset == smoke._U else (0.0, 0.5) if offset == smoke._V else (0, 0)
    i0, i1 = _bracket(bx - offset[0] + sx, source.shape[1], limiter, staggered_x)
    j0, j1 = _bracket(by - offset[1] + sy, source.shape[0], limiter, staggered_y)
    corners = jnp.stack([source[j0, i0], source[j0, i1], source[j1, i0], source[j1, i1]])
    return jnp.clip(forward + 0.5 * (field - back), corners.min(0), corners.max(0))


def step(top, params, state, dt, limiter):
    """`smoke.smoke_step` with MacCormack by `limiter` (and no vorticity confinement: no flow here has any)."""
    d = maccormack(top, state, state.density, smoke._D, dt, limiter)
    d = d * jnp.exp(-params.dissipation * dt) + dt * params.inflow_rate * params.inflow_mask
    u = maccormack(top, state, state.u, smoke._U, dt, limiter)
    v = maccormack(top, state, state.v, smoke._V, dt, limiter)
    below = jnp.concatenate([d[:1], d[:-1]], axis=0)
    v = v + dt * params.buoyancy * 0.5 * (d + below)
    u, v = smoke_grid.project(top, *smoke_grid.with_walls(top, u, v))
    return smoke.SmokeState(u=u, v=v, density=d)


# ---------------------------------------------------------------------------------------------------------
# Flows with exact solutions


def _psi(x, y):
    return np.sin(np.pi * x) * np.sin(np.pi * y) / np.pi


def cell_faces(n: int):
    """(u, v) [n, n] of the cell on the faces of n x n unit-box cells: differences of psi (zero grid divergence)."""
    h = 1.0 / n
    j, i = np.mgrid[0:n, 0:n].astype(float)
    return (_psi(i * h, (j + 1) * h) - _psi(i * h, j * h)) / h, -(_psi((i + 1) * h, j * h) - _psi(i * h, j * h)) / h


def _blob(x, y):
    return np.exp(-((x - 0.5) ** 2 + (y - 0.1) ** 2) / (2 * 0.08 ** 2))


def exact_blob(n: int, offset, t: float, substeps: int = 400):
    """The blob carried for t s by the analytic cell, at the sample points of a field at `offset`: RK4 back."""
    y, x = (np.mgrid[0:n, 0:n] + np.array(offset)[::-1, None, None]) / n

    def velocity(x, y):
        return np.sin(np.pi * x) * np.cos(np.pi * y), -np.cos(np.pi * x) * np.sin(np.pi * y)

    dt = -t / substeps
    for _ in range(substeps):
        k1 = velocity(x, y)
        k2 = velocity(x + dt / 2 * k1[0], y + dt / 2 * k1[1])
        k3 = velocity(x + dt / 2 * k2[0], y + dt / 2 * k2[1])
        k4 = velocity(x + dt * k3[0], y + dt * k3[1])
        x = x + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        y = y + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return _blob(x, y)


def exact_flow(flow: str, n: int, limiter: str, t: float = 0.5, courant: float = 0.5):
    """(relative L2 error, the part within n / 16 cells of a wall) of `flow` on n x n cells at time t."""
    h = 1.0 / n
    steps = int(round(t / (courant * h)))
    dt = t / steps
    top = smoke.SmokeTopology((n, n), h, "closed", "maccormack", "cg", 1e-10, 20 * n)
    u, v = cell_faces(n)
    state = smoke.smoke_state(top, u=u, v=v, dtype=jnp.float64)
    if flow == "vortex":
        params = smoke.smoke_params(top, buoyancy=0.0, dtype=jnp.float64)
        out = jax.jit(lambda s: jax.lax.scan(lambda s, _: (step(top, params, s, dt, limiter), None), s, None,
                                             length=steps)[0])(state)
        error = np.sqrt((np.sum((np.asarray(out.u) - u) ** 2) + np.sum((np.asarray(out.v) - v) ** 2))
                        / (np.sum(u ** 2) + np.sum(v ** 2)))
        return error, None
    offset = smoke._D if flow == "density" else smoke._U
    x, y = smoke._points((n, n), offset)
    start = jnp.asarray(_blob(np.asarray(x) * h, np.asarray(y) * h))
    out = jax.jit(lambda f: jax.lax.scan(lambda f, _: (maccormack(top, state, f, offset, dt, limiter), None), f, None,
                                         length=steps)[0])(start)
    exact = exact_blob(n, offset, t)
    difference = np.asarray(out) - exact
    w = n // 16
    wall = np.ones((n, n), bool)
    wall[w:-w, w:-w] = False
    norm = np.linalg.norm(exact)
    return np.linalg.norm(difference) / norm, np.linalg.norm(difference[wall]) / norm


# ---------------------------------------------------------------------------------------------------------
# The plume (no exact solution) and PhiFlow's


def plume(n: int, limiter: str, frames: int = 5, frame_dt: float = 0.5):
    """Density [frames + 1, n, n] of the buoyant plume in the unit box, float32, dt = h / 2."""
    h = 1.0 / n
    y, x = (np.mgrid[0:n, 0:n] + 0.5) * h
    mask = np.clip(1 - ((x - 0.5) ** 2 + (y - 0.15) ** 2) / 0.1 ** 2, 0, None) ** 2
    top = smoke.SmokeTopology((n, n), h, "closed", "maccormack", "cg", 1e-5, 16 * n)
    params = smoke.smoke_params(top, buoyancy=5.0, inflow_rate=2.0, inflow_mask=mask)
    dt = frame_dt / n

    def frame(s, _):
        s = jax.lax.fori_loop(0, n, lambda k, s: step(top, params, s, dt, limiter), s)
        return s, s.density

    _, out = jax.jit(lambda s: jax.lax.scan(frame, s, None, length=frames))(smoke.smoke_state(top))
    return np.concatenate([np.zeros((1, n, n)), np.asarray(out, np.float64)])


def _coarsened(d, n):
    k = d.shape[-1] // n
    return d.reshape(d.shape[:-2] + (n, k, n, k)).mean(axis=(-3, -1))


def plume_study(sizes, limiters) -> dict:
    """Per limiter, each size's relative L2 difference from the finest size (block-averaged onto it) at every
    frame; and, for two limiters, how far apart their finest plumes are."""
    out, finest = {}, {}
    for limiter in limiters:
        runs = {n: plume(n, limiter) for n in sizes}
        finest[limiter] = runs[sizes[-1]]
        frames = range(1, finest[limiter].shape[0])
        out[limiter] = {"finest": sizes[-1], "times": [0.5 * k for k in frames], "error": {
            str(n): [_relative(runs[n][k], _coarsened(finest[limiter][k], n)) for k in frames] for n in sizes[:-1]}}
    if len(limiters) == 2:
        a, b = (finest[name] for name in limiters)
        out["finest_apart"] = [_relative(a[k], b[k]) for k in range(1, a.shape[0])]
    return out


def _relative(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def phiflow_study(path: str, limiters) -> dict:
    data = np.load(path)
    s = json.loads(str(data["settings"]))
    n = s["size"]
    top = smoke.SmokeTopology((n, n), 1.0, "closed", "maccormack", "cg", 1e-10, 5000, slip="no-slip")
    params = smoke.smoke_params(top, buoyancy=s["buoyancy"], inflow_rate=s["rate"], inflow_mask=data["mask"],
                                dtype=jnp.float64)
    out = {"settings": s}
    for limiter in limiters:
        run = jax.jit(lambda st: jax.lax.scan(lambda st, _: (step(top, params, st, s["dt"], limiter),) * 2, st, None,
                                              length=s["steps"])[1].density)
        d = np.asarray(run(smoke.smoke_state(top, dtype=jnp.float64)))
        ref = data["density"][1:]
        out[limiter] = {str(k + 1): _relative(d[k], ref[k]) for k in range(4, s["steps"], 5)}
    return out


def _rates(errors):
    return [float(np.log2(a / b)) for a, b in zip(errors, errors[1:])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="32,64,128,256")
    parser.add_argument("--vortex-sizes", default="32,64,128", help="the vortex's sizes (each step a CG solve)")
    parser.add_argument("--limiters", default=",".join(LIMITERS))
    parser.add_argument("--plume", default="", help="sizes of the plume study (none: skip it)")
    parser.add_argument("--phiflow", default="", help="a PhiFlow MacCormack plume (.npz) to compare with")
    parser.add_argument("--skip-exact", action="store_true", help="leave out the flows with exact solutions")
    args = parser.parse_args()
    limiters = args.limiters.split(",")
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["machine"] = f"{platform.machine()}, jax {jax.__version__} {jax.default_backend()}"
    results["date"] = time.strftime("%Y-%m-%d")
    if not args.skip_exact:
        with jax.enable_x64(True):
            exact = {}
            for flow in ("density", "face", "vortex"):
                sizes = [int(n) for n in (args.vortex_sizes if flow == "vortex" else args.sizes).split(",")]
                for limiter in limiters:
                    errors = [exact_flow(flow, n, limiter) for n in sizes]
                    exact.setdefault(flow, {})[limiter] = {"sizes": sizes, "error": [float(e) for e, _ in errors],
                                                           "wall": [w and float(w) for _, w in errors],
                                                           "rate": _rates([e for e, _ in errors])}
                    print(flow, limiter, exact[flow][limiter], flush=True)
        results["exact"] = exact
    if args.plume:
        results["plume"] = plume_study([int(n) for n in args.plume.split(",")], limiters)
        print(json.dumps(results["plume"], indent=1))
    if args.phiflow:
        with jax.enable_x64(True):
            compared = phiflow_study(args.phiflow, limiters)
        results[f"phiflow_{compared['settings']['size']}"] = compared
        print(json.dumps(compared, indent=1))
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    if "exact" in results:
        print(table(results))


def table(results: dict) -> str:
    """The refinement table of docs/concepts/smoke.md."""
    sizes = sorted({n for by in results["exact"].values() for r in by.values() for n in r["sizes"]})
    lines = ["| flow | clamp | " + " | ".join(f"N = {n}" for n in sizes) + " | rates |",
             "|---|---|" + "---:|" * len(sizes) + "---|"]
    for flow, by in results["exact"].items():
        for limiter, r in by.items():
            error = dict(zip(r["sizes"], r["error"]))
            lines.append(f"| {flow} | {limiter} | " + " | ".join(f"{error[n]:.2e}" if n in error else ""
                                                                   for n in sizes)
                         + " | " + ", ".join(f"{x:.2f}" for x in r["rate"]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
