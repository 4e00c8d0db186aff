"""The bouncing ball two ways (issue 37, item 2): the exact-impact ODE ball (`physics.ball`) against the same
ball as a rigid sphere under our impulse contact model (`physics.rigid`, contact="impulse"), on gradSim's
demo_bounce2d scene (radius 0.75 m released 5 m up at 1 m/s along x, g = -9 m/s^2, restitution 0.8,
no friction, 100 frames at 30 fps).

The truth is the exact ball's motion (its arcs and impact times are closed form). For the rigid sphere (an
icosphere of 642 vertices on the sphere, one vertex pointing down, so that its lowest point is the ball's) at
SUBSTEPS steps a frame:

- motion: the largest distance of its centre from the exact one over the 100 frames, and the apex of each
  bounce against the exact apexes (each e^2 times the last height above the ground contact);
- fit: launch speed, gravity and restitution fitted to the exact centre trajectory (state space, so that the
  renderer plays no part: the model's own error is what is measured) by Levenberg-Marquardt (scipy's,
  Jacobian by forward-mode autodiff), from the demo's start (3 m/s, -10 m/s^2, 0.6);
- landscape: the trajectory loss along gravity (-9.3 .. -8.7, 61 points), other values true: its number of
  local minima and its roughness (the largest second difference over the smooth exact loss's).

    python benchmarks/bench_bounce_models.py         # about 5 minutes on 2 cores

Writes benchmarks/results/bounce_models.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
TRUTH = {"speed": 1.0, "gravity": -9.0, "restitution": 0.8}
START = {"speed": 3.0, "gravity": -10.0, "restitution": 0.6}
RADIUS, HEIGHT, FRAMES, FRAME_DT = 0.75, 5.0, 100, 1.0 / 30.0


def _down_sphere():
    """Icosphere vertices on the sphere of RADIUS, rotated so that one vertex points straight down."""
    from gradsim_jax.geometry.primitives import sphere_mesh

    v, f = sphere_mesh(RADIUS, 3, fit="vertices")
    a = v[np.argmin(v[:, 1])] / RADIUS  # the lowest vertex's direction, to (0, -1, 0)
    b = np.array([0.0, -1.0, 0.0])
    axis, c = np.cross(a, b), float(a @ b)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    rot = np.eye(3) + k + k @ k / (1.0 + c)  # Rodrigues' rotation taking a to b
    return v @ rot.T, f


def _vec(*parts):
    import jax.numpy as jnp

    return jnp.stack([jnp.asarray(p, jnp.float32) for p in parts])


def exact_model():
    """centres(speed, gravity, restitution) -> [frames + 1, 3] of the exact ball (traceable; built here, on the
    host)."""
    from gradsim_jax.geometry.ode import balls
    from gradsim_jax.physics import simulate
    from gradsim_jax.typing import replace_paths

    top, par, st = balls([0.0, HEIGHT, 0.0], [1.0, 0.0, 0.0], radius=RADIUS, restitution=0.8).build(
        gravity=(0.0, -9.0, 0.0))

    def centres(speed, gravity, restitution):
        p = replace_paths(par, {"world.gravity": _vec(0.0, gravity, 0.0), "ode.restitution": _vec(restitution)})
        s = replace_paths(st, {"ode.v": _vec(speed, 0.0, 0.0)[None]})
        return simulate(top, p, s, frames=FRAMES, substeps=1, frame_dt=FRAME_DT).ode.x[:, 0]

    return centres


def rigid_model(substeps: int):
    """centres(speed, gravity, restitution) of the rigid sphere under the impulse model (traceable)."""
    from gradsim_jax.geometry.scene import rigid_body
    from gradsim_jax.physics import simulate
    from gradsim_jax.typing import replace_paths

    v, f = _down_sphere()
    top, par, st = rigid_body(v, f, mass=1.0, pos=(0.0, HEIGHT, 0.0), vel=(1.0, 0.0, 0.0), contact_mu=0.0,
                              restitution=0.8).build(ground=True, rigid_contact="impulse", gravity=(0.0, -9.0, 0.0))

    def centres(speed, gravity, restitution):
        p = replace_paths(par, {"world.gravity": _vec(0.0, gravity, 0.0), "rigid.restitution": _vec(restitution)})
        s = replace_paths(st, {"rigid.v": _vec(speed, 0.0, 0.0)[None]})
        return simulate(top, p, s, frames=FRAMES, substeps=substeps, frame_dt=FRAME_DT).rigid.x[:, 0]

    return centres


def apexes(y: np.ndarray) -> list:
    """Heights of the centre's local maxima after the first impact (frames, so up to a frame's rise off)."""
    y = np.asarray(y)
    low = int(np.argmin(y[: len(y) // 2])) if len(y) > 2 else 0
    return [float(y[i]) for i in range(max(low, 1), len(y) - 1) if y[i - 1] < y[i] >= y[i + 1]]


def fit(model, truth_xyz: np.ndarray) -> dict:
    """Levenberg-Marquardt on (speed, gravity, restitution) from START to the exact centres."""
    import jax
    import jax.numpy as jnp
    from scipy.optimize import least_squares

    def residual(p):
        return (model(p[0], p[1], p[2]) - jnp.asarray(truth_xyz)).reshape(-1)

    res_fn, jac_fn = jax.jit(residual), jax.jit(jax.jacfwd(residual))
    started = time.perf_counter()
    sol = least_squares(lambda p: np.asarray(res_fn(jnp.asarray(p, jnp.float32)), np.float64),
                        np.array([START[k] for k in ("speed", "gravity", "restitution")]),
                        jac=lambda p: np.asarray(jac_fn(jnp.asarray(p, jnp.float32)), np.float64),
                        method="lm", x_scale=np.array([1.0, 1.0, 0.1]), max_nfev=200)
    keys = ("speed", "gravity", "restitution")
    return {"estimated": dict(zip(keys, map(float, sol.x))),
            "relative_error": {k: abs(float(x) / TRUTH[k] - 1.0) for k, x in zip(keys, sol.x)},
            "rms_centre_error_m": float(np.sqrt(np.mean(sol.fun ** 2))), "evaluations": int(sol.nfev),
            "wall_time_s": time.perf_counter() - started}


def landscape(model, truth_xyz: np.ndarray) -> dict:
    """The loss along gravity, other values true: local minima and roughness."""
    import jax
    import jax.numpy as jnp

    gs = np.linspace(-9.3, -8.7, 61)
    loss = jax.jit(jax.vmap(lambda g: jnp.mean(jnp.sum((model(TRUTH["speed"], g, TRUTH["restitution"])
                                                         - jnp.asarray(truth_xyz)) ** 2, -1))))
    values = np.asarray(loss(jnp.asarray(gs, jnp.float32)), np.float64)
    minima = int(np.sum((values[1:-1] < values[:-2]) & (values[1:-1] < values[2:])))
    return {"gravity": gs.tolist(), "loss": values.tolist(), "local_minima": minima,
            "largest_second_difference": float(np.max(np.abs(np.diff(values, 2)))),
            "argmin_gravity": float(gs[int(np.argmin(values))])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--substeps", default="4,16,64", help="rigid sphere steps per frame (comma-separated)")
    args = parser.parse_args()
    import jax

    exact_centres = exact_model()
    truth = np.asarray(jax.jit(exact_centres)(TRUTH["speed"], TRUTH["gravity"], TRUTH["restitution"]))
    exact_apex = apexes(truth[:, 1])
    rows = {"exact": {"model": "exact-impact ODE ball (physics.ball)", "apexes_m": exact_apex,
                      "fit": fit(exact_centres, truth), "landscape": landscape(exact_centres, truth)}}
    print("exact:", rows["exact"]["fit"]["relative_error"], flush=True)
    for s in (int(x) for x in args.substeps.split(",")):
        model = rigid_model(s)
        started = time.perf_counter()
        centres = np.asarray(jax.jit(model)(TRUTH["speed"], TRUTH["gravity"], TRUTH["restitution"]))
        row = {"model": f"rigid icosphere (642 vertices), impulse contact, {s} substeps a frame",
               "substeps": s, "forward_s_first_call": time.perf_counter() - started,
               "max_centre_error_m": float(np.max(np.linalg.norm(centres - truth, axis=-1))),
               "apexes_m": apexes(centres[:, 1]), "fit": fit(model, truth), "landscape": landscape(model, truth)}
        rows[f"rigid-{s}"] = row
        print(f"rigid, {s} substeps: centre off by up to {row['max_centre_error_m']:.3g} m, apexes "
              f"{row['apexes_m']} (exact {exact_apex}); fit {row['fit']['relative_error']}; "
              f"{row['landscape']['local_minima']} local minima along g", flush=True)
    rows["exact"]["landscape_ref"] = rows["exact"]["landscape"]["largest_second_difference"]
    data = {"scene": "gradSim demo_bounce2d: r = 0.75 m from 5 m at 1 m/s, g = -9, e = 0.8, mu = 0, 100 frames "
                     "at 30 fps", "truth": TRUTH, "start": START, "rows": rows,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores", "date": time.strftime("%Y-%m-%d")}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bounce_models.json").write_text(json.dumps(data, indent=1))
    print(f"written {RESULTS / 'bounce_models.json'}")


if __name__ == "__main__":
    main()
