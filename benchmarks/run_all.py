"""Run every benchmark, then rewrite the benchmark tables of docs/benchmarks.md from their JSON results.

    python benchmarks/run_all.py            # physics, render, the ODE demos' and issue 38's recoveries, ~25 min
    python benchmarks/run_all.py --table    # only rebuild the table of docs/benchmarks.md from benchmarks/results/*.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "docs" / "benchmarks.md"  # the page of the benchmark tables
START, END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"


def physics_table(data: dict) -> str:
    lines = [
        f"Cloth simulator (`benchmarks/bench_physics.py`; {data['machine']}, {data['date']}). Loss on the final",
        "positions; gradient w.r.t. the initial velocities and the membrane stiffness. Peak RSS is the whole",
        "process, compilation included; 'running' is the peak while the compiled program runs (the RSS",
        "high-water mark reset after compiling), JAX's runtime included; 'temp' is XLA's scratch memory.",
        "",
        "| scene | steps | mode | checkpoint | compile (s) | run (s) | steps/s | peak RSS (MB) | running (MB) | temp (MB) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['case'].split(',')[0]} ({r['particles']} particles, {r['triangles']} triangles) | {r['steps']} | "
            f"{r['mode']} | {'per frame' if r['checkpoint'] else 'off'} | {r['compile_s']:.2f} | "
            f"{r['run_s_min']:.4f} | {r['steps_per_s']:,.0f} | {r['peak_rss_mb']:.0f} | "
            f"{r['run_peak_rss_mb'] or float('nan'):.0f} | {r['temp_mb']:.1f} |"
        )
    return "\n".join(lines)


def render_table(data: dict) -> str:
    meta = data["meta"]
    load = ", ".join(f"{x:.1f}" for x in meta.get("load_average", []))
    lines = [
        f"Soft rasterizer (`benchmarks/bench_render.py`; {meta['machine']}, {meta['cpus']} cores, jax {meta['jax']},",
        f"load average {load} at the start). Gradient of an RGBA image MSE w.r.t. the vertex positions; capacities",
        "from `suggest_capacities`; overflow 0 means the tiled result is exact. First call = trace + compile + run.",
        "",
        "| case | triangles | px | frames | tile / pixel capacity | overflow | forward (ms) | forward + grad (ms) "
        "| first call, grad (s) | peak RSS (MB) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in data["cases"]:
        lines.append(
            f"| {r['name']} | {r['triangles']} | {r['size']} | {r['frames']} | {r['tile_capacity']} / "
            f"{r['pixel_capacity']} | {r['overflow']} | {r['forward_ms']:.1f} | {r['grad_ms']:.1f} | "
            f"{r['grad_first_call_s']:.1f} | {r['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def gpu_table(physics: dict | None, render: dict | None) -> str:
    """GPU figures (results/*_gpu.json, written by `--out` on a GPU machine) in one short table each."""
    lines = []
    if physics:
        lines += [
            f"The same cloth cases on a GPU ({physics['machine']}, {physics['date']}; `--quick`, 3 repeats). Peak",
            "RSS there is dominated by the CUDA runtime (about 4 GB) and is left out.",
            "",
            "| scene | steps | mode | checkpoint | compile (s) | run (s) | steps/s | temp (MB) |",
            "|---|---:|---|---|---:|---:|---:|---:|",
        ]
        for r in physics["rows"]:
            lines.append(
                f"| {r['case'].split(',')[0]} | {r['steps']} | {r['mode']} | "
                f"{'per frame' if r['checkpoint'] else 'off'} | {r['compile_s']:.2f} | {r['run_s_min']:.4f} | "
                f"{r['steps_per_s']:,.0f} | {r['temp_mb']:.1f} |"
            )
    if render:
        meta = render["meta"]
        lines += [
            "",
            f"The soft rasterizer on the GPU ({meta.get('machine')}, jax {meta.get('jax')}):",
            "",
            "| case | triangles | px | frames | forward (ms) | forward + grad (ms) | first call, grad (s) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in render["cases"]:
            lines.append(f"| {r['name']} | {r['triangles']} | {r['size']} | {r['frames']} | {r['forward_ms']:.1f} | "
                         f"{r['grad_ms']:.1f} | {r['grad_first_call_s']:.1f} |")
    return "\n".join(lines)


def script_table(script: str):
    """The `table(data)` of benchmarks/SCRIPT.py (the scripts that format their own results)."""
    def fmt(data: dict) -> str:
        sys.path.insert(0, str(HERE))
        return importlib.import_module(script).table(data)

    return fmt


def write_table() -> None:
    parts = []
    for name, fmt in (("physics", physics_table), ("render", render_table),
                      ("ode_recovery", script_table("bench_ode_recovery")), ("smoke", script_table("bench_smoke")),
                      ("smoke_32", script_table("bench_smoke")), ("smoke_128_f64", script_table("bench_smoke")),
                      ("recoveries", script_table("bench_recoveries")),
                      ("colliders", script_table("bench_colliders")),
                      ("selfcontact", script_table("bench_selfcontact")),
                      ("contact_smoothing", script_table("bench_contact_smoothing"))):
        path = HERE / "results" / f"{name}.json"
        if path.exists():
            parts.append(fmt(json.loads(path.read_text())))
    if (HERE / "results" / "spread").is_dir():  # one file a machine: the script reads the folder
        sys.path.insert(0, str(HERE))
        parts.append(importlib.import_module("bench_spread").table(HERE / "results" / "spread"))
    gpu = {name: json.loads((HERE / "results" / f"{name}_gpu.json").read_text())
           for name in ("physics", "render") if (HERE / "results" / f"{name}_gpu.json").exists()}
    if gpu:
        parts.append(gpu_table(gpu.get("physics"), gpu.get("render")))
    text = README.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{README} lacks the markers {START} ... {END}")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(head + START + "\n" + "\n\n".join(p for p in parts if p) + "\n" + END + tail)
    print(f"updated the benchmark table in {README}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", action="store_true", help="only rebuild the table of docs/benchmarks.md")
    args = parser.parse_args()
    if not args.table:
        for script in ("bench_physics.py", "bench_render.py", "bench_ode_recovery.py", "bench_recoveries.py"):
            subprocess.run([sys.executable, str(HERE / script)], check=True)
    if not args.table:
        print("smoke against PhiFlow: run benchmarks/bench_smoke.py --phiflow PYTHON on its own (PhiFlow is no "
              "dependency); its last results are in the table")
    write_table()


if __name__ == "__main__":
    main()
