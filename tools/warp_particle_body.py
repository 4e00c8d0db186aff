"""Reference motion of a cloth dropped onto a free box from NVIDIA Warp 1.8.1 (`warp.sim`), for
tests/physics/test_physics_particle_body.py: writes tests/data/warp_particle_body.json (the scene) and .npz (the
particles' positions and the box's pose at every frame).

Warp is no dependency of gradsim-jax; run this with a Python that has it (it installs from the package index and
runs on a CPU):

    python -m venv /tmp/warpenv && /tmp/warpenv/bin/pip install warp-lang==1.8.1 numpy
    /tmp/warpenv/bin/python tools/warp_particle_body.py

The scene: a 1 kg box (0.6 x 0.2 x 0.6 m) resting on the ground plane, free; a 6 x 6 cloth of 0.07 m cells
(Warp's `add_cloth_grid`, no bending, 10 g particles) released 5 cm above its top, off its centre, so that the
landing both presses and tilts the box. Warp's soft contacts push the particles out of the box's shape and the
box back at the same points (`eval_particle_body_contact_forces`), its rigid contacts hold the box on the ground
at its corners. Semi-implicit Euler, 64 substeps of a 30 fps frame, 1.5 s, `wp.sim.collide` before every step,
angular damping 0. Warp averages a particle's and a shape's coefficients: both carry the same.

Friction is viscous only, kf vt at every contact point (mu 1e3: the Coulomb limit is never reached), the one
branch where Warp 1.8.1's laws and ours coincide: its rigid friction is not Coulomb's (tools/warp_box_on_box.py)
but reduces to kf vt when mu fn exceeds it, and its particle friction caps at mu |c ke| where ours caps at mu |fn|.
Without friction the box would slide on the ground from the slight tilt of its landing, by millimetres that
depend on the landing's asymmetries. The cloth lands on the box's top face, away from its edges, where the
face-plane solid of `physics.particle_body` is the box's exact shape; the box meets the ground at its four
corners in both engines. The drop is gentle (0.99 m/s at the top: 0.5 mm a step into a contact spring of 1000
rad/s on a 10 g particle); from 0.2 m (2 m/s) the crumpling landing was sensitive enough that the cloths differed
by up to 5.5 mm during it and 1.1 mm after, the box by 0.55 mm.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import warp as wp
import warp.sim
from warp_rollout import frames

OUT = Path(__file__).resolve().parents[1] / "tests" / "data"

SCENE = dict(box_half=[0.3, 0.1, 0.3], box_mass=1.0, box_pos=[0.0, 0.1, 0.0], dim=6, cell=0.07,
             cloth_pos=[-0.15, 0.25, 0.18], mass=0.01, tri_ke=200.0, tri_ka=200.0, tri_kd=1.0, particle_radius=0.01,
             ke=1.0e4, kd=5.0, kf=10.0, mu=1.0e3, gravity=-9.81, fps=30.0, frames=45, substeps=64)


def build(c: dict):
    b = wp.sim.ModelBuilder(gravity=c["gravity"])
    flat = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), -0.5 * np.pi)  # the x-y grid into x-z
    b.add_cloth_grid(pos=wp.vec3(*c["cloth_pos"]), rot=flat, vel=wp.vec3(0.0, 0.0, 0.0), dim_x=c["dim"],
                     dim_y=c["dim"], cell_x=c["cell"], cell_y=c["cell"], mass=c["mass"], tri_ke=c["tri_ke"],
                     tri_ka=c["tri_ka"], tri_kd=c["tri_kd"], edge_ke=0.0, edge_kd=0.0,
                     particle_radius=c["particle_radius"])
    mat = dict(ke=c["ke"], kd=c["kd"], kf=c["kf"], mu=c["mu"])
    box = b.add_body(origin=wp.transform(wp.vec3(*c["box_pos"]), wp.quat_identity()))
    h = c["box_half"]
    b.add_shape_box(body=box, hx=h[0], hy=h[1], hz=h[2], density=float(c["box_mass"] / (8 * np.prod(h))), **mat)
    b.set_ground_plane(**mat)
    model = b.finalize("cpu")
    model.ground = True
    model.soft_contact_ke, model.soft_contact_kd = c["ke"], c["kd"]
    model.soft_contact_kf, model.soft_contact_mu = c["kf"], c["mu"]
    return model


def run(c: dict) -> tuple[np.ndarray, np.ndarray]:
    """(particle positions [frames + 1, n, 3], box poses [frames + 1, 7]: x, y, z, qx, qy, qz, qw)."""
    model = build(c)
    out = frames(model, wp.sim.SemiImplicitIntegrator(angular_damping=0.0), model.state(), model.state(), c,
                 lambda s: (s.particle_q.numpy().copy(), s.body_q.numpy()[0].copy()))
    return np.stack([x for x, _ in out]), np.stack([q for _, q in out])


def main() -> None:
    wp.init()
    x, q = run(SCENE)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "warp_particle_body.json").write_text(json.dumps({"warp": wp.config.version, "scene": SCENE}, indent=1))
    np.savez_compressed(OUT / "warp_particle_body.npz", particles=x.astype(np.float32), box=q.astype(np.float32))
    print("particles", x.shape, "box", q.shape, "finite" if np.all(np.isfinite(x)) and np.all(np.isfinite(q)) else
          "NOT FINITE")
    print("box pose at the end", q[-1].round(5), "lowest particle", x[-1, :, 1].min().round(5))


if __name__ == "__main__":
    main()
