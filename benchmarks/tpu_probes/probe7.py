"""TPU: the batched demo gradient (256 scenes) under each checkpoint policy (memory is plenty on the chip)."""
import sys, os, json
import jax, jax.numpy as jnp
sys.path.insert(0, "benchmarks")
sys.path.insert(0, "benchmarks/tpu_probes")
from probe_common import timed  # noqa: E402
import gradsim_jax as gs
from gradsim_jax.compilation import jit
from gradsim_jax.physics import replace_paths
from gradsim_jax.physics.checkpointing import PerFrame
from bench_physics import build_cloth
OUT = os.environ.get("OUT", "/tmp")
top, par, st0 = build_cloth("demo")
rows = []
for n in (256, 512):
    for name, ck in (("substep", "substep"), ("none", False), ("frame_no_remat", PerFrame(remat_substeps=False)), ("frame", True)):
        def loss(ke, ck=ck):
            p = replace_paths(par, {"cloth.tri_ke": ke})
            return jnp.mean(gs.simulate(top, p, st0, frames=10, substeps=32, frame_dt=1/60, checkpoint=ck).particles.x[-1] ** 2)
        f = jit(jax.vmap(jax.value_and_grad(loss)))
        kes = par.cloth.tri_ke * jnp.linspace(0.5, 1.5, n).reshape((n,) + (1,) * par.cloth.tri_ke.ndim)
        try:
            best, med, c = timed(f, kes)
            row = dict(members=n, checkpoint=name, per_s=round(n / best * 1e3), median_per_s=round(n / med * 1e3), compile_s=c)
        except Exception as e:
            row = dict(members=n, checkpoint=name, error=str(e)[:300])
        print(row, flush=True); rows.append(row)
json.dump({"script": "benchmarks/tpu_probes/probe7.py (one-off, TPU v5e, 2026-12-07): demo gradient vmap, scenes/s, min and median of 5", "rows": rows}, open(f"{OUT}/probe7.json", "w"), indent=1)
