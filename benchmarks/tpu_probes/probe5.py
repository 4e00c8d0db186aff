"""TPU profile: per-op device time of the rasterizer's gradient and of the batched demo gradient."""
import dataclasses, time, sys, os, json, collections, glob, importlib
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, "benchmarks")
from bench_render import grid_mesh
from gradsim_jax.compilation import jit
from gradsim_jax.render import FaceColors, Lights, RenderSettings, look_at_camera, render, suggest_capacities
OUT = os.environ.get("OUT", "/tmp")

def profile(name, fn, *args, reps=5):
    jax.block_until_ready(fn(*args))
    d = f"/tmp/prof_{name}"
    with jax.profiler.trace(d):
        for _ in range(reps):
            jax.block_until_ready(fn(*args))
    files = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
    pd = jax.profiler.ProfileData.from_file(files[0])
    tot = collections.Counter(); cnt = collections.Counter(); lines_seen = set()
    for plane in pd.planes:
        if "TPU:0" not in plane.name: continue
        for line in plane.lines:
            lines_seen.add(line.name)
            if line.name != "XLA Ops": continue
            for ev in line.events:
                tot[ev.name] += ev.duration_ns; cnt[ev.name] += 1
    total = sum(tot.values()) / reps / 1e6
    top = [(k, round(v / reps / 1e3, 1), cnt[k] // reps) for k, v in tot.most_common(40)]
    print(name, "device ops ms per call", round(total, 3), "lines", sorted(lines_seen), flush=True)
    for t in top[:25]: print("   ", t, flush=True)
    try:
        txt = fn.lower(*args).compile().as_text()
        open(f"{OUT}/{name}.hlo.txt", "w").write(txt)
    except Exception as e: print("no hlo", e)
    return dict(total_ms=total, top=top)

res = {}
vertices, faces = grid_mesh(20, 10, 0.1)
vertices[:, 2] = 0.15 * np.sin(3.0 * vertices[:, 0]) * (0.5 + vertices[:, 1])
camera = look_at_camera(3.0, 25.0, 30.0, width=256, height=256)
colors = FaceColors(jnp.asarray(np.random.default_rng(0).uniform(0.2, 1.0, (len(faces), 3)), jnp.float32))
lights = Lights(jnp.asarray(0.5), jnp.asarray(0.5), jnp.asarray([0.3, 1.0, -0.6]))
x, fj = jnp.asarray(vertices), jnp.asarray(faces)
st = suggest_capacities(camera, vertices[None], faces, settings=RenderSettings(tile_size=8))
fwd = lambda v: render(camera, v, fj, colors, lights=lights, settings=st)
tgt = jit(fwd)(x * 1.01)
g = jit(jax.value_and_grad(lambda v: jnp.mean((fwd(v) - tgt) ** 2)))
res["render_fwd"] = profile("render_fwd", jit(fwd), x)
res["render_grad"] = profile("render_grad", g, x)

import gradsim_jax as gs
from gradsim_jax.physics import replace_paths
from bench_physics import build_cloth
top, par, st0 = build_cloth("demo")
def loss(ke):
    p = replace_paths(par, {"cloth.tri_ke": ke})
    return jnp.mean(gs.simulate(top, p, st0, frames=10, substeps=32, frame_dt=1/60, checkpoint="substep").particles.x[-1] ** 2)
n = 256
f = jit(jax.vmap(jax.value_and_grad(loss)))
kes = par.cloth.tri_ke * jnp.linspace(0.5, 1.5, n).reshape((n,) + (1,) * par.cloth.tri_ke.ndim)
res["batched"] = profile("batched", f, kes, reps=2)
json.dump(res, open(f"{OUT}/probe5.json", "w"), indent=1)
