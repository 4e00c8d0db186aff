"""TPU probe: where the rasterizer's gradient time goes; sort-free candidate selection; batched demo unroll."""
import dataclasses, sys, os, json
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, "benchmarks")
sys.path.insert(0, "benchmarks/tpu_probes")
from probe_common import render_case, timed  # noqa: E402

from gradsim_jax.compilation import jit
import importlib; R = importlib.import_module("gradsim_jax.render.rasterize")
T = importlib.import_module("gradsim_jax.render.tiling")
from gradsim_jax.render import RenderSettings, render, suggest_capacities
OUT = os.environ.get("OUT", "/tmp")
res = {}


orig_pix, orig_bin = T.pixel_candidates, T.bin_faces

def pix_free(table, tile_mask, pixel_xy, cutoff_sq, capacity):
    c = {name: jax.lax.stop_gradient(table[..., None, :, i]) for i, name in enumerate(T.FACE_COLUMNS)}
    px, py = pixel_xy[..., 0:1], pixel_xy[..., 1:2]
    d2 = None
    for k in range(3):
        ex, ey = c[f"e{k}x"], c[f"e{k}y"]
        qx, qy = px - c[f"v{k}x"], py - c[f"v{k}y"]
        t = jnp.clip((qx * ex + qy * ey) * c[f"il{k}"], 0.0, 1.0)
        rx, ry = qx - t * ex, qy - t * ey
        d2k = rx * rx + ry * ry
        d2 = d2k if d2 is None else jnp.minimum(d2, d2k)
    ok = d2 < cutoff_sq
    inside = None
    for i in range(3):
        u = c[f"a{i}"] * px + c[f"b{i}"] * py + c[f"c{i}"] > 0
        inside = u if inside is None else inside & u
    ok = tile_mask[..., None, :] & (ok | inside)
    kt = ok.shape[-1]
    rank = jnp.cumsum(ok, axis=-1, dtype=jnp.int32) - 1
    hit = ok[..., None] & (rank[..., None] == jnp.arange(capacity, dtype=jnp.int32))  # [..., P, Kt, cap]
    local = jnp.sum(jnp.where(hit, jnp.arange(kt, dtype=jnp.int32)[:, None], 0), axis=-2)
    mask = jnp.any(hit, axis=-2)
    counts = rank[..., -1] + 1
    overflow = jnp.sum(jnp.maximum(counts - capacity, 0), dtype=jnp.int32)
    return local, mask, overflow, jnp.max(counts)

def bin_free(screen, rect, radius, capacity):
    overlap = T.tile_overlap(screen.table, screen.valid, rect, radius)
    order = jnp.argsort(jax.lax.stop_gradient(screen.nearest_z), stable=True)
    ov = overlap[:, order]
    f = ov.shape[-1]
    rank = jnp.cumsum(ov, axis=-1, dtype=jnp.int32) - 1
    hit = ov[..., None] & (rank[..., None] == jnp.arange(capacity, dtype=jnp.int32))  # [tiles, F, cap]
    slot = jnp.sum(jnp.where(hit, jnp.arange(f, dtype=jnp.int32)[:, None], 0), axis=-2)
    mask = jnp.any(hit, axis=-2)
    return order[slot], mask, jnp.sum(overlap, axis=1, dtype=jnp.int32)

def use(pix, bins):
    R.pixel_candidates = pix_free if pix else orig_pix
    R.bin_faces = bin_free if bins else orig_bin
    R._COMPILED_RENDERERS.clear()

vertices, faces, camera, colors, lights = render_case()
x, fj = jnp.asarray(vertices), jnp.asarray(faces)
rows = []
ref = None
for ts in (8, 16):
    st = suggest_capacities(camera, vertices[None], faces, settings=RenderSettings(tile_size=ts))
    variants = [("top_k", False, False, st), ("pix_free", True, False, st), ("both_free", True, True, st),
                ("no_pixel_lists", False, False, dataclasses.replace(st, pixel_capacity=st.tile_capacity)),
                ("no_pixel_lists_bin_free", False, True, dataclasses.replace(st, pixel_capacity=st.tile_capacity)),
                ("both_free_1chunk", True, True, dataclasses.replace(st, pairs_per_chunk=10**8))]
    for name, pix, bins, s2 in variants:
        use(pix, bins)
        fwd = lambda v, s2=s2: render(camera, v, fj, colors, lights=lights, settings=s2)
        tgt = jit(fwd)(x * 1.01)
        g = jit(jax.value_and_grad(lambda v: jnp.mean((fwd(v) - tgt) ** 2)))
        img = np.asarray(jit(fwd)(x))
        if ref is None: ref = img
        row = dict(tile=ts, variant=name, caps=[s2.tile_capacity, s2.pixel_capacity, s2.pairs_per_chunk],
                   fwd=timed(jit(fwd), x), grad=timed(g, x), img_diff=float(np.max(np.abs(img - ref))))
        print(row, flush=True); rows.append(row)
    use(False, False)
    scr = R.screen_faces(camera, x, fj, True)
    _, _, _, rect = R.tile_layout(256, 256, ts)
    for name, fn in (("bin_top_k", orig_bin), ("bin_free", bin_free)):
        f = jit(lambda v, fn=fn: fn(R.screen_faces(camera, v, fj, True), rect, 0.02, st.tile_capacity))
        row = dict(tile=ts, piece=name, ms=timed(f, x)); print(row, flush=True); rows.append(row)
res["render"] = rows

import gradsim_jax as gs
from gradsim_jax.physics import replace_paths
from bench_physics import build_cloth
top, par, st0 = build_cloth("demo")
brow = []
def variant(n, checkpoint, unroll):
    def loss(ke):
        p = replace_paths(par, {"cloth.tri_ke": ke})
        return jnp.mean(gs.simulate(top, p, st0, frames=10, substeps=32, frame_dt=1/60, checkpoint=checkpoint, unroll=unroll).particles.x[-1] ** 2)
    f = jit(jax.vmap(jax.value_and_grad(loss)))
    kes = par.cloth.tri_ke * jnp.linspace(0.5, 1.5, n).reshape((n,) + (1,) * par.cloth.tri_ke.ndim)
    best, med, c = timed(f, kes, n=3)
    row = dict(members=n, checkpoint=str(checkpoint), unroll=unroll, per_s=round(n / best * 1e3), compile_s=c)
    print(row, flush=True); brow.append(row)
for ck, un in (("substep", 1), ("substep", 2), ("substep", 4), (True, 2)):
    try: variant(256, ck, un)
    except Exception as e: print("fail", ck, un, str(e)[:300], flush=True)
res["batched"] = brow
json.dump(res, open(f"{OUT}/probe4.json", "w"), indent=1)
