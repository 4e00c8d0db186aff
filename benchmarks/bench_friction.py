"""Friction from a skidding cloth (issue 34, item 7): gradients and fits through sliding to rest.

The scenes: a 5 x 3 cloth (cell 0.1 m, 10 g per particle, tri_ke 300) thrown sideways at 1.6 m/s skids to a
stop on the floor (contact ke 1000, kd 10, kf 100, mu 0.35); 24 frames at 30 fps, 32 substeps, 64 px, the
SoftRas edge model; "floor": it starts lying on the floor (its particles at y = 0.0099 m, radius 0.01 m),
"drop": 2 cm above it. At 32 substeps a 10 g particle's viscous friction has the rate dt kf / m = 10.4 per
step: taken explicitly, as Warp 1.8 does, the stopped cloth chatters.

Targets: our own rendering of the truth, and (with --warp-python) the cloth simulated by NVIDIA Warp 1.8.1
(`reference/warp_skid.py`, explicit penalty contact, float32) rendered by our renderer. For each target and
each way of integrating the contact (`[simulation] contact`: "implicit", the default, and "explicit", Warp's):
`gradsim-jax gradcheck` at mu = 0.6 (reverse mode against central differences in float64, float32 against
float64) and `gradsim-jax fit` of friction from 0.6 and from 0.2 (40 Adam iterations, the polish), as a user
runs them.

    python benchmarks/bench_friction.py [--warp-python /tmp/warpenv/bin/python]   # -> results/friction.json
    python benchmarks/bench_friction.py --table
    python benchmarks/bench_friction.py --timing [--quick]   # -> results/contact_timing[_gpu].json

--timing measures what taking the contact backward costs: the skidding cloth's rollout (768 steps) and a
64 x 64 cloth sliding on the floor (200 steps), forward and forward + gradient (w.r.t. mu), each integrator,
compile apart from run (best of several, `block_until_ready`), on the default backend.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "friction.json"
TRUTH = 0.35
STARTS = (0.6, 0.2)
GRADCHECK_ONLY = False
#: scene: the cloth's initial height (m)
SCENES = {"floor": 0.0099, "drop": 0.03}

SCENE = """
[scene]
grid = [5, 3]
cell = [0.1, 0.1]
pos = [-0.45, {y}, -0.15]
rot = [0.7071068, 0.7071068, 0.0, 0.0]
velocity = [1.6, 0.0, 0.0]
ground = true

[material]
mass = 0.01
tri_ke = 300.0
tri_ka = 300.0
tri_kd = 1.0
contact_ke = 1000.0
contact_kd = 10.0
contact_kf = 100.0
contact_mu = {mu}

[camera]
distance = 1.5
elevation = 35.0
azimuth = 10.0

[render]
width = 64
height = 64
coverage = "softras"

[simulation]
fps = 30.0
substeps = 32
frames = 24
contact = "{contact}"

