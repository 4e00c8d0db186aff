"""Blender's collision response on Blender's drape (issue 54): how closely, how reproducibly and how fast.

Scene: examples/blender_cloth/drape_blender.toml, every setting Blender's restated (springs, angular bending, the
implicit step at 5 substeps with CG 100 / 0.01, `ImpulseContact` against the 64 x 32 UV ball and the 8 m floor),
simulated over Blender's 60 frames from its start and scored on its vertices (benchmarks/blender/data/drape:
mean distance per frame / the cloth's 0.8 m size, frames 0-29 and 30-59 apart). Cases:

- float64 and float32 from the file's start;
- float32 from the start moved by 3e-8 m (normal noise, one seed each): the scene's chaos, measured;
- time of one step, forward and gradient (of the positions' sum by the step's start), compile apart, on a state of
  Blender's frame 20 (the cloth on the ball and the floor), against the same step without contact.

Writes benchmarks/results/drape_contact.json.

    python benchmarks/bench_drape_contact.py [--seeds 3] [--timing-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SCENE = ROOT / "examples" / "blender_cloth" / "drape_blender.toml"
DATA = ROOT / "benchmarks" / "blender" / "data" / "drape"
FRAMES, SUBSTEPS, FPS, SIZE = 59, 5, 30.0, 0.8


def _scene():
    from gradsim_jax.scenefile import load_scene

    return load_scene(SCENE).experiment(native_size=(120, 160))


def _rollout(exp, dtype, noise=None):
    """Positions [FRAMES + 1, 289, 3] of the cloth, simulated in `dtype` from the file's start (+ noise)."""
    import jax
    import jax.numpy as jnp

    cast = lambda t: jax.tree_util.tree_map(  # noqa: E731
        lambda a: jnp.asarray(a, dtype) if hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.floating) else a, t)
    topology, params, state = exp.topology, cast(exp.params), cast(exp.state0)
    if noise is not None:
        x = state.particles.x + jnp.asarray(noise, dtype)
        state = dataclasses.replace(state, particles=dataclasses.replace(state.particles, x=x))
    dt = 1.0 / (FPS * SUBSTEPS)

    @jax.jit
    def frame(s, t0):
        def body(s, q):
            return exp.integrator.step(topology, params, s, None, t0 + q * dt, dt), None
        return jax.lax.scan(body, s, jnp.arange(SUBSTEPS, dtype=dtype))[0]

    xs = [np.asarray(state.particles.x)]
    for k in range(FRAMES):
        state = frame(state, jnp.asarray(SUBSTEPS * k * dt, dtype))
        xs.append(np.asarray(state.particles.x))
    return np.stack(xs)[:, :289]


def _score(xs, ref) -> dict:
    err = np.linalg.norm(xs - ref[:len(xs)], axis=-1).mean(-1) / SIZE * 100.0
    return {"fitted_frames_percent": round(float(err[:30].mean()), 3),
            "held_out_percent": round(float(err[30:].mean()), 3),
            "per_frame_percent": [round(float(e), 3) for e in err]}


def _timing(exp) -> dict:
    import jax
    import jax.numpy as jnp

    ref = np.load(DATA / "vertices.npy")
    st = exp.state0
    x = jnp.asarray(np.concatenate([ref[20], np.asarray(st.particles.x)[289:]]), jnp.float32)
    v = jnp.asarray(np.concatenate([(ref[21] - ref[20]) * FPS, np.zeros_like(np.asarray(st.particles.x)[289:])]),
                    jnp.float32)
    out = {}
    for name, integrator, topology, params in (
            ("impulse contact", exp.integrator, exp.topology, exp.params),
            ("no contact", dataclasses.replace(exp.integrator, contact=None),
             dataclasses.replace(exp.topology, ground=False, colliders=None),
             dataclasses.replace(exp.params, colliders=None))):
        def step(x, integrator=integrator, topology=topology, params=params):
            s = dataclasses.replace(st, particles=dataclasses.replace(st.particles, x=x, v=v))
            return integrator.step(topology, params, s, None, 0.0, 1.0 / (FPS * SUBSTEPS)).particles.x
        for kind, fn in (("forward", jax.jit(step)), ("gradient", jax.jit(jax.grad(lambda x: jnp.sum(step(x)))))):
            t = time.perf_counter()
            jax.block_until_ready(fn(x))
            compile_s = time.perf_counter() - t
            runs = []
            for _ in range(5):
                t = time.perf_counter()
                jax.block_until_ready(fn(x))
                runs.append(time.perf_counter() - t)
            out[f"{name}, {kind}"] = {"compile_s": round(compile_s, 2), "step_ms_median": round(1e3 * float(np.median(runs)), 1),
                                      "step_ms_range": [round(1e3 * min(runs), 1), round(1e3 * max(runs), 1)]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="perturbed float32 starts")
    parser.add_argument("--timing-only", action="store_true", help="only time the step (on an idle machine), "
                        "keeping the recorded runs")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    if args.timing_only:
        result = json.loads((RESULTS / "drape_contact.json").read_text())
        jax.config.update("jax_enable_x64", False)
        result["timing_2_cores"] = _timing(_scene())
        print(json.dumps(result["timing_2_cores"], indent=1))
        (RESULTS / "drape_contact.json").write_text(json.dumps(result, indent=1) + "\n")
        return
    ref = np.load(DATA / "vertices.npy")
    exp = _scene()
    result = {"scene": str(SCENE.relative_to(ROOT)), "machine": f"{platform.processor() or platform.machine()}, "
              f"{jax.device_count()} {jax.default_backend()} device(s), jax {jax.__version__}", "runs": {}}
    for name, dtype in (("float64", jnp.float64), ("float32", jnp.float32)):
        t = time.perf_counter()
        result["runs"][name] = _score(_rollout(exp, dtype), ref) | {"seconds": round(time.perf_counter() - t, 1)}
        print(name, {k: v for k, v in result["runs"][name].items() if k != "per_frame_percent"}, flush=True)
    n = exp.state0.particles.x.shape[0]
    for seed in range(1, args.seeds + 1):
        noise = np.random.default_rng(seed).normal(0.0, 3e-8, (n, 3))
        key = f"float32, start moved 3e-8 m (seed {seed})"
        result["runs"][key] = _score(_rollout(exp, jnp.float32, noise), ref)
        print(key, {k: v for k, v in result["runs"][key].items() if k != "per_frame_percent"}, flush=True)
    jax.config.update("jax_enable_x64", False)
    result["timing_2_cores"] = _timing(_scene())
    print(json.dumps(result["timing_2_cores"], indent=1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "drape_contact.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
