"""The cloth step of a structured grid: stencil path (`physics.stencil`) against the gather path, side by side.

A grid cloth's membrane and bending forces run either as dense stencil work (lattice slices in, padded adds
out: `ClothTopology.grid` set, what `Scene.build` gives a grid) or by gathers and per-particle sums
(`grid=None`). Per size, both paths: compile time apart from run time, forward and forward + gradient
(loss mean(x_final^2), gradient w.r.t. the initial velocities and the per-triangle stiffness tri_ke),
`block_until_ready`, the two paths interleaved in every repeat and the median kept (a busy machine),
reported per substep. Sizes: "20x10" is gradSim's demo cloth (with its two anchor springs, no bending);
other "AxB" are A x B cells hanging from their top row, with bending.

    python benchmarks/bench_stencil.py                                   # 20x10, 64x64, 128x128 -> results/stencil.json
    python benchmarks/bench_stencil.py --sizes 20x10,128x128 --repeat 5 --json OUT.json
    python benchmarks/bench_stencil.py --sizes 128x128 --unroll 1,2,4    # substeps fused per scan iteration
    python benchmarks/bench_stencil.py --checkpoint none --planes false  # gradient storage; the lattice's layout

`--checkpoint` is simulate's (frame: its default, substep, none); `--planes` the stencil lattice's layout
(`ClothGrid.planes`: auto = [3, n] planes off the CPU, [n, 3] rows on it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp

RESULTS = Path(__file__).resolve().parent / "results"
#: frames and substeps per frame of a measured rollout: the demo's 32 substeps a frame at 60 frames per
#: second; the grids' dt = 1/1920 s.
DEMO_STEPS = (10, 32)
GRID_STEPS = (4, 25)


def build(size: str):
    """(topology, params, state0, frames, substeps, frame_dt) of a size "AxB"."""
    import gradsim_jax as gs
    from gradsim_jax.scenes import gradsim_demo_cloth

    a, b = (int(k) for k in size.lower().split("x"))
    if (a, b) == (20, 10):
        top, par, st = gradsim_demo_cloth().build(gravity=(0.0, -9.8, 0.0))
        frames, substeps = DEMO_STEPS
        return top, par, st, frames, substeps, 1.0 / 60.0
    cloth = gs.cloth_grid(a, b, 2.0 / a, 2.0 / a, pos=(-1.0, 0.0, 0.0), mass=0.01, fix_top=True, tri_ke=1e3,
                          tri_ka=1e3, tri_kd=1.0, bend_ke=1e-3, bend_kd=1e-5)
    top, par, st = cloth.build()
    frames, substeps = GRID_STEPS
    return top, par, st, frames, substeps, substeps / 1920.0


def stencil_path(top, planes=None):
    """The topology on the stencil path whatever the backend (`ClothGrid.enabled`), lattice layout `planes`."""
    grid = dataclasses.replace(top.cloth.grid, enabled=True, planes=planes)
    return dataclasses.replace(top, cloth=dataclasses.replace(top.cloth, grid=grid))


def gather_path(top):
    """The same topology without its grid: the gather path."""
    return dataclasses.replace(top, cloth=dataclasses.replace(top.cloth, grid=None))


def compiled_loss(top, par, st, frames, substeps, frame_dt, mode, unroll, checkpoint):
    """(compiled function of (v0, tri_ke), compile seconds)."""
    import gradsim_jax as gs
    from gradsim_jax.compilation import jit
    from gradsim_jax.physics import replace_paths

    def loss(v0, tri_ke):
        p = replace_paths(par, {"cloth.tri_ke": tri_ke})
        traj = gs.simulate(top, p, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps,
                           frame_dt=frame_dt, unroll=unroll, checkpoint=checkpoint)
        return jnp.mean(traj.particles.x[-1] ** 2)

    fn = jit(loss) if mode == "forward" else jit(jax.value_and_grad(loss, argnums=(0, 1)))
    t0 = time.perf_counter()
    compiled = fn.lower(st.particles.v, par.cloth.tri_ke).compile()
    return compiled, time.perf_counter() - t0


def measure(size: str, unroll, repeat: int, checkpoint="frame", planes=None) -> list:
    """Rows of one size: per mode, both paths (interleaved repeats, medians), per substep."""
    top, par, st, frames, substeps, frame_dt = build(size)
    if top.cloth.grid is None:
        raise ValueError(f"{size}: Scene.build found no grid")
    steps = frames * substeps
    paths = {"stencil": stencil_path(top, planes), "gather": gather_path(top)}
    rows = []
    for mode in ("forward", "value_and_grad"):
        fns, compile_s, times, values = {}, {}, {k: [] for k in paths}, {}
        for name, t in paths.items():
            fns[name], compile_s[name] = compiled_loss(t, par, st, frames, substeps, frame_dt, mode, unroll,
                                                       checkpoint)
            out = jax.block_until_ready(fns[name](st.particles.v, par.cloth.tri_ke))  # warm-up
            values[name] = float(out if mode == "forward" else out[0])
        for _ in range(repeat):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                jax.block_until_ready(fn(st.particles.v, par.cloth.tri_ke))
                times[name].append(time.perf_counter() - t0)
        row = {"size": size, "mode": mode, "steps": steps, "unroll": unroll, "repeat": repeat,
               "checkpoint": checkpoint, "planes": planes}
        for name in paths:
            row[name] = {"compile_s": compile_s[name], "median_step_ms": 1e3 * statistics.median(times[name]) / steps,
                         "min_step_ms": 1e3 * min(times[name]) / steps, "loss": values[name]}
        row["gather_over_stencil"] = row["gather"]["median_step_ms"] / row["stencil"]["median_step_ms"]
        rows.append(row)
        print(f"{size:>9} {mode:>14} unroll {str(unroll):>4}: stencil {row['stencil']['median_step_ms']:8.4f} ms, "
              f"gather {row['gather']['median_step_ms']:8.4f} ms a step (x{row['gather_over_stencil']:.2f}); "
              f"compile {compile_s['stencil']:.2f} / {compile_s['gather']:.2f} s; "
              f"loss {values['stencil']:.7g} / {values['gather']:.7g}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20x10,64x64,128x128", help="comma-separated AxB cells (20x10: the demo)")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per path and mode (median kept)")
    parser.add_argument("--unroll", default="default",
                        help="comma-separated substeps per scan iteration (simulate's unroll); default: the "
                             "backend's default")
    parser.add_argument("--checkpoint", default="frame", choices=("frame", "substep", "none"),
                        help="simulate's checkpoint policy (default: frame, simulate's own)")
    parser.add_argument("--planes", default="auto", choices=("auto", "true", "false"),
                        help="the stencil lattice's layout (ClothGrid.planes; auto: planes off the CPU)")
    parser.add_argument("--json", type=Path, default=RESULTS / "stencil.json", help="where the results go")
    args = parser.parse_args()
    device = jax.devices()[0]
    print(f"backend {jax.default_backend()}, device {device.device_kind}, {len(jax.devices())} device(s)", flush=True)
    unrolls = [None if u == "default" else int(u) for u in args.unroll.split(",")]
    load0 = os.getloadavg()
    planes = {"auto": None, "true": True, "false": False}[args.planes]
    rows = [row for size in args.sizes.split(",") for unroll in unrolls
            for row in measure(size, unroll, args.repeat, args.checkpoint, planes)]
    out = {"backend": jax.default_backend(), "device_kind": device.device_kind,
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}",
           "date": time.strftime("%Y-%m-%d"), "load_average_at_start": load0, "load_average_at_end": os.getloadavg(),
           "rows": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
