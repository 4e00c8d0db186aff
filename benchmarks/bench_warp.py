"""gradsim-jax against NVIDIA Warp 1.8.1 (`warp.sim`, CPU) on the same cloth scenes, in one run.

Cases: gradSim's demo cloth (233 particles, 400 triangles, two anchor springs; 2880 steps of
dt = (1/60)/32) and a 128 x 128 cloth hanging from its top row (16,641 particles, 32,768 triangles, no
bending edges (bend_ke = 0); 100 steps of dt = 1/1920, reported per step). Loss: mean(x_final^2);
the gradient is w.r.t. the initial velocities (and, in both engines, the membrane materials).

The Warp model is built from the very arrays of our scene (positions, velocities, masses, triangles,
springs, bending edges with their rest angles), with ground and particle-particle contact off, so both
engines compute the same forces. Every measurement runs in a process of its own (`--rounds` processes per
engine and case, interleaved, the fastest kept): compile time apart from run time, forward apart from
forward + gradient, best of several repeats after a warm-up, `block_until_ready` / `wp.synchronize`, peak
RSS while running (the high-water mark reset after compiling and a garbage collection; on our side also
after `jax.clear_caches()`, which drops the tracing and compilation caches of the scene's set-up and of
tracing, not the compiled program that runs). Warp is not a dependency of gradsim-jax: give its
interpreter with --warp-python (a venv with `pip install warp-lang==1.8.1 numpy`).

    python -m venv /tmp/warpvenv && /tmp/warpvenv/bin/pip install warp-lang==1.8.1 numpy
    python benchmarks/bench_warp.py --warp-python /tmp/warpvenv/bin/python   # -> results/warp_compare.json
    python benchmarks/bench_warp.py --table      # only rewrite the table of docs/benchmarks.md from that JSON

A run writes its table (ratios, the issue's targets, memory, the machine) into docs/benchmarks.md between
<!-- warp:start --> and <!-- warp:end --> (`--no-readme` to leave it alone).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rss import peak_rss_mb, reset_peak_rss

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE.parent / "docs" / "benchmarks.md"  # the page of the benchmark tables
START, END = "<!-- warp:start -->", "<!-- warp:end -->"
#: (case, mode): the issue's target for the speedup and, per step, for our time.
TARGETS = {("demo", "forward"): (6.0, None), ("demo", "value_and_grad"): (4.0, None),
           ("grid128", "forward"): (2.0, 1.2e-3), ("grid128", "value_and_grad"): (2.0, 4.0e-3)}
#: Our gradient's time over our forward's, at most.
GRAD_OVER_FORWARD = 4.0
LABELS = {"demo": "demo 20 x 10", "grid128": "grid 128 x 128"}

# name: (frames, substeps, frame_dt, repeats)
CASES = {
    "demo": (90, 32, 1.0 / 60.0, 21),
    "grid128": (4, 25, 25.0 / 1920.0, 7),
}


#: Our gradient keeps the state before every step, as Warp's tape keeps every State (`checkpoint="substep"`:
#: memory T s S + R; 16 MB for the demo, 40 MB for the 128 x 128 cloth's 100 steps).
CHECKPOINT = "substep"


def build_scene(case: str):
    """(topology, params, state0) of a case, from gradsim-jax's builders."""
    if case == "demo":
        from gradsim_jax.scenes import gradsim_demo_cloth

        return gradsim_demo_cloth().build(gravity=(0.0, -9.8, 0.0))
    import gradsim_jax as gs

    n = 128
    cloth = gs.cloth_grid(n, n, 2.0 / n, 2.0 / n, pos=(-1.0, 0.0, 0.0), mass=0.01, fix_top=True, tri_ke=1e3,
                          tri_ka=1e3, tri_kd=1.0, bend_ke=0.0)
    return cloth.build()


