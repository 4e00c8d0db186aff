"""Cloth simulator benchmark: compile time, forward and value-and-grad throughput, peak memory.

Cases: gradSim's demo cloth (20 x 10 cells, 2880 steps of dt = (1/60)/32) and 64 x 64 / 128 x 128 grids
(500 steps). Each measurement runs in its own process so that peak RSS (ru_maxrss) belongs to it alone.
The loss is mean(x_final^2); the gradient is taken w.r.t. the initial velocities and membrane stiffness.

    python benchmarks/bench_physics.py            # all cases, table + benchmarks/results/physics.json
    python benchmarks/bench_physics.py --quick    # fewer repeats
    python benchmarks/bench_physics.py --checkpoint-memory   # 10,000-step gradient memory per checkpoint policy
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from gradsim_jax.physics import replace_paths
from rss import peak_rss_mb, reset_peak_rss

RESULTS = Path(__file__).resolve().parent / "results"

# name: (builder kwargs, frames, substeps)
CASES = {
    "demo 20x10, 2880 steps": ("demo", 90, 32),
    "grid 64x64, 500 steps": (64, 20, 25),
    "grid 128x128, 500 steps": (128, 20, 25),
}


def build_cloth(kind):
    """(topology, params, state0) of a case: "demo" (gradSim's demo cloth) or an int n (an n x n cloth of 2 m
    hanging from its top edge)."""
    import gradsim_jax as gs
    from gradsim_jax.scenes import gradsim_demo_cloth

    if kind == "demo":
        return gradsim_demo_cloth().build(gravity=(0.0, -9.8, 0.0))
    # A square cloth of 2 m hanging from its top edge, 10 g per particle.
    cloth = gs.cloth_grid(kind, kind, 2.0 / kind, 2.0 / kind, pos=(-1.0, 0.0, 0.0), mass=0.01, fix_top=True,
                          tri_ke=1e3, tri_ka=1e3, tri_kd=1.0, bend_ke=0.0)
    return cloth.build()


def measure(case: str, mode: str, checkpoint: bool, repeats: int) -> dict:
    """Run one measurement in this process and return its figures."""
    import jax
    import jax.numpy as jnp
    from gradsim_jax.compilation import jit

    import gradsim_jax as gs

    kind, frames, substeps = CASES[case]
    top, par, st = build_cloth(kind)
    frame_dt = 1.0 / 60.0 if kind == "demo" else substeps / (60.0 * 32)

    def loss(v0, tri_ke):
        p = replace_paths(par, {"cloth.tri_ke": tri_ke})
        traj = gs.simulate(top, p, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps, frame_dt=frame_dt,
                           checkpoint=checkpoint)
        return jnp.mean(traj.particles.x[-1] ** 2)

    fn = jit(loss) if mode == "forward" else jit(jax.value_and_grad(loss, argnums=(0, 1)))
    t0 = time.perf_counter()
    compiled = fn.lower(st.particles.v, par.cloth.tri_ke).compile()
    compile_s = time.perf_counter() - t0
    peak_with_compile = peak_rss_mb()
    # From here on the high-water mark covers running the program only (the runtime, buffers, temps).
    run_peak = reset_peak_rss()
    out = jax.block_until_ready(compiled(st.particles.v, par.cloth.tri_ke))
    if not all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree.leaves(out)):
        raise FloatingPointError(f"{case}: non-finite result")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(st.particles.v, par.cloth.tri_ke))
        times.append(time.perf_counter() - t0)
    steps = frames * substeps
    best = min(times)
    return {
        "case": case, "mode": mode, "checkpoint": checkpoint, "steps": steps,
        "particles": int(st.particles.x.shape[0]), "triangles": int(top.cloth.triangles.shape[0]),
        "compile_s": compile_s, "run_s_min": best, "run_s_median": statistics.median(times),
        "steps_per_s": steps / best, "peak_rss_mb": max(peak_with_compile, peak_rss_mb()),
        "run_peak_rss_mb": peak_rss_mb() if run_peak else None,
        "temp_mb": compiled.memory_analysis().temp_size_in_bytes / 2**20,
    }


def measure_checkpoint_memory(policy: str, steps: int = 10_000, substeps: int = 16) -> dict:
    """Memory of one gradient of mean(x_final^2) w.r.t. the initial velocities through `steps` steps of
    the demo cloth (dt = 1/1920 s as in the demo, `substeps` per frame) under a checkpoint policy."""
    import jax
    import jax.numpy as jnp
    from gradsim_jax.compilation import jit

    import gradsim_jax as gs

    top, par, st = build_cloth("demo")
    frames = steps // substeps

    def loss(v0):
        traj = gs.simulate(top, par, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps,
                           frame_dt=substeps / 1920.0, checkpoint=policy)
        return jnp.mean(traj.particles.x[-1] ** 2)

    t0 = time.perf_counter()
    compiled = jit(jax.value_and_grad(loss)).lower(st.particles.v).compile()
    compile_s = time.perf_counter() - t0
    reset_peak_rss()
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(st.particles.v))
    run_s = time.perf_counter() - t0
    if not all(bool(jnp.isfinite(leaf).all()) for leaf in jax.tree.leaves(out)):
        raise FloatingPointError("non-finite gradient")
    ma = compiled.memory_analysis()
    return {"policy": policy, "steps": frames * substeps, "frames": frames, "substeps": substeps,
            "compile_s": compile_s, "run_s": run_s, "temp_mb": ma.temp_size_in_bytes / 2**20,
            "output_mb": ma.output_size_in_bytes / 2**20, "run_peak_rss_mb": peak_rss_mb()}


def _child(case, mode, checkpoint, repeats):
    cmd = [sys.executable, __file__, "--child", case, mode, str(int(checkpoint)), str(repeats)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _backend() -> str:
    import jax

    return jax.default_backend()


def machine() -> str:
    import jax

    if jax.default_backend() != "cpu":
        device = jax.devices()[0].device_kind
        return f"{device} ({jax.default_backend()}), {os.cpu_count()} host cores, jax {jax.__version__}"

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, jax {jax.__version__} ({jax.default_backend()})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint-memory", action="store_true",
                        help="only the memory of a 10,000-step demo-cloth gradient under each checkpoint policy "
                             "(benchmarks/results/checkpoint_memory.json)")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "physics.json",
                        help="where to write the JSON (default: benchmarks/results/physics.json)")
    args = parser.parse_args()
    if args.child:
        case, mode, ckpt, repeats = args.child
        print(json.dumps(measure(case, mode, bool(int(ckpt)), int(repeats))))
        return
    if args.memory_child:
        print(json.dumps(measure_checkpoint_memory(args.memory_child)))
        return
    if args.checkpoint_memory:
        rows = []
        for policy in ("frame", "sqrt", "none"):
            cmd = [sys.executable, __file__, "--memory-child", policy]
            row = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            rows.append(row)
            print(f"checkpoint={policy:5s} {row['steps']} steps: XLA temp {row['temp_mb']:8.1f} MB, running peak "
                  f"RSS {row['run_peak_rss_mb']:6.0f} MB, gradient {row['run_s']:.2f} s", flush=True)
        out = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "load_average": os.getloadavg(), "rows": rows}
        (RESULTS / "checkpoint_memory.json").write_text(json.dumps(out, indent=1))
        return
    repeats = 3 if args.quick else 7
    rows = []
    for case in CASES:
        for mode, ckpt in (("forward", True), ("value_and_grad", True), ("value_and_grad", False)):
            if case.startswith("grid 128") and mode == "value_and_grad" and not ckpt:
                continue  # without checkpointing this one only shows that memory grows with steps
            row = _child(case, mode, ckpt, repeats if not case.startswith("grid 128") else 3)
            rows.append(row)
            print(f"{case:26s} {mode:15s} ckpt={int(ckpt)} compile {row['compile_s']:6.2f} s  "
                  f"run {row['run_s_min']:8.4f} s  {row['steps_per_s']:9.0f} steps/s  "
                  f"peak {row['peak_rss_mb']:6.0f} MB (running {row['run_peak_rss_mb'] or 0:6.0f} MB, "
                  f"XLA temp {row['temp_mb']:7.1f} MB)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    out = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "backend": _backend(), "rows": rows}
    args.out.write_text(json.dumps(out, indent=1))
    print(f"machine: {out['machine']}\nwrote {args.out}")


if __name__ == "__main__":
    main()