[fit]
free = ["friction"]
iterations = 40
learning_rate = 0.05
"""


def write_scene(folder: Path, name: str, mu: float, contact: str, start=None, y=SCENES["floor"]) -> Path:
    text = SCENE.format(mu=mu, contact=contact, y=y)
    if start is not None:
        text += f"\n[initial]\ncontact_mu = {start}\n"
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def gradsim(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradsim_jax.cli", *map(str, args)], capture_output=True,
                          text=True, check=False)


def warp_target(folder: Path, warp_python: str, y: float) -> Path:
    """The truth simulated by Warp 1.8.1, rendered by our renderer: a folder of RGBA PNGs."""
    from gradsim_jax.render.video import write_png_folder
    from gradsim_jax.scenefile import load_scene
    from gradsim_jax.sysid.experiment import render_frames

    exp = load_scene(write_scene(folder, "truth_warp", TRUTH, "explicit", y=y)).experiment()
    p, top, st = exp.params, exp.topology, exp.state0
    dt = exp.frame_dt / exp.substeps
    np.savez(folder / "scene.npz", x=np.asarray(st.particles.x), v=np.asarray(st.particles.v),
             mass=np.asarray(p.particles.mass), triangles=np.asarray(top.cloth.triangles),
             tri_ke=np.asarray(p.cloth.tri_ke), tri_ka=np.asarray(p.cloth.tri_ka), tri_kd=np.asarray(p.cloth.tri_kd),
             radius=float(p.particles.radius), contact_ke=float(p.contact.ke), contact_kd=float(p.contact.kd),
             contact_kf=float(p.contact.kf), contact_mu=float(p.contact.mu), gravity=np.asarray(p.world.gravity),
             dt=dt, substeps=exp.substeps, frames=exp.frames)
    subprocess.run([warp_python, str(HERE / "reference" / "warp_skid.py"), str(folder / "scene.npz"),
                    str(folder / "warp.npz")], check=True)
    x = np.load(folder / "warp.npz")["x"].astype(np.float32)
    frames = np.asarray(render_frames(exp, x))
    from gradsim_jax.sysid.experiment import trajectory

    distance = {}
    for contact in ("implicit", "explicit"):
        ours = load_scene(write_scene(folder, f"truth_ours_{contact}", TRUTH, contact, y=y)).experiment()
        mine = np.asarray(trajectory(ours, dict(ours.theta)).particles.x)
        distance[contact] = float(np.abs(x - mine).max())
    print(f"Warp's motion against ours: largest particle distance {distance} m")
    return write_png_folder(folder / f"target_warp_{y}", frames), distance


def measure(folder: Path, target: Path, scene_name: str, label: str, contact: str) -> dict:
    row = {"scene": scene_name, "target": label, "contact": contact}
    y = SCENES[scene_name]
    scene = write_scene(folder, f"{label}_{contact}_gc", TRUTH, contact, start=STARTS[0], y=y)
    out = folder / f"gc_{label}_{contact}"
    gradsim("gradcheck", scene, "--target", target, "--out", out)
    check = json.loads((out / "gradcheck.json").read_text())
    q = check["quantities"][0]
    row["gradcheck"] = {k: q[k] for k in ("reverse", "forward", "finite_difference", "fd_error", "f32_error",
                                          "verdict")}
    row["fits"] = []
    for start in (() if GRADCHECK_ONLY else STARTS):
        scene = write_scene(folder, f"{label}_{contact}_{start}", TRUTH, contact, start=start, y=y)
        out = folder / f"fit_{label}_{contact}_{start}"
        t0 = time.perf_counter()
        done = gradsim("fit", scene, "--target", target, "--out", out)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            row["fits"].append({"start": start, "error": done.stderr.strip().splitlines()[-1]})
            continue
        report = json.loads((out / "report.json").read_text())
        mu = float(report["estimated"]["friction"])
        row["fits"].append({"start": start, "estimate": mu, "relative_error": abs(mu - TRUTH) / TRUTH,
                            "final_loss": report["final_loss"], "initial_loss": report["convergence"]["initial_loss"],
                            "converged": report["convergence"]["converged"], "wall_s": wall})
    return row


def table(results: dict) -> str:
    lines = ["| scene | target | contact | reverse vs FD | float32 vs float64 | from 0.6 | from 0.2 |",
             "|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        g = r["gradcheck"]
        fits = []
        for f in r["fits"]:
            fits.append(f.get("error", f"{f['relative_error']:.1e}{'' if f['converged'] else ' (not converged)'}"))
        lines.append(f"| {r['scene']} | {r['target']} | {r['contact']} | {g['fd_error']:.1e} | {g['f32_error']:.1e} | "
                     f"{' | '.join(fits)} |")
    return "\n".join(lines)


def timing_rows(quick: bool = False) -> list:
    """Compile and run times of forward and forward + gradient rollouts, implicit against explicit contact."""
    import jax
    import jax.numpy as jnp

    import gradsim_jax as gs
    from gradsim_jax.physics import SemiImplicitEuler, replace_paths

    flat = gs.quat_from_axis_angle((1.0, 0.0, 0.0), np.pi / 2)
    cases = {
        "skid 5x3 (24 particles), 768 steps": (gs.cloth_grid(5, 3, 0.1, 0.1, pos=(-0.45, 0.0099, -0.15), rot=flat,
                                                            vel=(1.6, 0.0, 0.0), mass=0.01, tri_ke=300.0,
                                                            tri_ka=300.0, tri_kd=1.0, bend_ke=0.0), 24, 32),
        "slide 64x64 (4225 particles), 200 steps": (gs.cloth_grid(64, 64, 0.01, 0.01, pos=(-0.3, 0.0099, -0.3),
                                                                 rot=flat, vel=(1.0, 0.0, 0.5), mass=0.002,
                                                                 tri_ke=300.0, tri_ka=300.0, tri_kd=0.1,
                                                                 bend_ke=0.0), 10, 20),
    }
    rows = []
    repeats = 3 if quick else 7
    for name, (scene, frames, substeps) in cases.items():
        top, par, st = scene.build(ground=True, contact_ke=1e3, contact_kd=10.0, contact_kf=100.0, contact_mu=0.35)
        for implicit in (True, False):
            integrator = SemiImplicitEuler(implicit_contact=implicit)

            def final(mu):
                p = replace_paths(par, {"contact.mu": mu})
                traj = gs.simulate(top, p, st, frames=frames, substeps=substeps, frame_dt=1 / 30,
                                   integrator=integrator)
                return jnp.mean(traj.particles.x[-1] ** 2)

            for mode, fn in (("forward", final), ("value_and_grad", jax.value_and_grad(final))):
                jitted = gs.jit(fn)
                mu = jnp.asarray(0.35, par.contact.mu.dtype)
                t0 = time.perf_counter()
                compiled = jitted.lower(mu).compile()
                compile_s = time.perf_counter() - t0
                jax.block_until_ready(compiled(mu))
                best = float("inf")
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    jax.block_until_ready(compiled(mu))
                    best = min(best, time.perf_counter() - t0)
                rows.append({"case": name, "contact": "implicit" if implicit else "explicit", "mode": mode,
                             "compile_s": compile_s, "run_s": best, "steps": frames * substeps})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warp-python", default=os.environ.get("WARP_PYTHON"),
                        help="an interpreter with warp-lang 1.8.1 and numpy: add Warp's target")
    parser.add_argument("--table", action="store_true", help="only print the table of the JSON")
    parser.add_argument("--timing", action="store_true", help="only time the rollouts (implicit vs explicit)")
    parser.add_argument("--quick", action="store_true", help="with --timing: fewer repeats")
    parser.add_argument("--gradcheck-only", action="store_true", help="gradcheck the targets, fit nothing")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(RESULTS.read_text())))
        return
    if args.timing:
        import jax

        backend = jax.default_backend()
        rows = timing_rows(args.quick)
        out = RESULTS.parent / f"contact_timing{'' if backend == 'cpu' else '_' + backend}.json"
        device = jax.devices()[0].device_kind if backend != "cpu" else (platform.processor() or platform.machine())
        out.write_text(json.dumps({"machine": f"{device}, {os.cpu_count()} host cores, jax {jax.__version__}",
                                   "date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=1))
        return
    global GRADCHECK_ONLY
    GRADCHECK_ONLY = args.gradcheck_only
    rows, distances = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for scene_name, y in SCENES.items():
            ours = folder / f"target_ours_{scene_name}"
            done = gradsim("render", write_scene(folder, "truth", TRUTH, "implicit", y=y), "--out", ours)
            if done.returncode:
                raise SystemExit(done.stderr)
            targets = [("ours", ours)]
            if args.warp_python:
                target, distances[scene_name] = warp_target(folder, args.warp_python, y)
                targets.append(("warp", target))
            for label, target in targets:
                for contact in ("implicit", "explicit"):
                    row = measure(folder, target, scene_name, label, contact)
                    print(json.dumps(row))
                    rows.append(row)
    results = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
               "date": time.strftime("%Y-%m-%d"), "truth": TRUTH, "warp_distance_m": distances, "rows": rows}
    out = RESULTS if not GRADCHECK_ONLY else RESULTS.parent / f"friction_gradcheck_{_backend()}.json"
    out.write_text(json.dumps(results, indent=1))
    print(table(results))


def _backend() -> str:
    import jax

    return jax.default_backend()


if __name__ == "__main__":
    main()