def export_scene(case: str, path: Path) -> None:
    """Write the arrays Warp needs to rebuild the same scene (numpy only on the Warp side)."""
    top, par, st = build_scene(case)
    pinned = np.asarray(top.particles.pinned) | (np.asarray(par.particles.mass) <= 0)
    # Pinned particles stay put in ours; Warp would move them with their initial velocity.
    v0 = np.where(pinned[:, None], 0.0, np.asarray(st.particles.v))
    np.savez(path, x0=np.asarray(st.particles.x), v0=v0,
             mass=np.where(pinned, 0.0, np.asarray(par.particles.mass)),
             triangles=np.asarray(top.cloth.triangles), tri_ke=np.asarray(par.cloth.tri_ke),
             tri_ka=np.asarray(par.cloth.tri_ka), tri_kd=np.asarray(par.cloth.tri_kd),
             tri_drag=np.asarray(par.cloth.tri_drag), tri_lift=np.asarray(par.cloth.tri_lift),
             springs=np.asarray(top.springs.pairs), spring_ke=np.asarray(par.springs.ke),
             spring_kd=np.asarray(par.springs.kd), edges=np.asarray(top.cloth.bend_edges),
             edge_rest=np.asarray(par.cloth.bend_rest), edge_ke=np.asarray(par.cloth.bend_ke),
             edge_kd=np.asarray(par.cloth.bend_kd), gravity=np.asarray(par.world.gravity))


def measure_ours(case: str, mode: str) -> dict:
    import jax
    import jax.numpy as jnp
    from gradsim_jax.compilation import jit

    import gradsim_jax as gs
    from gradsim_jax.physics import replace_paths

    frames, substeps, frame_dt, repeats = CASES[case]
    top, par, st = build_scene(case)

    def loss(v0, tri_ke):
        p = replace_paths(par, {"cloth.tri_ke": tri_ke})
        traj = gs.simulate(top, p, gs.particle_state(st.particles.x, v0), frames=frames, substeps=substeps,
                           frame_dt=frame_dt, checkpoint=CHECKPOINT)
        return jnp.mean(traj.particles.x[-1] ** 2)

    fn = jit(loss) if mode == "forward" else jit(jax.value_and_grad(loss, argnums=(0, 1)))
    args = (st.particles.v, par.cloth.tri_ke)
    t0 = time.perf_counter()
    compiled = fn.lower(*args).compile()
    compile_s = time.perf_counter() - t0
    del fn
    reset_peak_rss(drop_jax_caches=True)
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    value = float(out if mode == "forward" else out[0])
    return {"compile_s": compile_s, "run_s": min(times), "run_peak_rss_mb": peak_rss_mb(), "loss": value}


def measure_warp(case: str, mode: str, scene: Path) -> dict:
    import warp as wp
    import warp.sim

    wp.config.quiet = True
    wp.init()
    frames, substeps, frame_dt, repeats = CASES[case]
    steps, dt = frames * substeps, frame_dt / substeps
    d = np.load(scene)
    builder = warp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=float(d["gravity"][1]))
    for x, v, m in zip(d["x0"], d["v0"], d["mass"]):
        builder.add_particle(tuple(map(float, x)), tuple(map(float, v)), float(m), radius=0.0)
    t = d["triangles"]
    builder.add_triangles(t[:, 0], t[:, 1], t[:, 2], d["tri_ke"], d["tri_ka"], d["tri_kd"], d["tri_drag"],
                          d["tri_lift"])
    for (i, j), ke, kd in zip(d["springs"], d["spring_ke"], d["spring_kd"]):
        builder.add_spring(int(i), int(j), float(ke), float(kd), 0.0)
    e = d["edges"]
    if len(e):
        builder.add_edges(e[:, 0], e[:, 1], e[:, 2], e[:, 3], d["edge_rest"], d["edge_ke"], d["edge_kd"])
    grad = mode != "forward"
    model = builder.finalize("cpu", requires_grad=grad)
    model.ground = False
    integrator = warp.sim.SemiImplicitIntegrator()
    n = model.particle_count

    @wp.kernel
    def mean_square(x: wp.array(dtype=wp.vec3), scale: float, loss: wp.array(dtype=float)):
        tid = wp.tid()
        wp.atomic_add(loss, 0, wp.dot(x[tid], x[tid]) * scale)

    loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=grad)
    if grad:
        states = [model.state(requires_grad=True) for _ in range(steps + 1)]
    else:
        states = [model.state(), model.state()]

    def run():
        loss.zero_()
        if not grad:
            a, b = states
            wp.copy(a.particle_q, model.particle_q)  # every repeat starts from the initial state
            wp.copy(a.particle_qd, model.particle_qd)
            for _ in range(steps):
                a.clear_forces()
                integrator.simulate(model, a, b, dt)
                a, b = b, a
            wp.launch(mean_square, dim=n, inputs=[a.particle_q, 1.0 / (3 * n)], outputs=[loss], device="cpu")
            wp.synchronize()
            return
        tape = wp.Tape()
        with tape:
            for i in range(steps):
                states[i].clear_forces()
                integrator.simulate(model, states[i], states[i + 1], dt)
            wp.launch(mean_square, dim=n, inputs=[states[-1].particle_q, 1.0 / (3 * n)], outputs=[loss], device="cpu")
        tape.backward(loss)
        wp.synchronize()
        if not np.isfinite(states[0].particle_qd.grad.numpy()).all():
            raise FloatingPointError("warp: non-finite gradient")
        tape.zero()

    t0 = time.perf_counter()
    run()  # loads (compiles or takes from Warp's kernel cache) every kernel
    compile_s = time.perf_counter() - t0
    reset_peak_rss(collect=True)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return {"compile_s": compile_s, "run_s": min(times), "run_peak_rss_mb": peak_rss_mb(),
            "loss": float(loss.numpy()[0]), "warp": wp.config.version}


