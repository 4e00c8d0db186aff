"""Benchmark of the soft rasterizer: forward and forward + gradient, time and peak memory.

Cases: the 400-triangle cloth (a 21 x 11 vertex grid, 20 x 10 cells of 0.1 m) and a 5,000-triangle
grid (50 x 50 cells) at 64, 128 and 256 px, and a 60-frame 128 px video of the waving cloth.
The gradient is that of an image MSE (RGBA against a fixed target) w.r.t. vertex positions.

Each case runs in its own subprocess so that its peak resident memory (ru_maxrss, which includes the
JAX runtime, ~0.3 GB) is its own. Compile time is reported apart from the steady state (minimum and
median of several repeats, each ending in block_until_ready). The tile capacity of every case is chosen
with `suggest_capacities` on its frames, as a user would; overflow is reported (0 means exact).

Usage: python benchmarks/bench_render.py [--quick] [--case NAME]
Writes benchmarks/results/render.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "render.json"

CASES = [
    # name, mesh, size, frames
    ("cloth400_64", "cloth", 64, 1),
    ("cloth400_128", "cloth", 128, 1),
    ("cloth400_256", "cloth", 256, 1),
    ("grid5000_64", "grid", 64, 1),
    ("grid5000_128", "grid", 128, 1),
    ("grid5000_256", "grid", 256, 1),
    ("cloth400_video60_128", "cloth", 128, 60),
]

TARGETS = {
    "cloth400_128": ("grad_ms", 30.0),
    "cloth400_video60_128": ("grad_ms", 2000.0),
    "grid5000_256": ("grad_ms", 1000.0),
}
RSS_TARGETS = {"cloth400_video60_128": 1.5 * 1024}


def grid_mesh(cells_x, cells_y, cell):
    """Vertices [(cells_x+1)(cells_y+1), 3] in the z = 0 plane, centered, and 2 triangles per cell."""
    import numpy as np

    xs = (np.arange(cells_x + 1) - cells_x / 2) * cell
    ys = (np.arange(cells_y + 1) - cells_y / 2) * cell
    x, y = np.meshgrid(xs, ys)
    vertices = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], axis=1).astype(np.float32)
    faces = []
    for j in range(cells_y):
        for i in range(cells_x):
            a = j * (cells_x + 1) + i
            faces += [[a, a + 1, a + cells_x + 2], [a, a + cells_x + 2, a + cells_x + 1]]
    return vertices, np.asarray(faces, np.int32)


def run_case(name, mesh, size, num_frames, repeats):
    import jax
    import jax.numpy as jnp
    from gradsim_jax.compilation import jit
    import numpy as np

    from gradsim_jax.render import (
        FaceColors,
        Lights,
        RenderSettings,
        look_at_camera,
        render,
        render_video,
        render_with_stats,
        suggest_capacities,
    )

    if mesh == "cloth":
        vertices, faces = grid_mesh(20, 10, 0.1)  # 2 m x 1 m, 400 triangles
        distance = 3.0
    else:
        vertices, faces = grid_mesh(50, 50, 0.04)  # 2 m x 2 m, 5,000 triangles
        distance = 4.0
    # A gentle wave so that the mesh is not flat and faces overlap in depth.
    t = np.linspace(0.0, 1.0, num_frames)[:, None]
    frames = np.repeat(vertices[None], num_frames, axis=0)
    frames[..., 2] = 0.15 * np.sin(3.0 * vertices[None, :, 0] + 4.0 * t) * (0.5 + vertices[None, :, 1])
    frames = frames.astype(np.float32)
    camera = look_at_camera(distance, 25.0, 30.0, width=size, height=size)
    rng = np.random.default_rng(0)
    colors = FaceColors(jnp.asarray(rng.uniform(0.2, 1.0, (len(faces), 3)), jnp.float32))
    lights = Lights(jnp.asarray(0.5), jnp.asarray(0.5), jnp.asarray([0.3, 1.0, -0.6]))
    settings = suggest_capacities(camera, frames, faces, settings=RenderSettings(tile_size=8))
    faces_j = jnp.asarray(faces)

    if num_frames == 1:
        x = jnp.asarray(frames[0])
        target = render(camera, x * 1.01, faces_j, colors, lights=lights, settings=settings)

        def forward(v):
            return render(camera, v, faces_j, colors, lights=lights, settings=settings)

        overflow = int(render_with_stats(camera, x, faces_j, colors, lights=lights, settings=settings)[1].overflow)
    else:
        x = jnp.asarray(frames)
        target = render_video(camera, x * 1.01, faces_j, colors, lights=lights, settings=settings)

        def forward(v):
            return render_video(camera, v, faces_j, colors, lights=lights, settings=settings)

        overflow = 0

    def loss(v):
        return jnp.mean((forward(v) - target) ** 2)

    results = {"name": name, "mesh": mesh, "triangles": int(len(faces)), "size": size, "frames": num_frames,
               "tile_size": settings.tile_size, "tile_capacity": settings.tile_capacity,
               "pixel_capacity": settings.pixel_capacity, "overflow": overflow}
    for label, fn in (("forward", jit(forward)), ("grad", jit(jax.value_and_grad(loss)))):
        start = time.perf_counter()
        jax.block_until_ready(fn(x))
        results[f"{label}_first_call_s"] = time.perf_counter() - start
        times = []
        for i in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(fn(x + 1e-4 * (i + 1)))
            times.append(time.perf_counter() - start)
        results[f"{label}_ms"] = 1e3 * min(times)
        results[f"{label}_median_ms"] = 1e3 * statistics.median(times)
    results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--case", action="append", help="run only these cases")
    parser.add_argument("--child", nargs=4, metavar=("NAME", "MESH", "SIZE", "FRAMES"), help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="where to write the JSON (default: benchmarks/results/render.json)")
    args = parser.parse_args()
    if args.child:
        name, mesh, size, frames = args.child
        repeats = args.repeats or 5
        print(json.dumps(run_case(name, mesh, int(size), int(frames), repeats)))
        return

    rows = []
    for name, mesh, size, frames in CASES:
        if args.case and name not in args.case:
            continue
        repeats = 3 if args.quick else (5 if frames > 1 else 15)
        command = [sys.executable, __file__, "--child", name, mesh, str(size), str(frames), "--repeats", str(repeats)]
        proc = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
        if proc.returncode != 0:
            rows.append({"name": name, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"})
            print(f"{name}: FAILED\n{proc.stderr}", file=sys.stderr)
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        if name in TARGETS:
            key, limit = TARGETS[name]
            row["target"] = f"{key} < {limit:g}"
            row["target_met"] = row[key] < limit and row["peak_rss_mb"] < RSS_TARGETS.get(name, float("inf"))
        rows.append(row)
        print(f"done {name}", file=sys.stderr)

    header = f"{'case':<22}{'tris':>6}{'px':>5}{'T':>4}{'tile':>5}{'cap':>5}{'pxcap':>6}{'ovf':>5}" \
             f"{'fwd ms':>9}{'grad ms':>9}{'compile s':>11}{'RSS MB':>8}  target"
    print(header)
    print("-" * len(header))
    for r in rows:
        if "error" in r:
            print(f"{r['name']:<22} ERROR {r['error']}")
            continue
        target = "" if "target" not in r else f"{r['target']} ms: {'met' if r['target_met'] else 'NOT met'}"
        print(f"{r['name']:<22}{r['triangles']:>6}{r['size']:>5}{r['frames']:>4}{r['tile_size']:>5}"
              f"{r['tile_capacity']:>5}{r['pixel_capacity']:>6}{r['overflow']:>5}{r['forward_ms']:>9.1f}{r['grad_ms']:>9.1f}"
              f"{r['grad_first_call_s']:>11.1f}{r['peak_rss_mb']:>8.0f}  {target}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "load_average": os.getloadavg()}
    try:
        import jax

        meta["jax"] = jax.__version__
        meta["backend"] = jax.default_backend()
        if jax.default_backend() != "cpu":
            meta["machine"] = f"{jax.devices()[0].device_kind} ({jax.default_backend()})"
    except ImportError:
        pass
    args.out.write_text(json.dumps({"meta": meta, "cases": rows}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
