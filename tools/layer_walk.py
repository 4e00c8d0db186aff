"""How often `gradsim-jax fit` climbs back to a higher layer (docs/architecture.md).

Runs a small fit through the command line (`cli.main`) under `sys.setprofile` and records every call from a
function of one gradsim_jax module into a function of another: the modules the command enters, in order,
and the calls that go from a lower layer to a higher one (a "climb": only possible through something handed
down, a loss function or a callback, since no module imports up). Calls made by JAX itself (a traced
function run by `jax.jit`) have a JAX frame as their caller and are not counted; what they run was handed to
JAX by the layer that made it.

    python tools/layer_walk.py            # a 2 x 2-cell cloth, 8 frames at 16 x 16 px, 2 Adam iterations
    python tools/layer_walk.py --json     # the same as JSON

The layers are those of tests/test_architecture.py (`LAYERS`, `part`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_architecture import LAYERS, part  # noqa: E402

SCENE = """\
[scene]
grid = [2, 2]
cell = [0.2, 0.2]
fix = ["left"]

[material]
mass = 0.05
tri_ke = 100.0

[initial]
mass = 0.07

[camera]
distance = 1.5

[render]
width = 16
height = 16

[simulation]
fps = 30.0
substeps = 8
frames = 8

[fit]
free = ["mass"]
iterations = 2
polish = 1
"""


def walk(argv) -> dict:
    """Run `gradsim-jax` with `argv` under the profiler: {"status", "entered": modules in order of first
    entry, "climbs": {"caller -> callee": {"calls": n, "functions": [caller.fn -> callee.fn, ...]}}}."""
    from gradsim_jax.cli import main

    entered: dict[str, None] = {}
    climbs: dict[tuple, dict] = {}

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("gradsim_jax"):
            return
        entered.setdefault(callee, None)
        back = frame.f_back
        caller = back.f_globals.get("__name__", "") if back is not None else ""
        if not caller.startswith("gradsim_jax") or caller == callee:
            return
        if LAYERS[part(callee)] > LAYERS[part(caller)]:
            entry = climbs.setdefault((caller, callee), {"calls": 0, "functions": set()})
            entry["calls"] += 1
            entry["functions"].add(f"{back.f_code.co_name} -> {frame.f_code.co_name}")

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        status = main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return {"status": status, "entered": list(entered),
            "climbs": {f"{a} -> {b}": {"calls": v["calls"], "functions": sorted(v["functions"])}
                       for (a, b), v in climbs.items()}}


def fit_walk(folder: Path) -> dict:
    """The walk of `gradsim-jax fit` on the small scene above (its target rendered first, unprofiled)."""
    from gradsim_jax.cli import main

    scene = folder / "scene.toml"
    scene.write_text(SCENE)
    target = folder / "target.gif"
    assert main(["render", str(scene), "--out", str(target)]) == 0
    return walk(["fit", str(scene), "--target", str(target), "--true", "--out", str(folder / "run"),
                 "--no-progress"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print the walk as JSON")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = fit_walk(Path(tmp))
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    layers = [f"{m.removeprefix('gradsim_jax.') or 'gradsim_jax'} ({LAYERS[part(m)]})" for m in result["entered"]]
    print(f"gradsim-jax fit entered {len(layers)} modules, in this order:\n  " + "\n  ".join(layers))
    print(f"climbs back to a higher layer: {len(result['climbs'])} (caller module -> callee module)")
    for pair, v in result["climbs"].items():
        print(f"  {pair}: {v['calls']} calls ({'; '.join(v['functions'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