def _child(python: str, engine: str, case: str, mode: str, scene: Path) -> dict:
    cmd = [python, __file__, "--child", engine, case, mode, str(scene)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def readme_table(data: dict) -> str:
    """The README's table of a `warp_compare.json`: each case and mode with both engines' times, the
    speedup and whether it meets the issue's target, compile time and memory; then the gradient-over-forward
    ratios and the memory target."""
    load = data.get("load_average_at_start", [float("nan")])[0]
    end = data.get("load_average_at_end", [float("nan")])[0]
    lines = [f"{data['machine']}, {data['date']} (load {load:.1f} at the start, {end:.1f} at the end; "
             "`benchmarks/bench_warp.py`):", "",
             "| case | steps | mode | Warp | ours | speedup | target | met | our compile (s) | Warp RSS (MB) | "
             "our RSS (MB) |",
             "|---|---:|---|---:|---:|---:|---|---|---:|---:|---:|"]
    met_all = True
    for r in data["rows"]:
        steps, per_step = r["steps"], r["case"] != "demo"
        w, o = r["warp"]["run_s"], r["ours"]["run_s"]
        fmt = (lambda t: f"{t / steps * 1e3:.2f} ms/step") if per_step else (lambda t: f"{t:.3f} s")  # noqa: E731
        ratio, limit = TARGETS.get((r["case"], r["mode"]), (None, None))
        target = [] if ratio is None else [f">= {ratio:g}x"]
        met = ratio is None or r["speedup"] >= ratio
        if limit is not None:
            target.append(f"<= {limit * 1e3:g} ms")
            met = met and o / steps <= limit
        met_all = met_all and met
        mode = "forward" if r["mode"] == "forward" else "forward + gradient"
        lines.append(f"| {LABELS.get(r['case'], r['case'])} | {steps} | {mode} | {fmt(w)} | {fmt(o)} | "
                     f"{r['speedup']:.1f}x | {', '.join(target) or '-'} | {'yes' if met else 'no'} | "
                     f"{r['ours']['compile_s']:.1f} | {r['warp']['run_peak_rss_mb']:.0f} | "
                     f"{r['ours']['run_peak_rss_mb']:.0f} |")
    notes = []
    for r in data["rows"]:
        if "ours_grad_over_forward" in r:
            ok = r["ours_grad_over_forward"] <= GRAD_OVER_FORWARD
            met_all = met_all and ok
            notes.append(f"{LABELS.get(r['case'], r['case'])}: our gradient {r['ours_grad_over_forward']:.2f}x our "
                         f"forward (target <= {GRAD_OVER_FORWARD:g}x: {'met' if ok else 'missed'}; Warp's "
                         f"{r['warp_grad_over_forward']:.2f}x)")
        if r["case"] == "grid128" and r["mode"] == "value_and_grad":
            ok = r["ours"]["run_peak_rss_mb"] <= r["warp"]["run_peak_rss_mb"]
            met_all = met_all and ok
            notes.append(f"128 x 128 gradient memory {r['ours']['run_peak_rss_mb']:.0f} MB against Warp's "
                         f"{r['warp']['run_peak_rss_mb']:.0f} MB (target <= Warp's: {'met' if ok else 'missed'})")
    lines += [""] + [f"- {n}" for n in notes]
    lines.append(f"- Every target {'met' if met_all else 'is not met'} in this run.")
    return "\n".join(lines)


def write_readme_table(data: dict, readme: Path = README) -> None:
    text = readme.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{readme} lacks the markers {START} ... {END}")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + START + "\n" + readme_table(data) + "\n" + END + tail)
    print(f"updated the Warp table in {readme}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warp-python", default=os.environ.get("WARP_PYTHON", "/tmp/warpvenv/bin/python"),
                        help="a Python interpreter with warp-lang 1.8.1 and numpy (default: $WARP_PYTHON or "
                             "/tmp/warpvenv/bin/python)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: " + ", ".join(CASES))
    parser.add_argument("--out", type=Path, default=RESULTS / "warp_compare.json")
    parser.add_argument("--rounds", type=int, default=3,
                        help="processes per engine and case, interleaved; the fastest is kept (default 3: this "
                             "machine's speed drifts by 1.5x over minutes)")
    parser.add_argument("--table", action="store_true", help="only rewrite the README's table from --out")
    parser.add_argument("--no-readme", action="store_true", help="do not write the README's table")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.table:
        write_readme_table(json.loads(args.out.read_text()))
        return
    if args.child:
        engine, case, mode, scene = args.child
        row = measure_ours(case, mode) if engine == "ours" else measure_warp(case, mode, Path(scene))
        print(json.dumps(row))
        return
    if not Path(args.warp_python).exists():
        sys.exit(f"no Warp interpreter at {args.warp_python}: create one (see the module docstring) or pass "
                 "--warp-python")
    sys.path.insert(0, str(HERE))
    from bench_physics import machine

    load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            if case not in CASES:
                sys.exit(f"unknown case {case!r}; choose from {', '.join(CASES)}")
            scene = Path(tmp) / f"{case}.npz"
            export_scene(case, scene)
            frames, substeps, _, _ = CASES[case]
            for mode in ("forward", "value_and_grad"):
                r = {"case": case, "mode": mode, "steps": frames * substeps, "rounds": args.rounds}
                # Interleaved, so that a change in the machine's load hits both engines alike; each engine's
                # best round (fastest run; its peak RSS is that round's).
                r["warp"] = r["ours"] = None
                for _ in range(args.rounds):
                    for engine, python in (("warp", args.warp_python), ("ours", sys.executable)):
                        row = _child(python, engine, case, mode, scene)
                        if r[engine] is None or row["run_s"] < r[engine]["run_s"]:
                            r[engine] = row
                r["speedup"] = r["warp"]["run_s"] / r["ours"]["run_s"]
                rows.append(r)
                print(f"{case:8s} {mode:15s} warp {r['warp']['run_s'] * 1e3:9.1f} ms "
                      f"({r['warp']['run_peak_rss_mb']:5.0f} MB)  ours {r['ours']['run_s'] * 1e3:9.1f} ms "
                      f"({r['ours']['run_peak_rss_mb']:5.0f} MB, compile {r['ours']['compile_s']:.1f} s)  "
                      f"speedup {r['speedup']:.2f}x  loss {r['warp']['loss']:.6g} / {r['ours']['loss']:.6g}",
                      flush=True)
    by = {(r["case"], r["mode"]): r for r in rows}
    for case in {r["case"] for r in rows}:
        fwd, vg = by.get((case, "forward")), by.get((case, "value_and_grad"))
        if fwd and vg:
            vg["ours_grad_over_forward"] = vg["ours"]["run_s"] / fwd["ours"]["run_s"]
            vg["warp_grad_over_forward"] = vg["warp"]["run_s"] / fwd["warp"]["run_s"]
    out = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "load_average_at_start": load,
           "load_average_at_end": os.getloadavg(), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(f"machine: {out['machine']}; load {load[0]:.1f} -> {out['load_average_at_end'][0]:.1f}\nwrote {args.out}")
    if not args.no_readme:
        write_readme_table(out)


if __name__ == "__main__":
    main()
