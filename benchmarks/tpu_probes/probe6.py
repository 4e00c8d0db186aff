"""TPU: the rasterizer's one-hot rows against gathers (400 faces, 256 px), and the profile of what is left."""
import dataclasses, sys, os, json
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, "benchmarks")
sys.path.insert(0, "benchmarks/tpu_probes")
from probe_common import render_case, timed, device_op_profile  # noqa: E402

from gradsim_jax.compilation import jit
from gradsim_jax.render import RenderSettings, render, suggest_capacities
OUT = os.environ.get("OUT", "/tmp")


def profile(name, fn, *args, reps=5):
    _, top = device_op_profile(name, fn, *args, reps=reps)
    top = [(k[:160], us, c) for k, us, c in top]
    for t in top[:18]: print("   ", t, flush=True)
    return top

vertices, faces, camera, colors, lights = render_case()
x, fj = jnp.asarray(vertices), jnp.asarray(faces)
rows = []; res = {}
ref = {}
for ts in (8, 16):
    st = suggest_capacities(camera, vertices[None], faces, settings=RenderSettings(tile_size=ts))
    for oh in (False, None):
        for ppc in (st.pairs_per_chunk, 4 * st.pairs_per_chunk):
            s2 = dataclasses.replace(st, one_hot_rows=oh, pairs_per_chunk=ppc)
            fwd = lambda v, s2=s2: render(camera, v, fj, colors, lights=lights, settings=s2)
            tgt = jit(lambda v: render(camera, v, fj, colors, lights=lights, settings=st))(x * 1.01)
            g = jit(jax.value_and_grad(lambda v: jnp.mean((fwd(v) - tgt) ** 2)))
            img = np.asarray(jit(fwd)(x)); val, grad = g(x)
            key = ts
            if key not in ref: ref[key] = (img, np.asarray(grad))
            row = dict(tile=ts, one_hot=oh, caps=[s2.tile_capacity, s2.pixel_capacity, ppc], fwd=timed(jit(fwd), x),
                       grad=timed(g, x), img_diff=float(np.max(np.abs(img - ref[key][0]))),
                       grad_rel=float(np.max(np.abs(np.asarray(grad) - ref[key][1])) / np.max(np.abs(ref[key][1]))))
            print(row, flush=True); rows.append(row)
            if ts == 8 and oh is None and ppc == st.pairs_per_chunk:
                res["profile_grad_one_hot"] = profile("g", g, x)
res["render"] = rows
json.dump(res, open(f"{OUT}/probe6.json", "w"), indent=1)
