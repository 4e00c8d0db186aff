"""The frame loop the Warp reference scripts share (tools/warp_*.py; run with a Python that has Warp 1.8.1)."""

from __future__ import annotations

import warp.sim


def frames(model, integrator, state, other, c: dict, record) -> list:
    """[record(state) at the start and after each of c["frames"] frames] of c["substeps"] semi-implicit steps of
    1 / c["fps"] / c["substeps"] s each, `wp.sim.collide` before every step; `other` is the second state buffer."""
    dt = 1.0 / c["fps"] / c["substeps"]
    out = [record(state)]
    for _ in range(c["frames"]):
        for _ in range(c["substeps"]):
            state.clear_forces()
            warp.sim.collide(model, state)
            integrator.simulate(model, state, other, dt)
            state, other = other, state
        out.append(record(state))
    return out
