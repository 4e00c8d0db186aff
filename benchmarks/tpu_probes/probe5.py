"""TPU profile: per-op device time of the rasterizer's gradient and of the batched demo gradient."""
import sys, os, json
import jax, jax.numpy as jnp
sys.path.insert(0, "benchmarks")
sys.path.insert(0, "benchmarks/tpu_probes")
from probe_common import render_case, device_op_profile  # noqa: E402

from gradsim_jax.compilation import jit
from gradsim_jax.render import RenderSettings, render, suggest_capacities
OUT = os.environ.get("OUT", "/tmp")

def profile(name, fn, *args, reps=5):
    jax.block_until_ready(fn(*args))
    total, top = device_op_profile(name, fn, *args, reps=reps, top=40)
    print(name, "device ops ms per call", round(total, 3), flush=True)
    for t in top[:25]: print("   ", t, flush=True)
    try:
        txt = fn.lower(*args).compile().as_text()
        open(f"{OUT}/{name}.hlo.txt", "w").write(txt)
    except Exception as e: print("no hlo", e)
    return dict(total_ms=total, top=top)

res = {}
vertices, faces, camera, colors, lights = render_case()
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
