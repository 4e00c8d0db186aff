"""The cost of static colliders per step (issue 39): a 64 x 64 cloth (4225 particles) falling onto a field of
1, 10 or 100 spheres, forward and forward + gradient, against the same cloth with no collider.

Each case: 2 frames of 32 substeps (64 steps), `simulate` under one `jax.jit`; compile time apart (the first
call), then the median of 3 calls, each `block_until_ready`. The loss is mean(x_final^2), its gradient taken
by the initial velocities and every collider's mu. The contact term evaluates every particle against every
collider (the signed distances are dense: n x k), so its cost grows with k.

    python benchmarks/bench_colliders.py      # table + benchmarks/results/colliders.json
"""

from __future__ import annotations

import dataclasses
import json
import platform
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import gradsim_jax as gs

RESULTS = Path(__file__).resolve().parent / "results"
COUNTS = (0, 1, 10, 100)
FRAMES, SUBSTEPS = 2, 32


def scene(count: int):
    flat = np.asarray(gs.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), -np.pi / 2))
    # 5 g particles, tri_kd 0.02: with 1 g and tri_kd 0.5 the step was 4.5 times too long for the damping and the
    # cloth blew up in the first frame (the figures of 2026-12-04 timed that)
    cloth = gs.cloth_grid(64, 64, 0.03, 0.03, pos=(-0.96, 0.6, 0.96), rot=flat, mass=0.005, tri_ke=100.0,
                          tri_ka=100.0, tri_kd=0.02, bend_ke=0.0)
    rng = np.random.default_rng(0)
    spheres = [gs.collider("sphere", (float(x), 0.0, float(z)), radius=0.15, ke=1.0e3, kd=1.0, kf=1.0, mu=0.5)
               for x, z in rng.uniform(-0.9, 0.9, (count, 2))]
    return gs.combine(cloth, *spheres).build(particle_radius=0.005)


def timed(fn, *args) -> tuple[float, float]:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    compile_s = time.perf_counter() - t0
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - t0)
    return compile_s, statistics.median(runs)


def case(count: int) -> dict:
    topology, params, state = scene(count)

    def loss(v0, params):
        s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, v=v0))
        x = gs.simulate(topology, params, s, frames=FRAMES, substeps=SUBSTEPS, frame_dt=1.0 / 30.0).particles.x[-1]
        return jnp.mean(x * x)

    x = gs.simulate(topology, params, state, frames=FRAMES, substeps=SUBSTEPS, frame_dt=1.0 / 30.0).particles.x
    if not bool(jnp.all(jnp.isfinite(x))):
        raise SystemExit(f"the {count}-collider scene blew up: its timings would time NaN arithmetic")
    forward = jax.jit(loss)
    gradient = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    f_compile, f_run = timed(forward, state.particles.v, params)
    g_compile, g_run = timed(gradient, state.particles.v, params)
    steps = FRAMES * SUBSTEPS
    return {"colliders": count, "particles": int(topology.num_particles), "steps": steps,
            "forward_compile_s": f_compile, "forward_ms_per_step": 1e3 * f_run / steps,
            "gradient_compile_s": g_compile, "gradient_ms_per_step": 1e3 * g_run / steps}


def table(data: dict) -> str:
    rows = data["rows"]
    base = rows[0]
    lines = [f"Static colliders (`benchmarks/bench_colliders.py`; {data['machine']}, {data['date']}): a 64 x 64 "
             "cloth (4225 particles) and k spheres, ms per step (median of 3, compile apart); the colliders' "
             "share is the difference from k = 0.", "",
             "| spheres | forward ms/step | of it colliders | forward + gradient ms/step | of it colliders | "
             "compile fwd / grad (s) |", "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['colliders']} | {r['forward_ms_per_step']:.3f} | "
                     f"{r['forward_ms_per_step'] - base['forward_ms_per_step']:.3f} | "
                     f"{r['gradient_ms_per_step']:.3f} | "
                     f"{r['gradient_ms_per_step'] - base['gradient_ms_per_step']:.3f} | "
                     f"{r['forward_compile_s']:.1f} / {r['gradient_compile_s']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    rows = []
    for count in COUNTS:
        rows.append(case(count))
        print(rows[-1], flush=True)
    print(table(save("colliders", rows)))


def save(name: str, rows: list) -> dict:
    """The rows with the machine and date, written to benchmarks/results/NAME.json; returned."""
    data = {"machine": f"{platform.machine()}, {jax.device_count()} {jax.devices()[0].platform} device(s), "
                       f"jax {jax.__version__}", "date": time.strftime("%Y-%m-%d"), "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1))
    return data


if __name__ == "__main__":
    main()
