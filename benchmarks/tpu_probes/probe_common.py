"""What the one-off TPU probes (probe3-7.py, 2026-12-07) share: the timing, the rasterizer's case and the per-op
profile. Run a probe from the repository's root on the accelerator's machine: `python benchmarks/tpu_probes/probeN.py`
(it writes $OUT/probeN.json where it writes a file)."""

import collections
import glob
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, "benchmarks")
from bench_render import grid_mesh  # noqa: E402


def timed(fn, *args, n=7):
    """(min ms, median ms, compile s) of n calls of fn(*args) after a first one (the compile)."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(n):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return round(1e3 * min(times), 3), round(1e3 * float(np.median(times)), 3), round(compile_s, 1)


def render_case(size=256):
    """bench_accelerator's rasterizer case: 400 triangles of a wavy 20 x 10 sheet, face colours, one light.

    Returns:
        (vertices numpy, faces numpy, camera, colors, lights).
    """
    from gradsim_jax.render import FaceColors, Lights, look_at_camera

    vertices, faces = grid_mesh(20, 10, 0.1)
    vertices[:, 2] = 0.15 * np.sin(3.0 * vertices[:, 0]) * (0.5 + vertices[:, 1])
    camera = look_at_camera(3.0, 25.0, 30.0, width=size, height=size)
    colors = FaceColors(jnp.asarray(np.random.default_rng(0).uniform(0.2, 1.0, (len(faces), 3)), jnp.float32))
    lights = Lights(jnp.asarray(0.5), jnp.asarray(0.5), jnp.asarray([0.3, 1.0, -0.6]))
    return vertices, faces, camera, colors, lights


def device_op_profile(name, fn, *args, reps=5, top=30):
    """The device ops' time per call of fn(*args) (jax.profiler, the TPU's "XLA Ops" line): the `top` longest as
    (name, us a call, count a call), and the sum (ops inside loops are counted in their loop too)."""
    folder = f"/tmp/prof_{name}"
    with jax.profiler.trace(folder):
        for _ in range(reps):
            jax.block_until_ready(fn(*args))
    data = jax.profiler.ProfileData.from_file(glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)[0])
    total, count = collections.Counter(), collections.Counter()
    for plane in data.planes:
        if "TPU:0" not in plane.name:
            continue
        for line in plane.lines:
            if line.name != "XLA Ops":
                continue
            for event in line.events:
                total[event.name] += event.duration_ns
                count[event.name] += 1
    rows = [(k, round(v / reps / 1e3, 1), count[k] // reps) for k, v in total.most_common(top)]
    return sum(total.values()) / reps / 1e6, rows
