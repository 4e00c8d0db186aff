"""The cost of particle self-contact per step (issue 39): a cloth of 64 x 64 and 128 x 128 cells folding over a
sphere, with and without self-contact (`physics.selfcontact`: the hashed grid rebuilt every step, 14 cells x
capacity 8 candidates per particle), forward and forward + gradient.

Each case: 2 frames of 32 substeps (64 steps) of a cloth of 1.5 cm cells (5 g particles, particle radius 0.7 cm:
contact distance 1.4 cm) released on a sphere (every array of the grid has a fixed shape, so a step costs the same
flat or folded; the overflow column says whether a cell ever held more than the capacity), `simulate` under one `jax.jit`; compile time apart (the first call), then
the median of 3 calls, each `block_until_ready`. The loss is mean(x_final^2), its gradient taken by the initial
velocities and the self-contact stiffness.

    python benchmarks/bench_selfcontact.py      # table + benchmarks/results/selfcontact.json
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import gradsim_jax as gs
from gradsim_jax.physics import self_contact_overflow

from bench_colliders import save, timed

SIZES = (64, 128)
FRAMES, SUBSTEPS = 2, 32


def scene(cells: int, self_contact: bool):
    flat = np.asarray(gs.quat_from_axis_angle(np.array([1.0, 0.0, 0.0]), -np.pi / 2))
    side = 0.015 * cells
    cloth = gs.cloth_grid(cells, cells, 0.015, 0.015, pos=(-side / 2, 0.32, side / 2), rot=flat, mass=0.005,
                          tri_ke=100.0, tri_ka=100.0, tri_kd=0.02, bend_ke=0.0)
    ball = gs.collider("sphere", (0.0, 0.0, 0.0), radius=0.3, ke=1.0e3, kd=1.0, kf=1.0, mu=0.5)
    return gs.combine(cloth, ball).build(particle_radius=0.007, self_contact=self_contact, self_contact_ke=1.0e2,
                                         self_contact_kd=0.1)


def case(cells: int, self_contact: bool) -> dict:
    topology, params, state = scene(cells, self_contact)

    def rollout(v0, params):
        s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, v=v0))
        return gs.simulate(topology, params, s, frames=FRAMES, substeps=SUBSTEPS, frame_dt=1.0 / 30.0).particles.x

    def loss(v0, params):
        x = rollout(v0, params)[-1]
        return jnp.mean(x * x)

    forward = jax.jit(loss)
    gradient = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    f_compile, f_run = timed(forward, state.particles.v, params)
    g_compile, g_run = timed(gradient, state.particles.v, params)
    steps = FRAMES * SUBSTEPS
    row = {"cells": cells, "self_contact": self_contact, "particles": int(topology.num_particles), "steps": steps,
           "forward_compile_s": f_compile, "forward_ms_per_step": 1e3 * f_run / steps,
           "gradient_compile_s": g_compile, "gradient_ms_per_step": 1e3 * g_run / steps}
    x = jax.jit(rollout)(state.particles.v, params)
    if not bool(jnp.all(jnp.isfinite(x))):
        raise SystemExit(f"the {cells} x {cells} scene blew up: its timings would time NaN arithmetic")
    if self_contact:
        row["overflow"] = bool(jax.vmap(lambda xx: self_contact_overflow(topology, params, xx))(x).any())
    return row


def table(data: dict) -> str:
    rows = {(r["cells"], r["self_contact"]): r for r in data["rows"]}
    lines = [f"Self-contact (`benchmarks/bench_selfcontact.py`; {data['machine']}, {data['date']}): a cloth on a "
             "sphere, ms per step (median of 3, compile apart); self-contact's share is the difference from the "
             "same cloth without it.", "",
             "| cloth | particles | forward ms/step | of it self-contact | forward + gradient ms/step | of it "
             "self-contact | grid overflow | compile fwd / grad (s) |", "|---|---:|---:|---:|---:|---:|---|---:|"]
    for cells in sorted({c for c, _ in rows}):
        off, on = rows.get((cells, False)), rows.get((cells, True))
        if off is None or on is None:
            continue
        lines.append(f"| {cells} x {cells} | {on['particles']} | {on['forward_ms_per_step']:.2f} | "
                     f"{on['forward_ms_per_step'] - off['forward_ms_per_step']:.2f} | "
                     f"{on['gradient_ms_per_step']:.2f} | "
                     f"{on['gradient_ms_per_step'] - off['gradient_ms_per_step']:.2f} | "
                     f"{'yes' if on['overflow'] else 'no'} | "
                     f"{on['forward_compile_s']:.1f} / {on['gradient_compile_s']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    rows = []
    for cells in SIZES:
        for on in (False, True):
            rows.append(case(cells, on))
            print(rows[-1], flush=True)
    print(table(save("selfcontact", rows)))


if __name__ == "__main__":
    main()
