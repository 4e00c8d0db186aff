"""Render on a TPU: tile size / capacities / pairs_per_chunk / dense; batched demo gradient layouts."""
import dataclasses, sys, os
import jax, jax.numpy as jnp
sys.path.insert(0, "benchmarks")
sys.path.insert(0, "benchmarks/tpu_probes")
from probe_common import render_case, timed  # noqa: E402

from gradsim_jax.compilation import jit
from gradsim_jax.render import RenderSettings, render, render_dense, suggest_capacities


vertices, faces, camera, colors, lights = render_case()
x, fj = jnp.asarray(vertices), jnp.asarray(faces)
for ts in [int(t) for t in os.environ.get("TS", "8,16,32").split(",")]:
    st = suggest_capacities(camera, vertices[None], faces, settings=RenderSettings(tile_size=ts))
    for ppc in (st.pairs_per_chunk, st.pairs_per_chunk * 8):
        s2 = dataclasses.replace(st, pairs_per_chunk=ppc)
        fwd = lambda v, s2=s2: render(camera, v, fj, colors, lights=lights, settings=s2)
        tgt = jit(fwd)(x * 1.01)
        g = jit(jax.value_and_grad(lambda v: jnp.mean((fwd(v) - tgt) ** 2)))
        print(f"tile {ts} cap {st.tile_capacity}/{st.pixel_capacity} ppc {ppc}: fwd {timed(jit(fwd), x, n=5)[0]:.2f} ms grad {timed(g, x, n=5)[0]:.2f} ms", flush=True)
fwd = lambda v: render_dense(camera, v, fj, colors, lights=lights)
tgt = jit(fwd)(x * 1.01)
g = jit(jax.value_and_grad(lambda v: jnp.mean((fwd(v) - tgt) ** 2)))
print(f"dense: fwd {timed(jit(fwd), x, n=5)[0]:.2f} ms grad {timed(g, x, n=5)[0]:.2f} ms", flush=True)

# batched demo gradient: planes / checkpoint variants
import gradsim_jax as gs
from gradsim_jax.physics import replace_paths
from bench_physics import build_cloth
top, par, st0 = build_cloth("demo")
def variant(planes, checkpoint, n):
    grid = dataclasses.replace(top.cloth.grid, planes=planes)
    t2 = dataclasses.replace(top, cloth=dataclasses.replace(top.cloth, grid=grid))
    def loss(ke):
        p = replace_paths(par, {"cloth.tri_ke": ke})
        return jnp.mean(gs.simulate(t2, p, st0, frames=10, substeps=32, frame_dt=1/60, checkpoint=checkpoint).particles.x[-1] ** 2)
    f = jit(jax.vmap(jax.value_and_grad(loss)))
    kes = par.cloth.tri_ke * jnp.linspace(0.5, 1.5, n).reshape((n,) + (1,) * par.cloth.tri_ke.ndim)
    ms = timed(f, kes, n=3)[0]
    print(f"vmap {n} planes {planes} checkpoint {checkpoint}: {n / ms * 1e3:.0f} scenes/s", flush=True)
for n in [int(t) for t in os.environ.get("NS", "256,1024").split(",")]:
    for planes in (None, False):
        for ck in (True, "substep"):
            try: variant(planes, ck, n)
            except Exception as e: print("fail", n, planes, ck, str(e)[:200])
