"""The accelerator table of issue 55: the same cases on the backend JAX finds and on the host CPU, in one run.

Cases (float32, compiled, warm; compile time apart; every time the minimum of `--repeats` calls, each ending
in `block_until_ready`):

- the demo cloth (gradSim's 20 x 10 cells), 10 frames of 32 substeps (320 steps): forward, and forward +
  gradient (`value_and_grad` of mean(x_final^2) w.r.t. the initial velocities and the membrane stiffness);
- a 128 x 128 cloth hanging from its top edge, 100 steps: forward and gradient, per step;
- the demo cloth's gradient under `vmap` over 64 and 256 scenes (each its own stiffness): scenes per second;
- the soft rasterizer, 400 triangles at 256 px (bench_render.py's cloth400_256): forward and gradient.

On an accelerator it also checks that the package's defaults give the CPU's answers: the render's image and
the demo cloth's positions after 320 steps (issue 55 asks 1e-3 and 1e-5 m), the loss and the gradient.

    python benchmarks/bench_accelerator.py                  # table + benchmarks/results/accelerator.json
    python benchmarks/bench_accelerator.py --quick          # 3 repeats, vmap over 64 only
    python benchmarks/bench_accelerator.py --cpu-only       # only the host CPU column
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_physics import build_cloth  # noqa: E402
from bench_render import grid_mesh  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


#: simulate's `unroll` for every case (None: the package's default for the backend); set by --unroll.
UNROLL = {"value": None}


def _cloth_loss(kind, frames, substeps):
    """(loss(v0, tri_ke), trajectory(v0, tri_ke), v0, tri_ke) of a cloth case."""
    import gradsim_jax as gs
    from gradsim_jax.physics import replace_paths

    top, par, st = build_cloth(kind)
    frame_dt = 1.0 / 60.0 if kind == "demo" else substeps / (60.0 * 32)

    def trajectory(v0, tri_ke):
        p = replace_paths(par, {"cloth.tri_ke": tri_ke})
        return gs.simulate(top, p, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps,
                           frame_dt=frame_dt, unroll=UNROLL["value"]).particles.x

    def loss(v0, tri_ke):
        return jnp.mean(trajectory(v0, tri_ke)[-1] ** 2)

    return loss, trajectory, st.particles.v, par.cloth.tri_ke


def _timed(fn, args, repeats):
    """(first call s, min s, median s, result) of fn(*args), each call blocked until ready."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return first, min(times), statistics.median(times), out


def _put(tree, device):
    return jax.device_put(tree, device)


def cloth_cases(device, repeats: int, members: tuple) -> tuple[dict, dict]:
    """The cloth rows on one device, and the outputs the agreement check compares."""
    from gradsim_jax.compilation import jit

    rows, outputs = {}, {}
    loss, trajectory, v0, ke = _cloth_loss("demo", 10, 32)
    args = _put((v0, ke), device)
    first, best, med, x = _timed(jit(trajectory), args, repeats)
    outputs["demo_x"] = np.asarray(x)
    rows["demo forward ms"] = dict(ms=1e3 * best, median_ms=1e3 * med, compile_s=first)
    first, best, med, (value, grads) = _timed(jit(jax.value_and_grad(loss, argnums=(0, 1))), args, repeats)
    outputs["demo_loss"], outputs["demo_grad_ke"] = float(value), np.asarray(grads[1])
    rows["demo forward+gradient ms"] = dict(ms=1e3 * best, median_ms=1e3 * med, compile_s=first)
    batched = jit(jax.vmap(jax.value_and_grad(loss, argnums=1), in_axes=(None, 0)))
    for n in members:
        kes = _put(ke * jnp.linspace(0.5, 1.5, n, dtype=ke.dtype).reshape((n,) + (1,) * ke.ndim), device)
        first, best, med, _ = _timed(batched, (args[0], kes), max(1, repeats // 2))
        rows[f"demo gradient vmap {n} scenes/s"] = dict(per_s=n / best, median_per_s=n / med, compile_s=first)
    loss, _, v0, ke = _cloth_loss(128, 4, 25)
    args = _put((v0, ke), device)
    first, best, med, _ = _timed(jit(loss), args, repeats)
    rows["128x128 forward ms/step"] = dict(ms=1e3 * best / 100, median_ms=1e3 * med / 100, compile_s=first)
    first, best, med, _ = _timed(jit(jax.value_and_grad(loss, argnums=(0, 1))), args, repeats)
    rows["128x128 gradient ms/step"] = dict(ms=1e3 * best / 100, median_ms=1e3 * med / 100, compile_s=first)
    return rows, outputs


def render_case(device, repeats: int) -> tuple[dict, dict]:
    """The rasterizer rows (400 triangles, 256 px) on one device, and its image."""
    from gradsim_jax.compilation import jit
    from gradsim_jax.render import FaceColors, Lights, RenderSettings, look_at_camera, render, suggest_capacities

    vertices, faces = grid_mesh(20, 10, 0.1)
    vertices[:, 2] = 0.15 * np.sin(3.0 * vertices[:, 0]) * (0.5 + vertices[:, 1])
    camera = look_at_camera(3.0, 25.0, 30.0, width=256, height=256)
    rng = np.random.default_rng(0)
    colors = FaceColors(jnp.asarray(rng.uniform(0.2, 1.0, (len(faces), 3)), jnp.float32))
    lights = Lights(jnp.asarray(0.5), jnp.asarray(0.5), jnp.asarray([0.3, 1.0, -0.6]))
    settings = suggest_capacities(camera, vertices[None], faces, settings=RenderSettings(tile_size=8))
    x, faces_j = _put((jnp.asarray(vertices), jnp.asarray(faces)), device)

    def forward(v):
        return render(camera, v, faces_j, colors, lights=lights, settings=settings)

    target = jit(forward)(x * 1.01)

    def loss(v):
        return jnp.mean((forward(v) - target) ** 2)

    rows, outputs = {}, {}
    first, best, med, image = _timed(jit(forward), (x,), repeats)
    outputs["image"] = np.asarray(image)
    rows["render 400 tris 256 px forward ms"] = dict(ms=1e3 * best, median_ms=1e3 * med, compile_s=first)
    first, best, med, (value, grad) = _timed(jit(jax.value_and_grad(loss)), (x,), repeats)
    outputs["render_loss"], outputs["render_grad"] = float(value), np.asarray(grad)
    rows["render 400 tris 256 px gradient ms"] = dict(ms=1e3 * best, median_ms=1e3 * med, compile_s=first)
    return rows, outputs


def agreement(acc: dict, cpu: dict) -> dict:
    """How far the accelerator's outputs are from the CPU's (max abs, relative for loss and gradients)."""

    def rel(a, b):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))

    return {
        "demo positions max abs m (all 11 frames)": float(np.max(np.abs(acc["demo_x"] - cpu["demo_x"]))),
        "demo loss rel": rel(acc["demo_loss"], cpu["demo_loss"]),
        "demo gradient (tri_ke) rel": rel(acc["demo_grad_ke"], cpu["demo_grad_ke"]),
        "render image max abs": float(np.max(np.abs(acc["image"] - cpu["image"]))),
        "render loss rel": rel(acc["render_loss"], cpu["render_loss"]),
        "render gradient rel": rel(acc["render_grad"], cpu["render_grad"]),
    }


