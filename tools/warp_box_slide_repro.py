"""A small repro of NVIDIA Warp 1.8.1's rigid friction (`warp.sim`, `SemiImplicitIntegrator`), kept because it
blocks the box-on-box comparison of issue 39: a 1 kg box (0.2 x 0.16 x 0.2 m) resting on the ground plane, or on
a static box, set sliding at 1 m/s with mu 0.4 (ke 1e4, kd 100, kf 100; 64 substeps of a 30 fps frame).

Coulomb friction decelerates it at mu g = 3.92 m/s^2: it should stop after 0.255 s, 12.7 cm on. Measured (this
script, CPU): with friction_smoothing 1e-4 the box stops within about one frame, 1.5 cm on, hops 1.3 cm and slides
back 1 cm; with the default 1.0 it stops 2.9-3.9 cm on, hopping 0.3 cm. Frictionless (mu 0) it slides at exactly
1 m/s.

The cause is the friction law of `eval_rigid_contacts` (warp/sim/integrator_euler.py): ft = vt / vs *
min(kf vs, -mu (fn + fd)) with vs = `wp.norm_huber(vt, delta=friction_smoothing)`, and Warp's Huber norm is
delta (|vt| - delta / 2) above delta (0.5 |vt|^2 below it): a loss, not a length. With delta = 1e-4, vs is about
1e-4 |vt|, vt / vs is 1e4 times a unit vector, and ft = kf vt per contact point (the cap mu |fn| / delta is never
reached): at the first step of this script the four corners push the box back with 400 N (`body_f`), where
Coulomb's law gives 0.4 x 9.81 = 3.9 N. With delta = 1 the force is min(kf |vt|, 2 mu |fn| / |vt|) below 1 m/s.
Frictionless comparisons are in tools/warp_box_on_box.py.

    /tmp/warpenv/bin/python tools/warp_box_slide_repro.py
"""

import numpy as np
import warp as wp
import warp.sim


def run(static_kind: str, mu: float, smoothing: float, frames: int = 8, substeps: int = 64) -> np.ndarray:
    """Body position (x, y) after each frame."""
    b = wp.sim.ModelBuilder(gravity=-9.81)
    mat = dict(ke=1e4, kd=100.0, kf=100.0, mu=mu)
    if static_kind == "box":
        b.add_shape_box(body=-1, pos=wp.vec3(0.0, 0.0, 0.0), hx=0.6, hy=0.1, hz=0.4, **mat)
    y0 = 0.08 + (0.1 if static_kind == "box" else 0.0)
    body = b.add_body(origin=wp.transform(wp.vec3(-0.35, y0, 0.0), wp.quat_identity()))
    b.add_shape_box(body=body, hx=0.1, hy=0.08, hz=0.1, density=1.0 / (8 * 0.1 * 0.08 * 0.1), **mat)
    if static_kind == "ground":
        b.set_ground_plane(ke=1e4, kd=100.0, kf=100.0, mu=mu)
    m = b.finalize()
    m.ground = static_kind == "ground"
    s, s2 = m.state(), m.state()
    s.body_qd.assign(np.array([[0, 0, 0, 1.0, 0, 0]], np.float32))  # (angular, linear)
    integrator = wp.sim.SemiImplicitIntegrator(angular_damping=0.0, friction_smoothing=smoothing)
    dt = 1 / 30 / substeps
    xs = []
    for _ in range(frames):
        for _ in range(substeps):
            s.clear_forces()
            wp.sim.collide(m, s)
            integrator.simulate(m, s, s2, dt)
            s, s2 = s2, s
        xs.append(s.body_q.numpy()[0][:2].copy())
    return np.array(xs)


if __name__ == "__main__":
    np.set_printoptions(precision=4, suppress=True)
    for kind in ("ground", "box"):
        for mu, smoothing in ((0.4, 1e-4), (0.4, 1.0), (0.0, 1e-4)):
            print(kind, "mu", mu, "smoothing", smoothing, "x, y per frame:\n", run(kind, mu, smoothing).T)
