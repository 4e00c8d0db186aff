"""What the contact's smooth onset (`Scene.build(contact_smoothing=...)`, `physics.contact.contact_depth`) does to a
gradient: a 0.1 kg particle dropped onto the ground from heights h in [0.20, 0.21] m (401 of them, 25 um apart),
float64, penalty contact ke 1e3 N/m, kd 0.5 N s/m, explicit, 8 substeps of 60 fps; the loss is its height after
0.5 s (it has bounced). d loss / d h by reverse mode at every h, for smoothing 0 (the exact penalty), 1 mm and 3 mm:
the range of the gradient over h, its largest jump between neighbouring heights and its total variation, the
loss's largest jump between neighbours, and the gradient's mean beside the loss's mean slope over the range.

With the exact penalty the force starts with a kink at c = 0, and the step at which a particle first crosses the
surface changes with h: the gradient jumps at every h where that step changes, and so does the loss (the damping
force kd vn switches on at once, the particle approaching). With a smooth onset neither does.

    python benchmarks/bench_contact_smoothing.py    # writes results/contact_smoothing.json and the docs figure
"""

from __future__ import annotations

import dataclasses
import json
import platform
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import gradsim_jax as gs  # noqa: E402
from gradsim_jax.physics import SemiImplicitEuler  # noqa: E402

HERE = Path(__file__).resolve().parent
FIGURE = HERE.parent / "docs" / "assets" / "contact_smoothing.png"
SMOOTHING = (0.0, 1e-3, 3e-3)
HEIGHTS = (0.20, 0.21, 401)


def height_gradients(smoothing: float, heights: np.ndarray, frames: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """(loss [k], d loss / d h [k]) of the module docstring's drop at each of the heights [k] (float64)."""
    topology, params, state = gs.particles(np.array([[0.0, 0.3, 0.0]]), mass=0.1).build(
        ground=True, contact_ke=1e3, contact_kd=0.5, contact_kf=0.0, contact_mu=0.0, contact_smoothing=smoothing,
        dtype=jnp.float64)

    def loss(h):
        x = state.particles.x.at[0, 1].set(h)
        s = dataclasses.replace(state, particles=dataclasses.replace(state.particles, x=x))
        traj = gs.simulate(topology, params, s, frames=frames, substeps=8, frame_dt=1.0 / 60.0,
                           integrator=SemiImplicitEuler(implicit_contact=False))
        return traj.particles.x[-1, 0, 1]

    value, grad = jax.jit(jax.vmap(jax.value_and_grad(loss)))(jnp.asarray(heights))
    return np.asarray(value), np.asarray(grad)


def table(data: dict) -> str:
    lines = [f"Smooth contact onset (`benchmarks/bench_contact_smoothing.py`; {data['machine']}, {data['date']}): a "
             "0.1 kg particle dropped from 401 heights in [0.20, 0.21] m onto ke 1e3 N/m, float64; d(height after "
             "0.5 s) / d(drop height).", "",
             "| onset | gradient range | largest jump of the gradient | largest jump of the loss (m) | mean gradient "
             "| the loss's mean slope |", "|---|---|---:|---:|---:|---:|"]
    for r in data["rows"]:
        onset = "exact" if r["smoothing_m"] == 0 else f"{r['smoothing_m'] * 1e3:g} mm"
        lines.append(f"| {onset} | {r['grad_min']:.2f} to {r['grad_max']:.2f} | {r['max_jump']:.3f} | "
                     f"{r['max_loss_jump']:.1e} | {r['mean_grad']:.3f} | {r['mean_slope']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    heights = np.linspace(*HEIGHTS)
    rows, curves = [], {}
    for s in SMOOTHING:
        t0 = time.perf_counter()
        value, grad = height_gradients(s, heights)
        jumps = np.abs(np.diff(grad))
        rows.append({"smoothing_m": s, "grad_min": float(grad.min()), "grad_max": float(grad.max()),
                     "max_jump": float(jumps.max()), "total_variation": float(jumps.sum()),
                     "loss_min": float(value.min()), "loss_max": float(value.max()),
                     "max_loss_jump": float(np.abs(np.diff(value)).max()),
                     "mean_grad": float(grad.mean()),
                     "mean_slope": float((value[-1] - value[0]) / (heights[-1] - heights[0])),
                     "seconds": time.perf_counter() - t0})
        curves[s] = grad
        print(rows[-1])
    out = {"machine": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d"),
           "heights": list(HEIGHTS), "rows": rows}
    (HERE / "results" / "contact_smoothing.json").write_text(json.dumps(out, indent=1))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=120)
    for s, grad in curves.items():
        ax.plot(heights * 100, grad, lw=1.0, label="exact penalty" if s == 0 else f"smoothing {s * 1e3:g} mm")
    ax.set_xlabel("drop height h (cm)")
    ax.set_ylabel("d(height at 0.5 s) / d h")
    ax.set_title("A bouncing particle's gradient, 401 drop heights 25 um apart")
    ax.legend(fontsize=8)
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE)
    print("wrote", FIGURE)


if __name__ == "__main__":
    main()