def machine() -> dict:
    """What ran the benchmark."""
    devices = jax.devices()
    return {"backend": jax.default_backend(), "device_kind": devices[0].device_kind, "devices": len(devices),
            "host": platform.processor() or platform.machine(), "host_cpus": os.cpu_count(),
            "jax": jax.__version__, "matmul_precision": str(jax.config.jax_default_matmul_precision),
            "python": platform.python_version()}


def table(result: dict) -> str:
    """The issue's table: one row per case, a column per backend, and their ratio."""
    names = list(result["backends"])
    lines = [f"| case | {' | '.join(names)} | {' / '.join(names[::-1])} |" if len(names) == 2 else
             f"| case | {names[0]} |", "|---" * (len(names) + (2 if len(names) == 2 else 1)) + "|"]
    for case in result["backends"][names[0]]:
        cells = []
        for name in names:
            row = result["backends"][name][case]
            cells.append(f"{row.get('ms', row.get('per_s')):,.3g}")
        if len(names) == 2:
            a, b = (result["backends"][n][case] for n in names)
            ratio = (b["ms"] / a["ms"]) if "ms" in a else (a["per_s"] / b["per_s"])
            cells.append(f"{ratio:.2g}x")
        lines.append(f"| {case} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 repeats, vmap over 64 scenes only")
    parser.add_argument("--repeats", type=int, default=None, help="calls timed per case (default 7, --quick 3)")
    parser.add_argument("--cpu-only", action="store_true", help="only the host CPU")
    parser.add_argument("--unroll", type=int, default=None, help="simulate's unroll (default: the backend's)")
    parser.add_argument("--json", type=Path, default=RESULTS / "accelerator.json", help="where the results go")
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)
    UNROLL["value"] = args.unroll
    members = (64,) if args.quick else (64, 256)
    devices = {"cpu": jax.devices("cpu")[0]}
    if jax.default_backend() != "cpu" and not args.cpu_only:
        devices = {jax.default_backend(): jax.devices()[0], **devices}
    result = {"machine": machine(), "repeats": repeats, "unroll": args.unroll, "backends": {}, "outputs": {}}
    outputs = {}
    for name, device in devices.items():
        with jax.default_device(device):
            rows, out = cloth_cases(device, repeats, members)
            render_rows, render_out = render_case(device, repeats)
        result["backends"][name] = {**rows, **render_rows}
        outputs[name] = {**out, **render_out}
        print(f"{name} ({device.device_kind}) done", flush=True)
    if len(devices) == 2:
        acc = next(n for n in devices if n != "cpu")
        result["agreement"] = agreement(outputs[acc], outputs["cpu"])
    del result["outputs"]
    print(table(result))
    for key, value in result.get("agreement", {}).items():
        print(f"{key}: {value:.3g}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
