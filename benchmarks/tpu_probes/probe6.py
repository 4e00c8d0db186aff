"""TPU: the rasterizer's one-hot rows against gathers (400 faces, 256 px), and the profile of what is left."""
import dataclasses, time, sys, os, json, collections, glob
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, "benchmarks")
from bench_render import grid_mesh
from gradsim_jax.compilation import jit
from gradsim_jax.render import FaceColors, Lights, RenderSettings, look_at_camera, render, suggest_capacities
OUT = os.environ.get("OUT", "/tmp")

def timed(fn, *a, n=9):
    t0 = time.perf_counter(); jax.block_until_ready(fn(*a)); c = time.perf_counter() - t0
    ts = []
    for _ in range(n):
        t = time.perf_counter(); jax.block_until_ready(fn(*a)); ts.append(time.perf_counter() - t)
    return round(1e3 * min(ts), 3), round(1e3 * float(np.median(ts)), 3), round(c, 1)

def profile(name, fn, *args, reps=5):
    d = f"/tmp/prof_{name}"
    with jax.profiler.trace(d):
        for _ in range(reps):
            jax.block_until_ready(fn(*args))
    pd = jax.profiler.ProfileData.from_file(glob.glob(f"{d}/**/*.xplane.pb", recursive=True)[0])
    tot = collections.Counter(); cnt = collections.Counter()
    for plane in pd.planes:
        if "TPU:0" not in plane.name: continue
        for line in plane.lines:
            if line.name != "XLA Ops": continue
            for ev in line.events:
                tot[ev.name] += ev.duration_ns; cnt[ev.name] += 1
    top = [(k[:160], round(v / reps / 1e3, 1), cnt[k] // reps) for k, v in tot.most_common(30)]
    for t in top[:18]: print("   ", t, flush=True)
    return top

vertices, faces = grid_mesh(20, 10, 0.1)
vertices[:, 2] = 0.15 * np.sin(3.0 * vertices[:, 0]) * (0.5 + vertices[:, 1])
camera = look_at_camera(3.0, 25.0, 30.0, width=256, height=256)
colors = FaceColors(jnp.asarray(np.random.default_rng(0).uniform(0.2, 1.0, (len(faces), 3)), jnp.float32))
lights = Lights(jnp.asarray(0.5), jnp.asarray(0.5), jnp.asarray([0.3, 1.0, -0.6]))
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
